"""Preprocessing: probe, decode per channel, cut at pauses; a bad file is quarantined with its reason.

The manifest (channels, chunks, speech) is written last, as the checkpoint: a
retry finds it and redoes nothing. What fails because of the worker (a full
disk, a missing ffmpeg) fails the task for Airflow to retry instead.
"""

from __future__ import annotations

import errno
import logging
import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

from asr_tasks import PIPELINE_VERSION
from asr_tasks.config import AudioSettings, Settings
from asr_tasks.intake.artefacts import Artefacts
from asr_tasks.intake.audio import InvalidAudio, decode, pcm_duration, probe
from asr_tasks.intake.stores import ObjectStore
from asr_tasks.intake.vad import cut_chunks, frame_levels, get_vad, speech_regions
from asr_tasks.models import SAMPLE_RATE, AudioChunk, ChannelAudio, Preprocessed, Quarantine, Recording
from asr_tasks.pipeline.results import StageResult
from asr_tasks.records.ledger import open_ledger
from asr_tasks.states import RecordingState
from asr_tasks.version import RecordingVersion

log = logging.getLogger(__name__)


def preprocess_local(rec: Recording, source: Path, work: Path,
                     settings: AudioSettings) -> tuple[Preprocessed, dict[int, Path]]:
    """Probe, decode per channel and cut at pauses; raises InvalidAudio for bad input."""
    info = probe(source, settings)
    outputs = decode(source, info, work, settings)
    vad = get_vad()
    channels: list[ChannelAudio] = []
    chunks: list[AudioChunk] = []
    pcm_paths: dict[int, Path] = {}
    speech = 0.0
    for ch, path in outputs.items():
        channel = max(ch, 0)
        speaker = settings.speaker_for_channel(ch) if ch >= 0 else settings.mono_speaker
        pcm_key = RecordingVersion.of(rec).pcm(ch)
        probs = vad.probabilities(path)
        duration = round(pcm_duration(path, SAMPLE_RATE), 3)
        regions = speech_regions(
            probs,
            SAMPLE_RATE,
            threshold=settings.vad_threshold,
            min_silence_ms=settings.vad_min_silence_ms,
            speech_pad_ms=settings.vad_speech_pad_ms,
            levels=frame_levels(path),
            duration=duration,
        )
        speech += sum(r.end - r.start for r in regions)
        pieces = cut_chunks(regions, probs, SAMPLE_RATE, settings.chunk_max_seconds,
                            settings.chunk_overlap_seconds)
        for piece in pieces:
            chunks.append(AudioChunk(rec.recording_id, channel, speaker, pcm_key, piece.start, piece.end))
        channels.append(ChannelAudio(channel, speaker, pcm_key, duration,
                                     speech=[[round(r.start, 3), round(r.end, 3)] for r in regions]))
        pcm_paths[channel] = path
    chunks.sort(key=lambda c: (c.start, c.channel))
    pre = Preprocessed(
        recording=rec,
        duration=max(c.duration for c in channels),
        channels=channels,
        chunks=chunks,
        speech_seconds=round(speech, 3),
        pipeline_version=PIPELINE_VERSION,
    )
    return pre, pcm_paths


