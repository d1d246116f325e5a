"""Where a recording version's work products live in the artefact bucket; light enough for the web app."""

from __future__ import annotations

from asr_tasks import PIPELINE_VERSION


def version_prefix(call_date: str | None, recording_id: str) -> str:
    """Where this pipeline version keeps a recording version's artefacts."""
    return f"v{PIPELINE_VERSION}/{call_date or 'undated'}/{recording_id}"


def gated_key_for(prefix: str, model: str) -> str:
    """The gated transcript of one model: what the index, the audit and the page read."""
    return f"{prefix}/gated.{model}.json"


def redacted_audio_key(prefix: str) -> str:
    """The recording as the page plays it when personal data was said in it: silent over every masked span."""
    return f"{prefix}/redacted.flac"


def unredacted_key_for(prefix: str, model: str) -> str:
    """The transcript before masking, kept only when ``keep_unredacted`` is on: never indexed, never on the page."""
    return f"{prefix}/unredacted.{model}.json"
