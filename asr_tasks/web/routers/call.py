"""The call page: the whole conversation with its audio, findings, analytics and timeline (``call_page``).
Each opening goes to the access log (``door.py``)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from asr_tasks.web.call_page import call_view, query_terms
from asr_tasks.web.deps import SearchQuery, Second
from asr_tasks.web.door import CallDoor
from asr_tasks.web.pages import render_page

PERMISSION = "read"

router = APIRouter()


@router.get("/call/{recording_id}", response_class=HTMLResponse)
def call(request: Request, recording_id: str, door: CallDoor, q: SearchQuery = "", t: Second = 0.0) -> HTMLResponse:
    """The whole conversation with its audio, findings, analytics and timeline; ``q`` marks a search's terms."""
    rec, segments = door.call(recording_id, f"call page at {t:.1f} s" + (f", from a search for {q!r}" if q else ""))
    findings = sorted((f for f in door.index().findings(rec.get("call_date") or "") if f["recording_id"] == recording_id),
                      key=lambda f: float(f["start"]))
    return render_page(request, "call.html", **call_view(rec, segments, findings, query_terms(q), t))
