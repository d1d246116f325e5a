"""The stages of one day's run, as plain functions that Airflow tasks and the CLI both call.

Where each fact lives: the ledger alone says where a recording version stands
(its state and reason); object storage holds what each stage made of it (chunks,
raw transcript, gated transcript), each stage reading one artefact and writing the
next; the index is a search view rebuilt from gated transcripts (``reindex_day``)
and decides nothing.

preprocess (manifest.json, PCM) -> transcribe (transcript.<model>.json) -> gate
(gated.<model>.json, the day's quality report) -> index (documents; the ledger's
final state). Large data goes to the artefact bucket; what the functions return
is small (keys, ids, states). Every stage first looks for its own artefact, so a
retry or a re-run of the day redoes nothing that finished.
"""

from __future__ import annotations

import errno
import logging
import os
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, replace
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from asr_tasks import PIPELINE_VERSION, quality
from asr_tasks.analytics import analyse
from asr_tasks.artefacts import gated_key_for, redacted_audio_key, unredacted_key_for, version_prefix
from asr_tasks.audio import InvalidAudio, decode, pcm_duration, probe, read_pcm, silence_spans
from asr_tasks.config import AirflowSettings, AudioSettings, Settings, get_settings
from asr_tasks.engines import AsrEngine, get_engine, model_tag
from asr_tasks.index import TranscriptIndex
from asr_tasks.ledger import FINAL_STATES, PREPROCESSED, SUPERSEDED, TRANSCRIBED, open_ledger
from asr_tasks.models import (
    INDEXED,
    NEEDS_REVIEW,
    QUARANTINED,
    AudioChunk,
    ChannelAudio,
    Preprocessed,
    Quarantine,
    Recording,
    Segment,
    Transcript,
)
from asr_tasks.pii import Policy, load_policy, redact_transcript
from asr_tasks.postprocess import hotword_terms, hotwords, postprocess_segments, stitch
from asr_tasks.storage import ObjectStore, get_json, list_recordings, put_json
from asr_tasks.vad import cut_chunks, frame_levels, get_vad, speech_regions

log = logging.getLogger(__name__)


@dataclass
class StageResult:
    """What one recording's preprocessing reports downstream (small enough for XCom)."""

    recording_id: str
    key: str
    state: str  # "preprocessed" or "quarantined"
    artefact_prefix: str
    speech_seconds: float = 0.0
    reason: str | None = None


def artefact_prefix(rec: Recording) -> str:
    return version_prefix(rec.call_date, rec.recording_id)


def recording_id_of(prefix: str) -> str:
    """The recording id an artefact prefix belongs to (its last part)."""
    return prefix.rsplit("/", 1)[-1]


