"""A reviewer's answers on a call's scorecard, kept apart from the audit's automatic ones.

The audit answers what the form says it can (``scorecards.answer_calls``) and
stores those answers with the day's report; a reviewer's answer to a question
is a row of ``score_override`` in the ledger's database, with who, when and
why (masked, as everything people type), and every override is a row of the
access log. The score a call shows, and the index holds, is the form scored
with each question's override where there is one: a day audited again keeps
its overrides, and taking one back (``answer`` None) returns the question to
the audit's answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Iterable

from sqlalchemy import and_, delete, insert, select

from asr_tasks.audit.call_score import ANSWERS, CallScore
from asr_tasks.audit.scorecards import Scorecard, score_of
from asr_tasks.inputs import has_control
from asr_tasks.records.access_log import AccessLog
from asr_tasks.records.ledger import Ledger
from asr_tasks.records.tables import score_overrides
from asr_tasks.text.pii import mask_text
from asr_tasks.text.pii_policy import Policy

MAX_WHY_CHARS = 2000


class OverrideError(ValueError):
    """An override that cannot be made; the message says why."""


@dataclass(frozen=True)
class Override:
    recording_id: str
    scorecard: str
    question_id: str
    answer: str
    why: str
    reviewer: str
    overridden_at: str

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass(frozen=True)
class Scored:
    """A call's answers as they stand (an override where there is one, else the audit's), its score, and what
    was overridden."""

    call: CallScore
    answers: dict[str, str | None]
    score: float | None
    overrides: dict[str, Override]
    cleared: frozenset[str] = frozenset()  # questions answered yes because their findings were dismissed

    def to_dict(self) -> dict[str, Any]:
        return {"recording_id": self.call.recording_id, "key": self.call.key, "call_date": self.call.call_date,
                "agent_id": self.call.agent_id, "scorecard": self.call.scorecard, "score": self.score,
                "automatic_score": self.call.score, "answers": self.answers, "automatic": self.call.answers,
                "why": self.call.why, "overrides": {q: o.to_dict() for q, o in self.overrides.items()},
                "dismissed_findings": sorted(self.cleared)}


def scored(card: Scorecard, call: CallScore, overrides: dict[str, Override],
           dismissed: frozenset[str] = frozenset()) -> Scored:
    """The call's answers with the reviewer's in place of the audit's, and the score they give; a question the
    audit answered no from findings that reviewers have all dismissed is answered yes."""
    cleared = {q for q, ids in call.because.items() if ids and set(ids) <= dismissed}
    answers = {q.id: overrides[q.id].answer if q.id in overrides else "yes" if q.id in cleared
               else call.answers.get(q.id) for q in card.questions}
    return Scored(call, answers, score_of(card, answers), overrides, frozenset(cleared))


class ScoreOverrides:
    """The overrides of one ledger database; each written to the access log under the reviewer's name."""

    def __init__(self, ledger: Ledger, access: AccessLog, policy: Policy | None = None) -> None:
        self.ledger, self.engine, self.access, self.policy = ledger, ledger.engine, access, policy

    def override(self, card: Scorecard, call: CallScore, question_id: str, answer: str | None, why: str,
                 reviewer: str) -> Override | None:
        """The reviewer's answer to one question of the call's scorecard, or (``answer`` None) the audit's
        again. ``OverrideError`` where it is not one: an unknown question or answer, no reason given, control
        characters."""
        try:
            card.question(question_id)
        except KeyError:
            raise OverrideError(f"scorecard {card.id} has no question {question_id!r} (one of "
                                f"{', '.join(q.id for q in card.questions)})") from None
        if call.scorecard != card.id:
            raise OverrideError(f"the call was scored on scorecard {call.scorecard!r}, not {card.id!r}")
        if answer is not None and answer not in ANSWERS:
            raise OverrideError(f"answer {answer!r}: one of {', '.join(ANSWERS)}")
        why = why.strip()
        if has_control(why):
            raise OverrideError("the reason holds a control character")
        if answer is not None and not why:
            raise OverrideError("an override says why the reviewer answers otherwise than the audit")
        if len(why) > MAX_WHY_CHARS:
            raise OverrideError(f"a reason is at most {MAX_WHY_CHARS} characters")
        if self.policy is not None:
            why = mask_text(why, self.policy)
        t = score_overrides
        key = and_(t.c.recording_id == call.recording_id, t.c.scorecard == card.id, t.c.question_id == question_id)
        row = {"recording_id": call.recording_id, "scorecard": card.id, "question_id": question_id,
               "call_date": call.call_date, "answer": answer, "why": why, "reviewer": reviewer,
               "overridden_at": datetime.now(timezone.utc)}
        with self.engine.begin() as db:
            db.execute(delete(t).where(key))
            if answer is not None:
                db.execute(insert(t).values(**row))
        self.access.append(reviewer, "score", recording_id=call.recording_id,
                           detail=f"scorecard {card.id}, question {question_id}: "
                                  + (f"answered {answer}" if answer else "the audit's answer again"))
        return _override(row) if answer is not None else None

    def of(self, scorecard: str, recording_ids: Iterable[str]) -> dict[str, dict[str, Override]]:
        """The overrides of these calls on a scorecard, by recording id and question id."""
        asked = sorted(set(recording_ids))
        if not asked:
            return {}
        t = score_overrides
        out: dict[str, dict[str, Override]] = {}
        with self.engine.connect() as db:
            rows = db.execute(select(t).where(t.c.scorecard == scorecard, t.c.recording_id.in_(asked)))
            for row in rows.mappings():
                out.setdefault(row["recording_id"], {})[row["question_id"]] = _override(dict(row))
        return out


def _override(row: dict[str, Any]) -> Override:
    at = row["overridden_at"]
    return Override(row["recording_id"], row["scorecard"], row["question_id"], row["answer"], row["why"],
                    row["reviewer"], at.isoformat(timespec="seconds") if isinstance(at, datetime) else str(at))


def standing(card: Scorecard, calls: list[CallScore], overrides: ScoreOverrides,
             dismissed: frozenset[str] = frozenset()) -> list[Scored]:
    """Each call's answers and score as they stand: the audit's, less what dismissed findings answered, with the
    reviewers' overrides in place."""
    held = overrides.of(card.id, [c.recording_id for c in calls])
    return [scored(card, c, held.get(c.recording_id, {}), dismissed) for c in calls]
