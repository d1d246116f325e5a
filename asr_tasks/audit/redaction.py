"""A day's redaction report: what personal data the gated transcripts mask, and whether the audio hides it.

The audit's findings say where a card number was read out; this says how the
masking fared that day: per kind of personal data, how many values a pattern
found and how many only their context did (``by``), how many seconds the
redacted renditions are silent, and which recordings with personal data have no
redacted rendition in the store (the call page would have nothing safe to play).
It is read from the transcripts as the gate stored them, before the audit masks
anything more in memory, so it describes what was stored and rendered.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from asr_tasks.config import Settings
from asr_tasks.intake.artefacts import Artefacts
from asr_tasks.models import Transcript
from asr_tasks.version import RecordingVersion

CONTEXT = "context"  # a value found by what was said around it; anything else (or no ``by``) is a pattern's


@dataclass(frozen=True)
class KindCount:
    """How many values of one kind were masked, by a pattern and by their context."""

    kind: str
    by_pattern: int = 0
    by_context: int = 0

    @property
    def values(self) -> int:
        return self.by_pattern + self.by_context


@dataclass(frozen=True)
class RedactionReport:
    """One day's masking: counts per kind, seconds silenced, recordings whose redacted rendition is missing.

    ``missing_renditions`` holds recording ids only, never keys: a key names the
    call, and the report travels further than the store it describes.
    """

    redact_pii: bool
    margin_seconds: float  # each silenced part was widened by this on both sides
    kinds: tuple[KindCount, ...] = ()
    recordings_with_pii: int = 0
    seconds_silenced: float = 0.0
    missing_renditions: tuple[str, ...] = ()

    @property
    def values(self) -> int:
        return sum(k.values for k in self.kinds)

    @property
    def by_pattern(self) -> int:
        return sum(k.by_pattern for k in self.kinds)

    @property
    def by_context(self) -> int:
        return sum(k.by_context for k in self.kinds)

    def to_dict(self) -> dict[str, Any]:
        return {
            "redact_pii": self.redact_pii,
            "margin_seconds": self.margin_seconds,
            "kinds": {k.kind: {"pattern": k.by_pattern, "context": k.by_context} for k in self.kinds},
            "recordings_with_pii": self.recordings_with_pii,
            "seconds_silenced": round(self.seconds_silenced, 3),
            "missing_renditions": list(self.missing_renditions),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RedactionReport:
        kinds = data.get("kinds") or {}
        return cls(
            redact_pii=bool(data["redact_pii"]),
            margin_seconds=float(data.get("margin_seconds", 0.0)),
            kinds=tuple(KindCount(kind, int(n.get("pattern", 0)), int(n.get("context", 0)))
                        for kind, n in sorted(kinds.items())),
            recordings_with_pii=int(data.get("recordings_with_pii", 0)),
            seconds_silenced=float(data.get("seconds_silenced", 0.0)),
            missing_renditions=tuple(data.get("missing_renditions") or ()),
        )


def parts(value: dict[str, Any]) -> list[tuple[float, float]]:
    """The seconds a masked value is silent in the rendition: its parts, or its whole span for older transcripts
    (the same reading as ``text.masking.render_redacted_audio``)."""
    return [(float(a), float(b)) for a, b in value.get("parts") or [(value["start"], value["end"])]]


def silenced_seconds(transcript: Transcript, margin: float) -> float:
    """How long the recording's rendition is silent: every part widened by the margin and clipped to the
    recording, overlapping spans counted once."""
    spans = sorted((max(0.0, a - margin), min(transcript.duration, b + margin))
                   for value in transcript.pii for a, b in parts(value))
    total, start, end = 0.0, 0.0, 0.0
    for a, b in spans:
        if b <= a:
            continue
        if a > end:
            total += end - start
            start = a
        end = max(end, b)
    return total + end - start


def count_kinds(transcripts: Iterable[Transcript]) -> tuple[KindCount, ...]:
    """Values masked per kind (sorted by kind), split by how they were found."""
    counts: dict[str, list[int]] = {}
    for transcript in transcripts:
        for value in transcript.pii:
            by_context = value.get("by") == CONTEXT
            counts.setdefault(str(value["kind"]), [0, 0])[by_context] += 1
    return tuple(KindCount(kind, pattern, context) for kind, (pattern, context) in sorted(counts.items()))


def redaction_report(transcripts: list[Transcript], artefacts: Artefacts, settings: Settings) -> RedactionReport:
    """The day's report from its gated transcripts as stored (before the audit masks them in memory) and the
    store, which says whether each recording with personal data has its redacted rendition."""
    margin = settings.postprocess.pii_audio_margin_seconds
    with_pii = [t for t in transcripts if t.pii]
    return RedactionReport(
        redact_pii=settings.postprocess.redact_pii,
        margin_seconds=margin,
        kinds=count_kinds(with_pii),
        recordings_with_pii=len(with_pii),
        seconds_silenced=sum(silenced_seconds(t, margin) for t in with_pii),
        missing_renditions=tuple(sorted(t.recording.recording_id for t in with_pii
                                        if not artefacts.exists(RecordingVersion.of(t.recording).redacted_audio))),
    )