def sense(store: ObjectStore, settings: Settings, day: date) -> list[Recording]:
    """The day's recordings, and those that arrived late for the ``resense_days`` before it (versions the
    ledger has not seen), each entered in the ledger (a new ETag or model version starts its row over)."""
    ledger = open_ledger(settings.ledger)
    recordings = list_recordings(store, settings.storage, day)
    late: list[Recording] = []
    for back in range(1, settings.storage.resense_days + 1):
        earlier = list_recordings(store, settings.storage, day - timedelta(days=back))
        seen = ledger.known(r.recording_id for r in earlier)
        if seen:  # that day's own run has sensed it; a day not yet run (a backfill's gap) is left to its run
            late += [r for r in earlier if r.recording_id not in seen]
    ledger.sensed(recordings + late, model_tag(settings.asr), PIPELINE_VERSION)
    log.info("%s: %d recordings under %s, %d late for earlier days", day, len(recordings),
             settings.storage.recordings_prefix, len(late))
    return recordings + late


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
        pcm_key = f"{artefact_prefix(rec)}/{path.name}"
        probs = vad.probabilities(path)
        duration = round(pcm_duration(path, settings.sample_rate), 3)
        regions = speech_regions(
            probs,
            settings.sample_rate,
            threshold=settings.vad_threshold,
            min_silence_ms=settings.vad_min_silence_ms,
            speech_pad_ms=settings.vad_speech_pad_ms,
            levels=frame_levels(path),
            duration=duration,
        )
        speech += sum(r.end - r.start for r in regions)
        pieces = cut_chunks(regions, probs, settings.sample_rate, settings.chunk_max_seconds,
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
    prefix = artefact_prefix(rec)
    bucket = settings.storage.artefacts_bucket
    ledger = open_ledger(settings.ledger)
    if store.exists(bucket, f"{prefix}/manifest.json"):
        pre = Preprocessed.from_dict(get_json(store, bucket, f"{prefix}/manifest.json"))
        ledger.advance(rec.recording_id, PREPROCESSED)
        return StageResult(rec.recording_id, rec.key, "preprocessed", prefix, pre.speech_seconds)
    if store.exists(bucket, f"{prefix}/quarantine.json"):
        q = Quarantine.from_dict(get_json(store, bucket, f"{prefix}/quarantine.json"))
        ledger.advance(rec.recording_id, QUARANTINED, reason=q.reason)
        return StageResult(rec.recording_id, rec.key, QUARANTINED, prefix, reason=q.reason)

    started = time.monotonic()
    work_root = settings.storage.path("work_dir")
    work_root.mkdir(parents=True, exist_ok=True)

    def quarantine(reason: str) -> StageResult:
        log.error("%s/%s: quarantined: %s", rec.bucket, rec.key, reason)
        record = Quarantine(recording=rec, reason=reason, pipeline_version=PIPELINE_VERSION)
        put_json(store, bucket, f"{prefix}/quarantine.json", record.to_dict())
        ledger.advance(rec.recording_id, QUARANTINED, reason=reason, stage="preprocess",
                       seconds=time.monotonic() - started)
        return StageResult(rec.recording_id, rec.key, QUARANTINED, prefix, reason=reason)

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
                log.exception("%s/%s: unexpected error while preprocessing", rec.bucket, rec.key)
            return quarantine(reason)
        for channel in pre.channels:
            store.put_file(bucket, channel.pcm_key, pcm_paths[channel.channel])
    put_json(store, bucket, f"{prefix}/manifest.json", pre.to_dict())  # written last: the checkpoint
    ledger.advance(rec.recording_id, PREPROCESSED, stage="preprocess", seconds=time.monotonic() - started,
                   audio_seconds=pre.duration)
    log.info("%s: %.1f s, %d channel(s), %d chunks, %.1f s speech",
             rec.key, pre.duration, len(pre.channels), len(pre.chunks), pre.speech_seconds)
    return StageResult(rec.recording_id, rec.key, "preprocessed", prefix, pre.speech_seconds)


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


def plan_shards(recordings: list[Recording], settings: AirflowSettings) -> list[list[Recording]]:
    """The day's recordings in shards of at most ``shard_max_recordings`` and ``shard_max_bytes``, in key order.

    A shard is one preprocessing task (CPU workers) followed by one transcription
    task (GPU pool). Shards are planned from the listing, before any decoding, so
    the GPU starts on the first shard while the CPU workers preprocess the next,
    and a day of thousands of calls is a few dozen task instances, not thousands.
    """
    shards: list[list[Recording]] = []
    size = 0
    for rec in sorted(recordings, key=lambda r: r.key):
        full = bool(shards) and (len(shards[-1]) >= settings.shard_max_recordings
                                 or size + rec.size > settings.shard_max_bytes)
        if not shards or full:
            shards.append([])
            size = 0
        shards[-1].append(rec)
        size += rec.size
    return shards


def preprocess_shard(recordings: list[Recording], store: ObjectStore, settings: Settings) -> list[StageResult]:
    """Preprocess a shard, ``preprocess_workers`` recordings at a time; results in input order.

    Threads suffice: ffmpeg runs in a child process and the VAD's onnxruntime call
    releases the GIL. Each recording checkpoints on its own, so a retry of a
    failed shard redoes only what did not finish.
    """
    workers = settings.airflow.preprocess_workers or os.cpu_count() or 1
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(recordings)))) as pool:
        return list(pool.map(lambda rec: preprocess(rec, store, settings), recordings))


def load_chunks(pres: list[Preprocessed], store: ObjectStore, bucket: str,
                sample_rate: int) -> tuple[list[tuple[AudioChunk, np.ndarray]], list[int]]:
    """Every chunk's samples, each with the index of the recording it belongs to."""
    items: list[tuple[AudioChunk, np.ndarray]] = []
    owners: list[int] = []
    for n, pre in enumerate(pres):
        by_pcm: dict[str, list[AudioChunk]] = {}
        for chunk in pre.chunks:
            by_pcm.setdefault(chunk.pcm_key, []).append(chunk)
        for pcm_key, chunks in by_pcm.items():
            with store.local_copy(bucket, pcm_key) as pcm:
                for chunk in chunks:
                    items.append((chunk, read_pcm(pcm, sample_rate, chunk.start, chunk.end)))
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


