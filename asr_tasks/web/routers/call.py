"""The call page: the whole conversation with its audio, findings, analytics and timeline (``call_page``).
Each opening goes to the access log."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from asr_tasks.index.base import TranscriptIndex
from asr_tasks.models import Segment
from asr_tasks.records.ledger import Ledger
from asr_tasks.web.call_page import call_view, query_terms
from asr_tasks.web.deps import Access, AppLedger, IndexOpener, SearchQuery, Second, User, indexed
from asr_tasks.web.pages import render_page

PERMISSION = "read"

router = APIRouter()


def call_parts(index: TranscriptIndex, ledger: Ledger, recording_id: str) -> tuple[dict[str, Any], list[Segment]]:
    """The recording and its segments (404 unknown, 410 erased): what the call page and its exports show."""
    rec = indexed(index, ledger, recording_id)
    return rec, index.segments(recording_id)


@router.get("/call/{recording_id}", response_class=HTMLResponse)
def call(request: Request, recording_id: str, user: User, index: IndexOpener, ledger: AppLedger, access: Access,
         q: SearchQuery = "", t: Second = 0.0) -> HTMLResponse:
    """The whole conversation with its audio, findings, analytics and timeline; ``q`` marks a search's terms."""
    rec, segments = call_parts(index(), ledger, recording_id)
    findings = sorted((f for f in index().findings(rec.get("call_date") or "") if f["recording_id"] == recording_id),
                      key=lambda f: float(f["start"]))
    terms = query_terms(q)
    access.append(user, "read", recording_id=recording_id, detail=f"call page at {t:.1f} s" + (
        f", from a search for {q!r}" if q else ""))
    return render_page(request, "call.html", **call_view(rec, segments, findings, terms, t))
