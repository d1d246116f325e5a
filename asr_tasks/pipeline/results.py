"""What a shard's preprocessing hands the later stages of the day: small enough for XCom."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from asr_tasks.states import RecordingState
from asr_tasks.version import RecordingVersion


@dataclass
class StageResult:
    """One recording after preprocessing: preprocessed (its chunks are ready) or quarantined (with the reason)."""

    recording_id: str
    key: str
    state: str  # RecordingState.PREPROCESSED or RecordingState.QUARANTINED
    artefact_prefix: str  # RecordingVersion.prefix: plain text, as XCom carries it
    speech_seconds: float = 0.0
    reason: str | None = None

    @property
    def version(self) -> RecordingVersion:
        return RecordingVersion.at(self.artefact_prefix)


def preprocessed(results: list[StageResult]) -> list[RecordingVersion]:
    """The versions that reached transcription (not quarantined)."""
    return [r.version for r in results if r.state == RecordingState.PREPROCESSED]


def to_xcom(results: list[StageResult]) -> list[dict[str, Any]]:
    return [r.__dict__.copy() for r in results]


def from_xcom(rows: list[dict[str, Any]]) -> list[StageResult]:
    return [StageResult(**row) for row in rows]