def transcribe_group(engine: AsrEngine, items: list[tuple[AudioChunk, np.ndarray]], owners: list[int],
                     recordings: int) -> list[list[Segment]]:
    """All chunks of a group in one engine call; each recording's segments, in the group's order."""
    per_recording: list[list[Segment]] = [[] for _ in range(recordings)]
    for owner, segments in zip(owners, engine.transcribe_batch(items)):
        per_recording[owner].extend(segments)
    return per_recording


def build_transcript(
    pre: Preprocessed, segments: list[Segment], model: str, settings: Settings | None = None, gate: bool = True
) -> Transcript:
    """Stitch, post-process, mask personal data and pass the quality gate.

    ``gate=False`` leaves the gate to ``gate_shard``, which validates a whole shard in
    one run instead of paying Great Expectations' start-up cost per recording.
    """
    settings = settings or get_settings()
    transcript = mask_transcript(assemble_transcript(pre, segments, model, settings), settings)
    return gate_transcripts([transcript], settings)[0] if gate else transcript


def assemble_transcript(pre: Preprocessed, segments: list[Segment], model: str, settings: Settings) -> Transcript:
    """The engine's segments stitched on the recording's clock and post-processed: the transcript before masking."""
    stitched = stitch(segments)
    languages = Counter(s.language for s in stitched if s.language)
    language = languages.most_common(1)[0][0] if languages else None
    processed, steps = postprocess_segments(stitched, settings.postprocess, language)
    state, reason = INDEXED, None
    if not pre.chunks:
        state, reason = NEEDS_REVIEW, "no speech detected"
    elif not processed:
        state, reason = NEEDS_REVIEW, "speech detected but no text transcribed"
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


def mask_transcript(transcript: Transcript, settings: Settings) -> Transcript:
    """The transcript with its personal data masked by the configured policy (as it is when redaction is off)."""
    if not settings.postprocess.redact_pii:
        return transcript
    return redact_transcript(transcript, load_policy(settings.postprocess.path("pii_dir")))


def gate_transcripts(transcripts: list[Transcript], settings: Settings) -> list[Transcript]:
    """The quality gate, told the dictionary's terms and the language the engine was configured for."""
    return quality.gate(transcripts, settings.quality, tuple(hotword_terms(settings.postprocess)),
                        settings.asr.language)


def load_engine(settings: Settings) -> AsrEngine:
    """The configured engine (loaded once per process), handed the term dictionary's hotwords."""
    return get_engine(settings.asr, hotwords(settings.postprocess))


def transcript_key(prefix: str, settings: Settings) -> str:
    """The raw transcript: the engine's text, stitched and post-processed, not yet gated."""
    return f"{prefix}/transcript.{model_tag(settings.asr)}.json"


def unredacted_key(prefix: str, settings: Settings) -> str:
    """The transcript before masking (``keep_unredacted``): the source a changed PII policy masks anew."""
    return unredacted_key_for(prefix, model_tag(settings.asr))


def gated_key(prefix: str, settings: Settings) -> str:
    """The gated transcript: the raw one with the quality gate's outcome; what the index and the audit read."""
    return gated_key_for(prefix, model_tag(settings.asr))


def transcribe_shard(prefixes: list[str], store: ObjectStore, settings: Settings) -> dict[str, float]:
    """Transcribe every recording of a shard with one loaded model; returns recordings and speech seconds done.

    Recordings go to the engine in groups of about ``unit_seconds`` of
    speech (``speech_groups``), all chunks of a group in one batched call. The
    next group's audio is read while the engine works on the current one, and
    each group's transcripts are written before the next group starts, so a crash
    costs one group and a retry skips what was written.
    """
    bucket = settings.storage.artefacts_bucket
    ledger = open_ledger(settings.ledger)
    done = {"recordings": 0.0, "speech_seconds": 0.0}
    todo: list[Preprocessed] = []
    for prefix in prefixes:
        if store.exists(bucket, transcript_key(prefix, settings)):
            ledger.advance(recording_id_of(prefix), TRANSCRIBED)  # written before a crash cut the shard short
            continue
        todo.append(Preprocessed.from_dict(get_json(store, bucket, f"{prefix}/manifest.json")))
    if not todo:
        return done
    engine = load_engine(settings)
    groups = speech_groups(todo, unit_seconds(engine, settings))
    rate = settings.audio.sample_rate
    with ThreadPoolExecutor(max_workers=1) as reader:
        loading = reader.submit(load_chunks, groups[0], store, bucket, rate)
        for n, group in enumerate(groups):
            items, owners = loading.result()
            if n + 1 < len(groups):
                loading = reader.submit(load_chunks, groups[n + 1], store, bucket, rate)
            started = time.monotonic()
            per_recording = transcribe_group(engine, items, owners, len(group))
            elapsed = time.monotonic() - started
            speech = sum(pre.speech_seconds for pre in group)
            for pre, segments in zip(group, per_recording):
                prefix = artefact_prefix(pre.recording)
                unmasked = assemble_transcript(pre, segments, engine.model_name, settings)
                if settings.postprocess.redact_pii and settings.postprocess.keep_unredacted:
                    put_json(store, bucket, unredacted_key(prefix, settings), unmasked.to_dict())
                transcript = mask_transcript(unmasked, settings)  # before it is stored: no personal data in clear
                put_json(store, bucket, transcript_key(prefix, settings), transcript.to_dict())
                share = pre.speech_seconds / speech if speech else 1 / len(group)  # the group's time, by speech
                ledger.advance(pre.recording.recording_id, TRANSCRIBED, stage="transcribe", seconds=elapsed * share)
                done["recordings"] += 1
                done["speech_seconds"] += pre.speech_seconds
                log.info("%s: %d segments", pre.recording.key, len(transcript.segments))
    return done


