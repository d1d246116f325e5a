"""A day's scorecard scores as they stand, and a reviewer's answer to one question of one call.

The automatic answers are the day's stored audit's (``stored_audit``); the
reviewers' overrides are the ledger's (``score_overrides``). An override
rewrites the day's scores in the index and in the day's calls in short that
trends read, so a search by score, the score facet and the trends agree with
the call page at once.
"""

from __future__ import annotations

from asr_tasks.audit.reports import stored_audit
from asr_tasks.audit.score_overrides import OverrideError, ScoreOverrides, Scored, standing
from asr_tasks.audit.scorecards import Scorecard, configured_scorecard
from asr_tasks.audit.trends import rescored_day_calls
from asr_tasks.config import Settings
from asr_tasks.index.base import TranscriptIndex
from asr_tasks.intake.stores import ObjectStore
from asr_tasks.inputs import InputError


def day_scores(call_date: str, store: ObjectStore, settings: Settings,
               overrides: ScoreOverrides) -> tuple[Scorecard | None, list[Scored]]:
    """The configured form and each of the day's calls scored on it as they stand; no form, or a day scored on
    another form than the configured one, gives no scores (``InputError`` for a day never audited)."""
    result = stored_audit(call_date, store, settings)
    if result is None:
        raise InputError(f"no audit is stored for {call_date} (asr audit --date {call_date} --rerun audits it)")
    card = configured_scorecard(settings)
    if card is None:
        return None, []
    return card, standing(card, [c for c in result.scores if c.scorecard == card.id], overrides)


def answer(call_date: str, recording_id: str, question_id: str, given: str | None, why: str, reviewer: str,
           store: ObjectStore, index: TranscriptIndex, settings: Settings, overrides: ScoreOverrides) -> Scored:
    """The reviewer's answer to a question of the call's scorecard (``given`` None: the audit's answer again),
    the day's scores rewritten in the index; the call as it now stands. ``OverrideError`` where it cannot be
    given."""
    card, day = day_scores(call_date, store, settings, overrides)
    call = next((s.call for s in day if s.call.recording_id == recording_id), None)
    if card is None or call is None:
        raise OverrideError(f"recording {recording_id} has no score of {call_date} on the configured scorecard")
    overrides.override(card, call, question_id, given, why, reviewer)
    _, day = day_scores(call_date, store, settings, overrides)
    scores = {s.call.recording_id: s.score for s in day}
    index.replace_scores(call_date, scores)
    rescored_day_calls(store, settings, call_date, scores)
    return next(s for s in day if s.call.recording_id == recording_id)
