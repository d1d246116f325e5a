"""The gate stage: a shard's raw transcripts through the quality gate, each outcome stored as the gated transcript."""

from __future__ import annotations

from asr_tasks.config import Settings
from asr_tasks.gate.checks import GATE_BATCH, gate
from asr_tasks.intake.artefacts import Artefacts
from asr_tasks.intake.stores import ObjectStore
from asr_tasks.models import Transcript
from asr_tasks.pipeline.results import StageResult
from asr_tasks.states import RecordingState
from asr_tasks.text.masking import store_gated
from asr_tasks.text.postprocess import hotword_terms


def gate_transcripts(transcripts: list[Transcript], settings: Settings) -> list[Transcript]:
    """The quality gate, told the dictionary's terms and the language the engine was configured for."""
    return gate(transcripts, settings.quality, tuple(hotword_terms(settings.postprocess)), settings.asr.language)


def gate_shard(results: list[StageResult], store: ObjectStore, settings: Settings) -> int:
    """Pass the shard's raw transcripts that have no gated one yet through the quality gate, in batches.

    Each outcome is written as the recording's gated transcript, so a retry does not
    validate again; returns how many were gated now.
    """
    artefacts = Artefacts.of(store, settings)
    versions = [r.version for r in results if r.state != RecordingState.QUARANTINED]
    todo = [v for v in versions if not artefacts.exists(v.gated(artefacts.model))]
    for start in range(0, len(todo), GATE_BATCH):
        raw = [artefacts.transcript(v) for v in todo[start : start + GATE_BATCH]]
        for transcript in gate_transcripts(raw, settings):
            store_gated(transcript, artefacts, settings)
    return len(todo)