def preprocessed_prefixes(results: list[StageResult]) -> list[str]:
    """The artefact prefixes of the recordings that reached transcription (not quarantined)."""
    return [r.artefact_prefix for r in results if r.state == PREPROCESSED]


def gate_shard(results: list[StageResult], store: ObjectStore, settings: Settings) -> int:
    """Pass the shard's raw transcripts that have no gated one yet through the quality gate, in batches.

    Each outcome is written as the recording's gated transcript, so a retry does not
    validate again; returns how many were gated now.
    """
    bucket = settings.storage.artefacts_bucket
    prefixes = [r.artefact_prefix for r in results if r.state != QUARANTINED]
    todo = [p for p in prefixes if not store.exists(bucket, gated_key(p, settings))]
    for start in range(0, len(todo), quality.GATE_BATCH):
        batch = todo[start : start + quality.GATE_BATCH]
        raw = [Transcript.from_dict(get_json(store, bucket, transcript_key(p, settings))) for p in batch]
        for prefix, transcript in zip(batch, gate_transcripts(raw, settings)):
            if transcript.pii:  # before the gated transcript: it is what makes the recording playable
                render_redacted_audio(transcript, prefix, store, settings)
            put_json(store, bucket, gated_key(prefix, settings), transcript.to_dict())
    return len(todo)


def render_redacted_audio(transcript: Transcript, prefix: str, store: ObjectStore, settings: Settings) -> None:
    """Silence the spans of the transcript's personal data in a FLAC rendition of the recording.

    Each span is the words that said the value (the whole segment that held it
    where the engine gave no word times), padded by the margin.
    """
    margin = settings.postprocess.pii_audio_margin_seconds
    spans = [(float(d["start"]) - margin, float(d["end"]) + margin) for d in transcript.pii]
    rec = transcript.recording
    work_root = settings.storage.path("work_dir")
    work_root.mkdir(parents=True, exist_ok=True)
    with store.local_copy(rec.bucket, rec.key) as source, tempfile.TemporaryDirectory(dir=work_root) as work:
        out = Path(work) / "redacted.flac"
        silence_spans(source, probe(source, settings.audio), out, spans)
        store.put_file(settings.storage.artefacts_bucket, redacted_audio_key(prefix), out)


def gated_transcript(prefix: str, store: ObjectStore, settings: Settings) -> Transcript:
    return Transcript.from_dict(get_json(store, settings.storage.artefacts_bucket, gated_key(prefix, settings)))


