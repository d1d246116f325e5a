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
from asr_tasks.audit.reviews import Reviews, dismissed
from asr_tasks.audit.trends import found_per_call, restated_day_calls
from asr_tasks.config import Settings
from asr_tasks.index.base import TranscriptIndex
from asr_tasks.intake.stores import ObjectStore
from asr_tasks.inputs import InputError


def day_scores(call_date: str, store: ObjectStore, settings: Settings,
               overrides: ScoreOverrides) -> tuple[Scorecard | None, list[Scored]]:
    """The configured form and each of the day's calls scored on it as they stand; no form, or a day scored on
    another form than the configured one, gives no scores (``InputError`` for a day never audited)."""
    card, scored, _ = _day(call_date, store, settings, overrides)
    return card, scored


def _day(call_date: str, store: ObjectStore, settings: Settings,
         overrides: ScoreOverrides) -> tuple[Scorecard | None, list[Scored], dict[str, dict[str, int]]]:
    """The form, the day's calls scored on it as they stand, and each call's findings per rule that reviewers
    left standing."""
    result = stored_audit(call_date, store, settings)
    if result is None:
        raise InputError(f"no audit is stored for {call_date} (asr audit --date {call_date} --rerun audits it)")
    dismissed_ids = dismissed(Reviews(overrides.ledger, overrides.access).between(call_date, call_date))
    found = found_per_call(result.findings, dismissed_ids)
    card = configured_scorecard(settings)
    if card is None:
        return None, [], found
    return card, standing(card, [c for c in result.scores if c.scorecard == card.id], overrides, dismissed_ids), found


def restate(call_date: str, store: ObjectStore, index: TranscriptIndex, settings: Settings,
            overrides: ScoreOverrides) -> list[Scored]:
    """The day's scores and calls in short (the index's, the trends') as reviews and overrides now leave them:
    after every verdict and every answer a reviewer gives. The day's calls as they stand."""
    _, day, found = _day(call_date, store, settings, overrides)
    scores = {s.call.recording_id: s.score for s in day}
    index.replace_scores(call_date, scores)
    restated_day_calls(store, settings, call_date, scores, found)
    return day


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
    return next(s for s in restate(call_date, store, index, settings, overrides)
                if s.call.recording_id == recording_id)
