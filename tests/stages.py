"""A recording's transcript as the stages make it, in memory: for tests that check those steps without a store."""

from __future__ import annotations

from asr_tasks.config import Settings, get_settings
from asr_tasks.models import Preprocessed, Segment, Transcript
from asr_tasks.pipeline.gate import gate_transcripts
from asr_tasks.pipeline.transcribe import assemble_transcript
from asr_tasks.text.masking import mask_transcript


def transcript_of(pre: Preprocessed, segments: list[Segment], model: str, settings: Settings | None = None,
                  gate: bool = True) -> Transcript:
    """Stitched, post-processed and masked as ``transcribe_shard`` stores it, then gated (``gate=False``: not yet)."""
    settings = settings or get_settings()
    transcript = mask_transcript(assemble_transcript(pre, segments, model, settings), settings)
    return gate_transcripts([transcript], settings)[0] if gate else transcript