def preprocess(rec: Recording, store: ObjectStore, settings: Settings) -> StageResult:
    """Preprocess one recording into artefacts, or quarantine it with a reason."""
    version = RecordingVersion.of(rec)
    artefacts = Artefacts.of(store, settings)
    ledger = open_ledger(settings.ledger)
    if artefacts.exists(version.manifest):
        pre = artefacts.manifest(version)
        ledger.advance(rec.recording_id, RecordingState.PREPROCESSED)
        return StageResult(rec.recording_id, rec.key, RecordingState.PREPROCESSED, version.prefix, pre.speech_seconds)
    if artefacts.exists(version.quarantine):
        q = artefacts.quarantine(version)
        ledger.advance(rec.recording_id, RecordingState.QUARANTINED, reason=q.reason)
        return StageResult(rec.recording_id, rec.key, RecordingState.QUARANTINED, version.prefix, reason=q.reason)

    started = time.monotonic()
    work_root = settings.storage.path("work_dir")
    work_root.mkdir(parents=True, exist_ok=True)

    def quarantine(reason: str) -> StageResult:
        log.error("recording %s of %s: quarantined: %s", rec.recording_id, rec.call_date or "no day", reason)
        record = Quarantine(recording=rec, reason=reason, pipeline_version=PIPELINE_VERSION)
        artefacts.put(version.quarantine, record)
        ledger.advance(rec.recording_id, RecordingState.QUARANTINED, reason=reason, stage="preprocess",
                       seconds=time.monotonic() - started)
        return StageResult(rec.recording_id, rec.key, RecordingState.QUARANTINED, version.prefix, reason=reason)

    with ExitStack() as files:
        try:
            source = files.enter_context(store.local_copy(rec.bucket, rec.key))
        except FileNotFoundError:
            return quarantine("the object is gone: deleted after the day was listed")
        work = Path(files.enter_context(tempfile.TemporaryDirectory(dir=work_root)))
        try:
            pre, pcm_paths = preprocess_local(rec, source, work, settings.audio)
        except Exception as exc:
            reason = recording_fault(exc)
            if reason is None:
                raise  # the worker's fault, not the file's: the task fails and Airflow retries it
            if not isinstance(exc, InvalidAudio):
                log.exception("recording %s: unexpected error while preprocessing", rec.recording_id)
            return quarantine(reason)
        for channel in pre.channels:
            store.put_file(artefacts.bucket, channel.pcm_key, pcm_paths[channel.channel])
    artefacts.put(version.manifest, pre)  # written last: the checkpoint
    ledger.advance(rec.recording_id, RecordingState.PREPROCESSED, stage="preprocess", seconds=time.monotonic() - started,
                   audio_seconds=pre.duration)
    log.info("recording %s: %.1f s, %d channel(s), %d chunks, %.1f s speech",
             rec.recording_id, pre.duration, len(pre.channels), len(pre.chunks), pre.speech_seconds)
    return StageResult(rec.recording_id, rec.key, RecordingState.PREPROCESSED, version.prefix, pre.speech_seconds)


# Errors of the worker, not of the file: a full or read-only disk, too many open files, a device error.
WORKER_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EMFILE, errno.ENFILE, errno.EIO}
TOOLS = {"ffmpeg", "ffprobe"}


def recording_fault(exc: Exception) -> str | None:
    """Why decoding this recording failed, when the recording is the cause; None when the worker is.

    Whatever the file makes the decoder do (an ffmpeg crash, a timeout, an
    absurd header that makes a command too long, a value error deep in a
    library) quarantines the file; a full disk, a missing ffmpeg or exhausted
    memory would fail every file alike, so they fail the task for a retry.
    """
    if isinstance(exc, InvalidAudio):
        return str(exc)
    if isinstance(exc, MemoryError):
        return None
    if isinstance(exc, OSError) and (exc.errno in WORKER_ERRNOS or (
            isinstance(exc, FileNotFoundError) and str(exc.filename) in TOOLS)):
        return None
    return f"preprocessing failed: {type(exc).__name__}: {exc}"


def preprocess_shard(recordings: list[Recording], store: ObjectStore, settings: Settings) -> list[StageResult]:
    """Preprocess a shard, ``preprocess_workers`` recordings at a time; results in input order.

    Threads suffice: ffmpeg runs in a child process and the VAD's onnxruntime call
    releases the GIL. Each recording checkpoints on its own, so a retry of a
    failed shard redoes only what did not finish.
    """
    workers = settings.airflow.preprocess_workers or os.cpu_count() or 1
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(recordings)))) as pool:
        return list(pool.map(lambda rec: preprocess(rec, store, settings), recordings))

