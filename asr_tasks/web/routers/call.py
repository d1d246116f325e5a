"""The call page: the whole conversation with its audio, findings, analytics and timeline (``call_page``).
Each opening goes to the access log (``door.py``)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from asr_tasks.audit.score_overrides import ScoreOverrides
from asr_tasks.audit.scores import day_scores
from asr_tasks.inputs import InputError
from asr_tasks.web.call_page import audit_rules, call_view, query_terms
from asr_tasks.web.deps import SearchQuery, Second
from asr_tasks.web.door import CallDoor, Door
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
    return render_page(request, "call.html", here="search", back=back_to_search(back),
                       scorecard=scorecard_view(door, rec), **view)


def scorecard_view(door: Door, rec: dict[str, Any]) -> dict[str, Any] | None:
    """The call's scorecard as it stands: the score, and each section's questions with their answer and why (the
    reviewer's override, who and why, where there is one); None where the call has no score."""
    try:
        card, day = day_scores(str(rec.get("call_date") or ""), door.store(), door.settings,
                               ScoreOverrides(door.ledger, door.access))
    except InputError:  # the day was never audited
        return None
    now = next((s for s in day if s.call.recording_id == rec["recording_id"]), None)
    if card is None or now is None:
        return None
    sections = [(title, [{"id": q.id, "text": q.text, "weight": q.weight, "answer": now.answers.get(q.id),
                          "automatic": now.call.answers.get(q.id), "why": now.call.why.get(q.id, ""),
                          "override": now.overrides.get(q.id), "cleared": q.id in now.cleared} for q in questions])
                for title, questions in card.sections()]
    return {"id": card.id, "title": card.title, "score": now.score, "automatic_score": now.call.score,
            "sections": sections}
