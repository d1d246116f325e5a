"""Masking personal data wherever a stage stores a transcript, and silencing it in the audio the page plays.

Every path that stores a transcript or the audio the page plays goes through
here: transcription (``mask_transcript``, before the raw transcript is written;
``asr transcribe`` masks what it prints the same way), the gate
(``store_gated``: the redacted audio, before the gated transcript that makes a
call playable) and a reindex under a changed policy (``remask``). The policy
is ``configured_policy``. (The audit reads gated transcripts and masks what it reports with the same
policy files, in memory: ``audit.rules.audit``.)
"""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

from asr_tasks.config import Settings
from asr_tasks.intake.artefacts import Artefacts
from asr_tasks.intake.audio import probe, silence_spans
from asr_tasks.models import Transcript
from asr_tasks.text.pii import redact_transcript
from asr_tasks.text.pii_policy import Policy, load_policy
from asr_tasks.version import RecordingVersion


def configured_policy(settings: Settings) -> Policy | None:
    """The PII policy transcripts are masked by; None when redaction is off."""
    return load_policy(settings.postprocess.path("pii_dir")) if settings.postprocess.redact_pii else None


def keeps_unredacted(settings: Settings) -> bool:
    """Whether the transcript before masking is kept (the source a changed policy masks anew)."""
    return settings.postprocess.redact_pii and settings.postprocess.keep_unredacted


def mask_transcript(transcript: Transcript, settings: Settings) -> Transcript:
    """The transcript with its personal data masked by the configured policy (as it is when redaction is off)."""
    policy = configured_policy(settings)
    return transcript if policy is None else redact_transcript(transcript, policy)


def render_redacted_audio(transcript: Transcript, artefacts: Artefacts, settings: Settings) -> None:
    """Silence the spans of the transcript's personal data in a FLAC rendition of the recording.

    Each span is a part of a value: the words that said it (the whole segment that
    held it where the engine gave no word times), padded by the margin; a number
    said in two goes has two parts, and the pause between them is left as it was.
    """
    margin = settings.postprocess.pii_audio_margin_seconds
    spans = [(float(a) - margin, float(b) + margin) for d in transcript.pii
             for a, b in d.get("parts") or [(d["start"], d["end"])]]
    rec = transcript.recording
    work_root = settings.storage.path("work_dir")
    work_root.mkdir(parents=True, exist_ok=True)
    store = artefacts.store
    with store.local_copy(rec.bucket, rec.key) as source, tempfile.TemporaryDirectory(dir=work_root) as work:
        out = Path(work) / "rendition.flac"
        silence_spans(source, probe(source, settings.audio), out, spans)
        store.put_file(artefacts.bucket, RecordingVersion.of(rec).redacted_audio, out)


def store_gated(transcript: Transcript, artefacts: Artefacts, settings: Settings) -> None:
    """The gated transcript, after its redacted audio: the gated transcript is what makes the call playable."""
    if transcript.pii:
        render_redacted_audio(transcript, artefacts, settings)
    artefacts.put(RecordingVersion.of(transcript.recording).gated(artefacts.model), transcript)


def remask(gated: Transcript, policy: Policy, artefacts: Artefacts, settings: Settings) -> Transcript:
    """The gated and raw transcripts of a recording masked by ``policy``, stored, with their redacted audio.

    Where the transcript before masking was kept (``keep_unredacted``), both are masked
    anew from it, so a changed policy can also mask less; otherwise the stored masked
    text is masked further, and what an earlier policy masked stays masked.
    """
    version = RecordingVersion.of(gated.recording)
    raw_key = version.transcript(artefacts.model)
    if artefacts.exists(version.unredacted(artefacts.model)):
        raw = redact_transcript(artefacts.unredacted(version), policy)
        artefacts.put(raw_key, raw)
        masked = replace(raw, state=gated.state, reason=gated.reason, quality=gated.quality,
                         quality_failures=gated.quality_failures)
    else:
        if artefacts.exists(raw_key):
            artefacts.put(raw_key, redact_transcript(artefacts.transcript(version), policy))
        masked = redact_transcript(gated, policy)
    store_gated(masked, artefacts, settings)
    return masked
