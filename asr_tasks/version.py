"""Where a recording version's work products and a day's reports live in the artefact bucket.

Every file name of the artefact bucket is spelled here and only here, so a
stage, the page, the erasure and the retention run cannot disagree on where a
thing is. Light enough for the web app: no I/O, only keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from asr_tasks import PIPELINE_VERSION
from asr_tasks.config import AsrSettings
from asr_tasks.models import Recording

TRANSFORMERS_GPU_TYPES = ("bfloat16", "float16", "float32")


def compute_type(settings: AsrSettings) -> str:
    """The numeric type the model really runs in; part of the model tag.

    CTranslate2 takes the configured type as it is (int8 on CPU, float16 on GPU).
    transformers runs float32 on the CPU whatever is configured, and bfloat16,
    float16 or float32 on a GPU.
    """
    if settings.engine != "transformers":
        return settings.compute_type
    if settings.device == "cpu":
        return "float32"
    if settings.compute_type not in TRANSFORMERS_GPU_TYPES:
        raise ValueError(f"compute_type {settings.compute_type!r} is not supported by the transformers engine on "
                         f"{settings.device} (use one of: {', '.join(TRANSFORMERS_GPU_TYPES)})")
    return settings.compute_type


def model_tag(settings: AsrSettings) -> str:
    """Names the model and how it runs; part of every transcript's identity (and of its file names)."""
    return f"{settings.path('model_dir').name}-{settings.engine}-{compute_type(settings)}"


@dataclass(frozen=True)
class RecordingVersion:
    """One version of one recording (its id names bucket, key and ETag) as one pipeline version made it."""

    call_date: str | None
    recording_id: str
    pipeline_version: str = PIPELINE_VERSION

    @classmethod
    def of(cls, rec: Recording) -> RecordingVersion:
        """The recording as this pipeline version makes it."""
        return cls(rec.call_date, rec.recording_id)

    @classmethod
    def indexed(cls, document: dict[str, Any]) -> RecordingVersion:
        """The version an index document was made from: the pipeline version that indexed it, not this one."""
        return cls(document.get("call_date"), document["recording_id"],
                   str(document.get("pipeline_version") or PIPELINE_VERSION))

    @classmethod
    def at(cls, prefix: str) -> RecordingVersion:
        """The version whose artefacts are under ``prefix`` (``v<pipeline>/<date>/<recording id>``)."""
        version, day, recording_id = prefix.strip("/").split("/")
        return cls(None if day == "undated" else day, recording_id, version.removeprefix("v"))

    @classmethod
    def every(cls, call_date: str | None, recording_id: str) -> list[RecordingVersion]:
        """The recording under every pipeline version (whole numbers, counted up to this one)."""
        return [cls(call_date, recording_id, str(n)) for n in range(1, int(PIPELINE_VERSION) + 1)]

    @property
    def prefix(self) -> str:
        return f"v{self.pipeline_version}/{self.call_date or 'undated'}/{self.recording_id}"

    @property
    def folder(self) -> str:
        """The prefix as a folder, for listing: ``…/<id>/`` does not also match a longer id."""
        return self.prefix + "/"

    @property
    def manifest(self) -> str:
        """Preprocessing's checkpoint: channels, chunks, speech (``Preprocessed``); written last."""
        return f"{self.prefix}/manifest.json"

    @property
    def quarantine(self) -> str:
        """Why the recording could not be decoded (``Quarantine``): its version's end."""
        return f"{self.prefix}/quarantine.json"

    def pcm(self, channel: int) -> str:
        """A decoded channel (16 kHz mono s16le; -1: the one mono mix) the engine reads its chunks from."""
        return f"{self.prefix}/{'mix' if channel < 0 else f'ch{channel}'}.pcm"

    def transcript(self, model: str) -> str:
        """The raw transcript: the engine's text, stitched, post-processed and masked, not yet gated."""
        return f"{self.prefix}/transcript.{model}.json"

    def gated(self, model: str) -> str:
        """The gated transcript: what the index, the audit and the page read."""
        return f"{self.prefix}/gated.{model}.json"

    def unredacted(self, model: str) -> str:
        """The transcript before masking, kept only with ``keep_unredacted``: never indexed, never on the page."""
        return f"{self.prefix}/unredacted.{model}.json"

    @property
    def redacted_audio(self) -> str:
        """The recording as the page plays it when personal data was said in it: silent over every masked span."""
        return f"{self.prefix}/redacted.flac"


@dataclass(frozen=True)
class DayReports:
    """A call date's reports in the artefact bucket: the quality gate's (per model) and the QA audit's."""

    day: str
    pipeline_version: str = PIPELINE_VERSION

    @property
    def quality_prefix(self) -> str:
        """What every model's quality report of the day starts with; the model tag and a suffix follow."""
        return f"v{self.pipeline_version}/{self.day}/quality."

    def quality(self, model: str, suffix: str) -> str:
        """The quality report of one model: ``csv``, ``html``, or ``json`` (its rows, merged run by run)."""
        return f"{self.quality_prefix}{model}.{suffix}"

    def audit(self, suffix: str) -> str:
        """The QA audit's report: ``html``, ``csv`` or ``json`` (its summary, findings and who opened what)."""
        return f"reports/qa/{self.day}/qa-audit.{suffix}"

    @property
    def scores(self) -> str:
        """Each audited call's automatic answers on the scorecard, apart from the report: a review queue reads the
        report's findings and has no need of them."""
        return f"reports/qa/{self.day}/qa-scores.json"

    @property
    def calls(self) -> str:
        """The day's audited calls as trends read them: each one's agent, non-talk share, score and findings per
        rule (``audit.trends``)."""
        return f"reports/qa/{self.day}/qa-calls.json"
