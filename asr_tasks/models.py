"""The typed objects that flow between stages.

Each stage is a function from one of these to the next. They serialise to plain
JSON-able dicts (``to_dict``/``from_dict``) so that Airflow's XCom carries small
manifests and object storage carries the large ones.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from dataclasses import dataclass, field
from typing import Any, TypeVar

from asr_tasks.states import RecordingState

T = TypeVar("T", bound="_Serialisable")

SAMPLE_RATE = 16_000  # Hz: the PCM every stage after decoding reads (the VAD and the engines are made for it)


class _Serialisable:
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls: type[T], data: dict[str, Any]) -> T:
        names = _field_names(cls)  # type: ignore[arg-type]
        return cls(**{k: v for k, v in data.items() if k in names})


@functools.cache
def _field_names(cls: type) -> frozenset[str]:
    """A dataclass's field names, asked once per class (a month of findings is read back one by one)."""
    return frozenset(f.name for f in dataclasses.fields(cls))


def recording_id_for(bucket: str, key: str, etag: str) -> str:
    """Deterministic id of one version of one object: same bytes at same key, same id."""
    return hashlib.sha256(f"{bucket}\x00{key}\x00{etag}".encode()).hexdigest()[:24]


@dataclass
class Recording(_Serialisable):
    """One version of a call recording in object storage, plus its sidecar metadata."""

    recording_id: str
    bucket: str
    key: str
    etag: str
    size: int
    call_id: str
    call_date: str  # YYYY-MM-DD, from the key layout calls/YYYY/MM/DD/
    agent_id: str | None = None
    customer_id: str | None = None
    direction: str | None = None
    started_at: str | None = None


@dataclass
class ChannelAudio(_Serialisable):
    """Decoded 16 kHz mono s16le PCM of one channel, stored as an artefact."""

    channel: int
    speaker: str
    pcm_key: str
    duration: float
    speech: list[list[float]] = field(default_factory=list)  # the VAD's speech regions [start, end], padded


@dataclass
class AudioChunk(_Serialisable):
    """A span of speech (≤ chunk_max_seconds) with its absolute times in the recording."""

    recording_id: str
    channel: int
    speaker: str
    pcm_key: str
    start: float
    end: float

    @property
    def duration(self) -> float:
        return self.end - self.start


@dataclass
class Preprocessed(_Serialisable):
    """What preprocessing produced for one recording: its channels and speech chunks."""

    recording: Recording
    duration: float
    channels: list[ChannelAudio]
    chunks: list[AudioChunk]
    speech_seconds: float
    pipeline_version: str

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Preprocessed":
        return cls(
            recording=Recording.from_dict(data["recording"]),
            duration=data["duration"],
            channels=[ChannelAudio.from_dict(c) for c in data["channels"]],
            chunks=[AudioChunk.from_dict(c) for c in data["chunks"]],
            speech_seconds=data["speech_seconds"],
            pipeline_version=data["pipeline_version"],
        )


@dataclass
class SpokenWord(_Serialisable):
    """One word as the model heard it, on the recording's clock; ``text`` keeps its leading space, as Whisper's do."""

    text: str
    start: float
    end: float


@dataclass
class Segment(_Serialisable):
    """Timed text of one speaker, times absolute in the recording (seconds, ms precision).

    ``words`` are the model's words with their times, where the engine gives them
    (empty where it does not); they hold the model's spelling, before post-processing.
    """

    recording_id: str
    channel: int
    speaker: str
    start: float
    end: float
    text: str
    avg_logprob: float = 0.0
    no_speech_prob: float = 0.0
    language: str | None = None
    text_raw: str | None = None  # the model's words before post-processing; ``text`` is what is searched
    words: list[SpokenWord] = field(default_factory=list)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Segment":
        names = {f.name for f in dataclasses.fields(cls)} - {"words"}
        words = [SpokenWord.from_dict(w) for w in data.get("words") or []]
        return cls(**{k: v for k, v in data.items() if k in names}, words=words)


@dataclass
class Transcript(_Serialisable):
    """All segments of one recording, ordered by start time."""

    recording: Recording
    duration: float
    segments: list[Segment]
    language: str | None
    model: str
    pipeline_version: str
    speech_seconds: float = 0.0
    state: str = RecordingState.INDEXED
    reason: str | None = None
    quality: str | None = None  # the quality gate's outcome (a GateOutcome)
    quality_failures: list[str] = field(default_factory=list)  # names of the failed expectations
    postprocess: dict[str, list[str]] = field(default_factory=dict)  # steps applied, per language
    # personal data found and masked (kind, channel, speaker, start, end, masked), and by which policy
    pii: list[dict[str, Any]] = field(default_factory=list)
    pii_policy: str | None = None
    analytics: dict[str, Any] = field(default_factory=dict)  # talk, silence, overlap, interruptions (analytics.py)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Transcript":
        return cls(
            recording=Recording.from_dict(data["recording"]),
            duration=data["duration"],
            segments=[Segment.from_dict(s) for s in data["segments"]],
            language=data.get("language"),
            model=data["model"],
            pipeline_version=data["pipeline_version"],
            speech_seconds=data.get("speech_seconds", 0.0),
            state=data.get("state", RecordingState.INDEXED),
            reason=data.get("reason"),
            quality=data.get("quality"),
            quality_failures=list(data.get("quality_failures") or []),
            postprocess={k: list(v) for k, v in (data.get("postprocess") or {}).items()},
            pii=[dict(d) for d in data.get("pii") or []],
            pii_policy=data.get("pii_policy"),
            analytics=dict(data.get("analytics") or {}),
        )


@dataclass
class Quarantine(_Serialisable):
    """A recording that could not be processed, and why."""

    recording: Recording
    reason: str
    pipeline_version: str
    state: str = RecordingState.QUARANTINED

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Quarantine":
        return cls(
            recording=Recording.from_dict(data["recording"]),
            reason=data["reason"],
            pipeline_version=data["pipeline_version"],
            state=data.get("state", RecordingState.QUARANTINED),
        )


@dataclass
class SearchHit(_Serialisable):
    """One matching segment, with where it was said."""

    recording_id: str
    key: str
    call_date: str
    speaker: str
    channel: int
    start: float
    end: float
    text: str
    highlight: str
    agent_id: str | None = None
    score: float = 0.0
    quality: str | None = None  # the recording's quality gate outcome (a GateOutcome)
    confidence: float | None = None  # how sure the model was of the segment's words (``query.confidence``)
    match: str | None = None  # how the search matched it: exact, sound or fuzzy (``text.sounds.MATCH_KINDS``)
