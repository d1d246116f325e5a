"""The call page: the whole conversation with its audio, findings, analytics and timeline (``call_page``).
Each opening goes to the access log (``door.py``).

Its address names the call and the second only (``call/<id>?t=``): a result of a search opens it with a POST of
the search, whose words the page marks and whose results its way back posts again; the words never travel in a
URL. The player fetches nothing until the user plays (``preload="none"``), and each play carries a nonce of its
own (``Door.audio``), so opening the page is one ``read`` row and each play one ``play`` row."""

from __future__ import annotations

import secrets
import string
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from asr_tasks.audit.score_overrides import ScoreOverrides
from asr_tasks.audit.scores import day_scores
from asr_tasks.inputs import InputError
from asr_tasks.web.call_page import audit_rules, call_view, query_terms
from asr_tasks.web.deps import Second
from asr_tasks.web.door import PLAY_NONCE_LETTERS, CallDoor, Door
from asr_tasks.web.pages import render_page
from asr_tasks.web.routers.search import PostedSearch, SearchForm, fields

PERMISSION = "read"

router = APIRouter()


def play_nonce() -> str:
    """A nonce for the page's first play, letters only (``Door.audio``)."""
    return "".join(secrets.choice(string.ascii_lowercase) for _ in range(PLAY_NONCE_LETTERS))


def call_page(request: Request, recording_id: str, door: Door, t: float, asked: SearchForm | None) -> HTMLResponse:
    """The whole conversation with its audio, findings, analytics and timeline, opened at second ``t``; ``asked``
    is the search it was opened from: its terms are marked (and what sounds like them, with ``sounds_like``) and
    the page leads back to its results."""
    q = asked.q if asked else ""
    rec, segments = door.call(recording_id, f"call page at {t:.1f} s", query=q)
    findings = sorted((f for f in door.index().findings(rec.get("call_date") or "") if f["recording_id"] == recording_id),
                      key=lambda f: float(f["start"]))
    view = call_view(rec, segments, findings, query_terms(q, bool(asked and asked.sounds_like)), t,
                     audit_rules(door.settings))
    back = fields(asked.shown(), after=asked.after) if asked else []
    return render_page(request, "call.html", here="search", back=back, play=play_nonce(),
                       scorecard=scorecard_view(door, rec), **view)


@router.get("/call/{recording_id}", response_class=HTMLResponse)
def call(request: Request, recording_id: str, door: CallDoor, t: Second = 0.0) -> HTMLResponse:
    """The call opened at second ``t`` (a report's link, a result opened in a new tab)."""
    return call_page(request, recording_id, door, t, None)


@router.post("/call/{recording_id}", response_class=HTMLResponse)
def call_from_search(request: Request, recording_id: str, door: CallDoor, asked: PostedSearch,
                     t: Second = 0.0) -> HTMLResponse:
    """The call opened from a result of the search posted: its words marked, the way back to its results."""
    return call_page(request, recording_id, door, t, asked)


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
