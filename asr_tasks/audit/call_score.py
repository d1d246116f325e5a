"""One call's answers on a scorecard as the audit gave them: what the day's report stores and reads back
(``scorecards`` answers them; ``score_overrides`` lays a reviewer's answers over them)."""

from __future__ import annotations

from dataclasses import dataclass, field

from asr_tasks.models import _Serialisable

ANSWERS = ("yes", "no", "na")  # what a question can be answered; None: not answered yet


@dataclass
class CallScore(_Serialisable):
    """One call's automatic answers on a scorecard (by question id), why each, and its score without overrides."""

    recording_id: str
    key: str
    call_date: str
    agent_id: str | None
    scorecard: str
    answers: dict[str, str | None] = field(default_factory=dict)
    why: dict[str, str] = field(default_factory=dict)
    score: float | None = None
    # the findings that answered each question no (by id): a reviewer's dismissal of all of them answers it yes
    because: dict[str, list[str]] = field(default_factory=dict)
