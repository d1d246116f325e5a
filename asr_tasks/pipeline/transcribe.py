"""Transcription: a shard's recordings through one loaded engine, in groups of speech, into raw transcripts.

The engine's segments are stitched on each recording's clock and post-processed
(``assemble_transcript``), masked (``text.masking``) and stored as the raw
transcript; the gate comes after, a shard at a time. ``asr transcribe`` runs the
same loop (``transcribe_groups``) over local files.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from asr_tasks.config import Settings
from asr_tasks.intake.artefacts import Artefacts
from asr_tasks.intake.audio import read_pcm
from asr_tasks.intake.stores import ObjectStore
from asr_tasks.models import SAMPLE_RATE, AudioChunk, Preprocessed, Segment, Transcript
from asr_tasks.records.ledger import open_ledger
from asr_tasks.states import RecordingState
from asr_tasks.text.analytics import analyse
from asr_tasks.text.masking import keeps_unredacted, mask_transcript
from asr_tasks.text.postprocess import hotwords, postprocess_segments, stitch
from asr_tasks.transcription.engine import AsrEngine
from asr_tasks.transcription.engines import get_engine
from asr_tasks.version import RecordingVersion

log = logging.getLogger(__name__)

Samples = list[tuple[AudioChunk, np.ndarray]]
Loader = Callable[[list[Preprocessed]], tuple[Samples, list[int]]]


def load_engine(settings: Settings) -> AsrEngine:
    """The configured engine (loaded once per process), handed the term dictionary's hotwords."""
    return get_engine(settings.asr, hotwords(settings.postprocess))


def load_chunks(pres: list[Preprocessed], store: ObjectStore, bucket: str) -> tuple[Samples, list[int]]:
    """Every chunk's samples from the artefact bucket, each with the index of the recording it belongs to."""
    items: Samples = []
    owners: list[int] = []
    for n, pre in enumerate(pres):
        by_pcm: dict[str, list[AudioChunk]] = {}
        for chunk in pre.chunks:
            by_pcm.setdefault(chunk.pcm_key, []).append(chunk)
        for pcm_key, chunks in by_pcm.items():
            with store.local_copy(bucket, pcm_key) as pcm:
                for chunk in chunks:
                    items.append((chunk, read_pcm(pcm, SAMPLE_RATE, chunk.start, chunk.end)))
                    owners.append(n)
    return items, owners


def unit_seconds(engine: AsrEngine, settings: Settings) -> float:
    """Speech per engine call: ``checkpoint_speech_seconds``, and never less than keeps the engine's batches full.

    Each call packs its own windows, so every boundary between calls leaves part
    of a window and of a batch empty; fewer, larger calls waste less.
    """
    return max(settings.asr.checkpoint_speech_seconds, engine.work_seconds)


def speech_groups(pres: list[Preprocessed], seconds: float) -> list[list[Preprocessed]]:
    """Consecutive groups of about ``seconds`` of speech, each for one batched engine call.

    Short calls only fill the model's batches and Whisper's 30 s windows when they
    travel together; a bounded group keeps the audio in memory bounded.
    """
    groups: list[list[Preprocessed]] = [[]]
    for pre in pres:
        if groups[-1] and sum(p.speech_seconds for p in groups[-1]) >= seconds:
            groups.append([])
        groups[-1].append(pre)
    return groups


def transcribe_group(engine: AsrEngine, items: Samples, owners: list[int], recordings: int) -> list[list[Segment]]:
    """All chunks of a group in one engine call; each recording's segments, in the group's order."""
    per_recording: list[list[Segment]] = [[] for _ in range(recordings)]
    for owner, segments in zip(owners, engine.transcribe_batch(items)):
        per_recording[owner].extend(segments)
    return per_recording


def transcribe_groups(engine: AsrEngine, pres: list[Preprocessed], load: Loader,
                      settings: Settings) -> Iterator[tuple[list[Transcript], float]]:
    """Each group's transcripts before masking (in input order) and the seconds the engine spent on it.

    Recordings go to the engine in groups of about ``unit_seconds`` of speech
    (``speech_groups``), all chunks of a group in one batched call; the next
    group's audio is read (``load``) while the engine works on the current one.
    """
    groups = speech_groups(pres, unit_seconds(engine, settings))
    with ThreadPoolExecutor(max_workers=1) as reader:
        loading = reader.submit(load, groups[0])
        for n, group in enumerate(groups):
            items, owners = loading.result()
            if n + 1 < len(groups):
                loading = reader.submit(load, groups[n + 1])
            started = time.monotonic()
            per_recording = transcribe_group(engine, items, owners, len(group))
            elapsed = time.monotonic() - started
            yield [assemble_transcript(pre, segments, engine.model_name, settings)
                   for pre, segments in zip(group, per_recording)], elapsed


def transcribe_shard(versions: list[RecordingVersion], store: ObjectStore, settings: Settings) -> dict[str, float]:
    """Transcribe every recording of a shard with one loaded model; returns recordings and speech seconds done.

    Each group's transcripts are written before the next group starts, so a crash
    costs one group and a retry skips what was written.
    """
    artefacts = Artefacts.of(store, settings)
    ledger = open_ledger(settings.ledger)
    done = {"recordings": 0.0, "speech_seconds": 0.0}
    todo: list[Preprocessed] = []
    for version in versions:
        if artefacts.exists(version.transcript(artefacts.model)):  # written before a crash cut the shard short
            ledger.advance(version.recording_id, RecordingState.TRANSCRIBED)
            continue
        todo.append(artefacts.manifest(version))
    if not todo:
        return done
    engine = load_engine(settings)
    for transcripts, elapsed in transcribe_groups(engine, todo, lambda g: load_chunks(g, store, artefacts.bucket),
                                                  settings):
        speech = sum(t.speech_seconds for t in transcripts)
        for unmasked in transcripts:
            version = RecordingVersion.of(unmasked.recording)
            if keeps_unredacted(settings):
                artefacts.put(version.unredacted(artefacts.model), unmasked)
            transcript = mask_transcript(unmasked, settings)  # before it is stored: no personal data in clear
            artefacts.put(version.transcript(artefacts.model), transcript)
            share = transcript.speech_seconds / speech if speech else 1 / len(transcripts)  # the group's time
            ledger.advance(version.recording_id, RecordingState.TRANSCRIBED, stage="transcribe",
                           seconds=elapsed * share)
            done["recordings"] += 1
            done["speech_seconds"] += transcript.speech_seconds
            log.info("recording %s: %d segments", transcript.recording.recording_id, len(transcript.segments))
    return done


def assemble_transcript(pre: Preprocessed, segments: list[Segment], model: str, settings: Settings) -> Transcript:
    """The engine's segments stitched on the recording's clock and post-processed: the transcript before masking."""
    stitched = stitch(segments)
    languages = Counter(s.language for s in stitched if s.language)
    language = languages.most_common(1)[0][0] if languages else None
    processed, steps = postprocess_segments(stitched, settings.postprocess, language)
    state, reason = RecordingState.INDEXED, None
    if not pre.chunks:
        state, reason = RecordingState.NEEDS_REVIEW, "no speech detected"
    elif not processed:
        state, reason = RecordingState.NEEDS_REVIEW, "speech detected but no text transcribed"
    return Transcript(
        recording=pre.recording,
        duration=pre.duration,
        segments=processed,
        language=language,
        model=model,
        pipeline_version=pre.pipeline_version,
        speech_seconds=pre.speech_seconds,
        state=state,
        reason=reason,
        postprocess=steps,
        analytics=analyse(pre, processed, settings.audio.vad_speech_pad_ms / 1000).to_dict(),
    )
