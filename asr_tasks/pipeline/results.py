"""What a shard's preprocessing hands the later stages of the day: ids, states and seconds, small enough for
XCom and nothing that names a person (no key, no reason: the ledger and the quarantine record have those)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from asr_tasks.states import RecordingState
from asr_tasks.version import RecordingVersion


@dataclass
class StageResult:
    """One recording after preprocessing: preprocessed (its chunks are ready) or quarantined (with the reason)."""

    recording_id: str
    key: str  # the object's key, for the caller in this process; "" once through XCom
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


XCOM_FIELDS = ("recording_id", "state", "artefact_prefix", "speech_seconds")


def to_xcom(results: list[StageResult]) -> list[dict[str, Any]]:
    return [{name: getattr(r, name) for name in XCOM_FIELDS} for r in results]


def from_xcom(rows: list[dict[str, Any]]) -> list[StageResult]:
    return [StageResult(row["recording_id"], "", row["state"], row["artefact_prefix"], row["speech_seconds"])
            for row in rows]
