"""A day's scorecard scores as JSON, and a reviewer's answer to one question of a call's scorecard
(``audit.scores``): the override kept apart from the automatic answer, with who and why, and the call's score in
the index rewritten at once. Reading the scores is an access-log row; each override is one of its own."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query
from fastapi import Path as PathParam
from pydantic import BaseModel, ConfigDict, Field

from asr_tasks.audit.score_overrides import MAX_WHY_CHARS, OverrideError, ScoreOverrides
from asr_tasks.audit.scores import answer, day_scores
from asr_tasks.inputs import InputError
from asr_tasks.text.masking import configured_policy
from asr_tasks.web.deps import RECORDING_ID
from asr_tasks.web.door import CallDoor, Door
from asr_tasks.web.routers.progress import DAY_PATTERN

PERMISSION = "review"

router = APIRouter()


class Answer(BaseModel):
    """A reviewer's answer to one question (``answer`` null: the audit's answer again), and why."""

    model_config = ConfigDict(extra="forbid")
    question: str = Field(max_length=64)
    answer: str | None = Field(None, max_length=8)
    why: str = Field("", max_length=MAX_WHY_CHARS)


def overrides(door: Door) -> ScoreOverrides:
    """The ledger's overrides, reasons masked, each written to the request's access log."""
    return ScoreOverrides(door.ledger, door.access, configured_policy(door.settings))


@router.get("/api/scores")
def list_scores(door: CallDoor, date: Annotated[str, Query(pattern=DAY_PATTERN)]) -> dict[str, Any]:
    """Each call of the day scored on the configured scorecard: its answers (automatic and overridden) and score."""
    try:
        card, scored = day_scores(date, door.store(), door.settings, overrides(door))
    except InputError as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from exc
    door.log("read", detail=f"the scores of {date}")
    return {"date": date, "scorecard": card.id if card else None,
            "calls": [s.to_dict() for s in scored if door.sees(s.call.agent_id)]}


@router.post("/api/scores/{recording_id}")
def answer_question(recording_id: Annotated[str, PathParam(pattern=RECORDING_ID)], body: Answer,
                    door: CallDoor) -> dict[str, Any]:
    """The reviewer's answer to a question of the call's scorecard; the call's answers and score as they now
    stand (400: not an answer; 404: no such call; 410: erased)."""
    rec = door.recording(recording_id)
    try:
        now = answer(str(rec.get("call_date") or ""), recording_id, body.question, body.answer, body.why, door.user,
                     door.store(), door.index(), door.settings, overrides(door))
    except (OverrideError, InputError) as exc:
        raise HTTPException(status_code=400, detail=str(exc)) from exc
    return now.to_dict()