def index_results(
    results: list[StageResult], store: ObjectStore, index: TranscriptIndex, settings: Settings
) -> dict[str, int]:
    """Index gated transcripts and record quarantines; what the ledger says was indexed already is left alone.

    The ledger's final state is written after the index documents, so a crash between
    the two indexes the recording again (replacing itself). A version the ledger marks
    superseded is not indexed: it would replace the newer version's documents. The day's quality report
    is written from the gated transcripts.
    """
    bucket = settings.storage.artefacts_bucket
    ledger = open_ledger(settings.ledger)
    counts: Counter[str] = Counter()
    rows: list[dict[str, Any]] = []
    for result in results:
        if ledger.state(result.recording_id) == SUPERSEDED:
            counts[SUPERSEDED] += 1  # a newer version of the object was sensed: it, not this one, is the view's
            continue
        final = ledger.finished(result.recording_id)
        started = time.monotonic()
        if result.state == QUARANTINED:
            if final:
                counts["unchanged"] += 1
                continue
            quarantine = Quarantine.from_dict(get_json(store, bucket, f"{result.artefact_prefix}/quarantine.json"))
            index.record_quarantine(quarantine)
            ledger.advance(result.recording_id, QUARANTINED, reason=quarantine.reason)
            ledger.timed(result.recording_id, "index", time.monotonic() - started)
            counts[QUARANTINED] += 1
            continue
        transcript = gated_transcript(result.artefact_prefix, store, settings)
        rows.append(quality.report_row(transcript))
        if final:
            counts["unchanged"] += 1
            continue
        index.replace_recording(transcript)
        ledger.advance(result.recording_id, transcript.state, reason=transcript.reason, stage="index",
                       seconds=time.monotonic() - started, segments=len(transcript.segments))
        counts[transcript.state] += 1
    if counts.keys() - {"unchanged", SUPERSEDED}:
        quality.write_reports(rows, store, bucket, settings.quality, model_tag(settings.asr))
    return dict(counts)


def final_rows(call_date: str, settings: Settings) -> list[dict[str, Any]]:
    """The ledger's recordings of a day that reached a final state with this pipeline version, in key order."""
    model = model_tag(settings.asr)
    return [row for row in open_ledger(settings.ledger).rows(call_date)
            if row["state"] in FINAL_STATES and row["pipeline_version"] == PIPELINE_VERSION and row["model"] == model]


def gated_transcripts_for_date(call_date: str, store: ObjectStore, settings: Settings) -> list[Transcript]:
    """The day's gated transcripts, from storage: what the QA audit reads, the same whatever the index backend."""
    return [gated_transcript(version_prefix(call_date, row["recording_id"]), store, settings)
            for row in final_rows(call_date, settings) if row["state"] != QUARANTINED]


def reindex_day(call_date: str, store: ObjectStore, index: TranscriptIndex, settings: Settings) -> dict[str, int]:
    """Rebuild a day's index documents from gated transcripts and quarantine records; loads no model.

    A transcript masked by another PII policy than the configured one (or by none, when
    redaction was off) is masked again first: its raw and gated artefacts are rewritten
    and its redacted audio rendered, so a changed pattern reaches what is stored.
    """
    counts: Counter[str] = Counter()
    policy = load_policy(settings.postprocess.path("pii_dir")) if settings.postprocess.redact_pii else None
    for row in final_rows(call_date, settings):
        prefix = version_prefix(call_date, row["recording_id"])
        if row["state"] == QUARANTINED:
            index.record_quarantine(Quarantine.from_dict(
                get_json(store, settings.storage.artefacts_bucket, f"{prefix}/quarantine.json")))
        else:
            transcript = gated_transcript(prefix, store, settings)
            if policy is not None and transcript.pii_policy != policy.identity:
                transcript = remask(prefix, transcript, policy, store, settings)
                counts["masked again"] += 1
            index.replace_recording(transcript)
        counts[row["state"]] += 1
    return dict(counts)


def remask(prefix: str, gated: Transcript, policy: Policy, store: ObjectStore, settings: Settings) -> Transcript:
    """The gated and raw transcripts of a recording masked by ``policy``, stored, with their redacted audio.

    Where the transcript before masking was kept (``keep_unredacted``), both are masked
    anew from it, so a changed policy can also mask less; otherwise the stored masked
    text is masked further, and what an earlier policy masked stays masked.
    """
    bucket = settings.storage.artefacts_bucket
    raw_key, source_key = transcript_key(prefix, settings), unredacted_key(prefix, settings)
    if store.exists(bucket, source_key):
        raw = redact_transcript(Transcript.from_dict(get_json(store, bucket, source_key)), policy)
        put_json(store, bucket, raw_key, raw.to_dict())
        masked = replace(raw, state=gated.state, reason=gated.reason, quality=gated.quality,
                         quality_failures=gated.quality_failures)
    else:
        if store.exists(bucket, raw_key):
            put_json(store, bucket, raw_key, redact_transcript(Transcript.from_dict(get_json(store, bucket, raw_key)),
                                                               policy).to_dict())
        masked = redact_transcript(gated, policy)
    if masked.pii:
        render_redacted_audio(masked, prefix, store, settings)
    put_json(store, bucket, gated_key(prefix, settings), masked.to_dict())
    return masked


def to_xcom(results: list[StageResult]) -> list[dict[str, Any]]:
    return [r.__dict__.copy() for r in results]


def from_xcom(rows: list[dict[str, Any]]) -> list[StageResult]:
    return [StageResult(**row) for row in rows]
