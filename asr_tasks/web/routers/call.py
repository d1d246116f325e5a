"""The call page: the whole conversation with its audio, findings, analytics and timeline (``call_page``).
Each opening goes to the access log (``door.py``)."""

from __future__ import annotations

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from asr_tasks.web.call_page import audit_rules, call_view, query_terms
from asr_tasks.web.deps import SearchQuery, Second
from asr_tasks.web.door import CallDoor
from asr_tasks.web.pages import back_to_search, render_page

PERMISSION = "read"
MAX_BACK_CHARS = 4000  # the query string of the search a call was opened from: its words and filters

router = APIRouter()


@router.get("/call/{recording_id}", response_class=HTMLResponse)
def call(request: Request, recording_id: str, door: CallDoor, q: SearchQuery = "", t: Second = 0.0,
         back: str = Query("", max_length=MAX_BACK_CHARS), sounds_like: bool = False) -> HTMLResponse:
    """The whole conversation with its audio, findings, analytics and timeline; ``q`` marks a search's terms (and
    what sounds like them, with ``sounds_like``) and ``back`` is that search, which the page leads back to."""
    rec, segments = door.call(recording_id, f"call page at {t:.1f} s", query=q)
    findings = sorted((f for f in door.index().findings(rec.get("call_date") or "") if f["recording_id"] == recording_id),
                      key=lambda f: float(f["start"]))
    view = call_view(rec, segments, findings, query_terms(q, sounds_like), t, audit_rules(door.settings))
    return render_page(request, "call.html", here="search", back=back_to_search(back), **view)
