"""Where a recording version stands in the ledger, and what the quality gate said of its transcript.

Two vocabularies, each one ``StrEnum`` (their values are what the ledger, the
index and the reports store): a recording's state moves forward through
``RecordingState`` (``superseded``, ``held`` and the erasure's two are off that
way: no stage moves a row into or out of them); the gate's outcome
(``GateOutcome``) is a transcript's ``quality`` and decides which final state it
reaches.
"""

from __future__ import annotations

from enum import StrEnum


class RecordingState(StrEnum):
    SENSED = "sensed"
    PREPROCESSED = "preprocessed"
    TRANSCRIBED = "transcribed"
    INDEXED = "indexed"  # searchable; the gate passed it
    NEEDS_REVIEW = "needs_review"  # searchable, flagged: the gate failed it, or nothing was said
    QUARANTINED = "quarantined"  # not transcribed: the file is bad (the reason says why)
    SUPERSEDED = "superseded"  # a newer version of the object was sensed; it is the view's now
    HELD = "held"  # a newer version that waits behind a legal hold on the current one (the reason names the hold)
    ERASING = "erasing"  # an erasure began: what the recording left behind is being removed
    ERASED = "erased"  # a tombstone: who erased it, when and why; nothing of its content

    @property
    def rank(self) -> int | None:
        """Its place on the way forward (the final states share the last); None off that way."""
        return _RANK.get(self)

    @property
    def final(self) -> bool:
        return self in FINAL_STATES


FINAL_STATES = (RecordingState.INDEXED, RecordingState.NEEDS_REVIEW, RecordingState.QUARANTINED)
FAILED_STATES = (RecordingState.QUARANTINED, RecordingState.NEEDS_REVIEW)  # what an operator looks into
GONE_STATES = (RecordingState.ERASING, RecordingState.ERASED)
# Not a key's current version: no stage works on one and the index stage writes nothing of it (it would replace
# the current version's documents, or bring an erased call back).
NOT_CURRENT_STATES = (RecordingState.SUPERSEDED, RecordingState.HELD, *GONE_STATES)
_RANK = {RecordingState.SENSED: 0, RecordingState.PREPROCESSED: 1, RecordingState.TRANSCRIBED: 2,
         **{state: 3 for state in FINAL_STATES}}


class GateOutcome(StrEnum):
    PASS = "pass"
    FLAGGED = "needs_review"  # the recording's state becomes NEEDS_REVIEW
