"""Where a recording version's work products live in the artefact bucket; light enough for the web app."""

from __future__ import annotations

from asr_tasks import PIPELINE_VERSION


def version_prefix(call_date: str | None, recording_id: str, pipeline_version: str = PIPELINE_VERSION) -> str:
    """Where a pipeline version (this one unless named) keeps a recording version's artefacts."""
    return f"v{pipeline_version}/{call_date or 'undated'}/{recording_id}"


def every_version_prefix(call_date: str | None, recording_id: str) -> list[str]:
    """Where any pipeline version (whole numbers, counted up to this one) kept a recording version's artefacts."""
    return [version_prefix(call_date, recording_id, str(n)) + "/" for n in range(1, int(PIPELINE_VERSION) + 1)]


def gated_key_for(prefix: str, model: str) -> str:
    """The gated transcript of one model: what the index, the audit and the page read."""
    return f"{prefix}/gated.{model}.json"


def redacted_audio_key(prefix: str) -> str:
    """The recording as the page plays it when personal data was said in it: silent over every masked span."""
    return f"{prefix}/redacted.flac"


def unredacted_key_for(prefix: str, model: str) -> str:
    """The transcript before masking, kept only when ``keep_unredacted`` is on: never indexed, never on the page."""
    return f"{prefix}/unredacted.{model}.json"
