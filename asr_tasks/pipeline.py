"""The stages of one day's run, as plain functions that Airflow tasks and the CLI both call.

Large data (PCM, transcripts) goes to the artefact bucket; what the functions
return is small (keys, ids, states). Every stage first looks for its own
artefact, so a retry or a re-run of the day redoes nothing that finished.
"""

from __future__ import annotations

import logging
import tempfile
from collections import Counter
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from asr_tasks import PIPELINE_VERSION
from asr_tasks.audio import InvalidAudio, decode, pcm_duration, probe, read_pcm
from asr_tasks.config import Settings
from asr_tasks.engines import AsrEngine, get_engine, model_tag
from asr_tasks.index import TranscriptIndex
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
from asr_tasks.postprocess import stitch
from asr_tasks.storage import ObjectStore, get_json, list_recordings, put_json
from asr_tasks.vad import cut_chunks, get_vad, speech_regions

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
    return f"v{PIPELINE_VERSION}/{rec.call_date or 'undated'}/{rec.recording_id}"


def sense(store: ObjectStore, settings: Settings, day: date) -> list[Recording]:
    recordings = list_recordings(store, settings, day)
    log.info("%s: %d recordings under %s", day, len(recordings), settings.recordings_prefix)
    return recordings


def preprocess_local(rec: Recording, source: Path, work: Path, settings: Settings) -> tuple[Preprocessed, dict[int, Path]]:
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
        regions = speech_regions(
            probs,
            settings.sample_rate,
            threshold=settings.vad_threshold,
            min_silence_ms=settings.vad_min_silence_ms,
            speech_pad_ms=settings.vad_speech_pad_ms,
        )
        speech += sum(r.end - r.start for r in regions)
        for piece in cut_chunks(regions, probs, settings.sample_rate, settings.chunk_max_seconds):
            chunks.append(AudioChunk(rec.recording_id, channel, speaker, pcm_key, piece.start, piece.end))
        channels.append(ChannelAudio(channel, speaker, pcm_key, round(pcm_duration(path, settings.sample_rate), 3)))
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
    bucket = settings.artefacts_bucket
    if store.exists(bucket, f"{prefix}/manifest.json"):
        pre = Preprocessed.from_dict(get_json(store, bucket, f"{prefix}/manifest.json"))
        return StageResult(rec.recording_id, rec.key, "preprocessed", prefix, pre.speech_seconds)
    if store.exists(bucket, f"{prefix}/quarantine.json"):
        q = Quarantine.from_dict(get_json(store, bucket, f"{prefix}/quarantine.json"))
        return StageResult(rec.recording_id, rec.key, QUARANTINED, prefix, reason=q.reason)

    work_root = settings.path("work_dir")
    work_root.mkdir(parents=True, exist_ok=True)
    with store.local_copy(rec.bucket, rec.key) as source, tempfile.TemporaryDirectory(dir=work_root) as work:
        try:
            pre, pcm_paths = preprocess_local(rec, source, Path(work), settings)
        except InvalidAudio as exc:
            reason = str(exc)
            log.error("%s/%s: quarantined: %s", rec.bucket, rec.key, reason)
            quarantine = Quarantine(recording=rec, reason=reason, pipeline_version=PIPELINE_VERSION)
            put_json(store, bucket, f"{prefix}/quarantine.json", quarantine.to_dict())
            return StageResult(rec.recording_id, rec.key, QUARANTINED, prefix, reason=reason)
        for channel in pre.channels:
            store.put_file(bucket, channel.pcm_key, pcm_paths[channel.channel])
    put_json(store, bucket, f"{prefix}/manifest.json", pre.to_dict())  # written last: the checkpoint
    log.info("%s: %.1f s, %d channel(s), %d chunks, %.1f s speech",
             rec.key, pre.duration, len(pre.channels), len(pre.chunks), pre.speech_seconds)
    return StageResult(rec.recording_id, rec.key, "preprocessed", prefix, pre.speech_seconds)


def plan_shards(results: list[StageResult], shard_seconds: float) -> list[list[str]]:
    """Group preprocessed recordings into shards of about ``shard_seconds`` of speech each."""
    shards: list[list[str]] = []
    size = 0.0
    for result in sorted(results, key=lambda r: r.key):
        if result.state != "preprocessed":
            continue
        if not shards or (size + result.speech_seconds > shard_seconds and shards[-1]):
            shards.append([])
            size = 0.0
        shards[-1].append(result.artefact_prefix)
        size += result.speech_seconds
    return shards


def transcribe_chunks(pre: Preprocessed, engine: AsrEngine, store: ObjectStore, settings: Settings) -> list[Segment]:
    segments: list[Segment] = []
    by_pcm: dict[str, list[AudioChunk]] = {}
    for chunk in pre.chunks:
        by_pcm.setdefault(chunk.pcm_key, []).append(chunk)
    for pcm_key, chunks in by_pcm.items():
        with store.local_copy(settings.artefacts_bucket, pcm_key) as pcm:
            for chunk in chunks:
                segments.extend(engine.transcribe(chunk, read_pcm(pcm, settings.sample_rate, chunk.start, chunk.end)))
    return segments


def build_transcript(pre: Preprocessed, segments: list[Segment], model: str) -> Transcript:
    stitched = stitch(segments)
    languages = Counter(s.language for s in stitched if s.language)
    state, reason = INDEXED, None
    if not pre.chunks:
        state, reason = NEEDS_REVIEW, "no speech detected"
    elif not stitched:
        state, reason = NEEDS_REVIEW, "speech detected but no text transcribed"
    return Transcript(
        recording=pre.recording,
        duration=pre.duration,
        segments=stitched,
        language=languages.most_common(1)[0][0] if languages else None,
        model=model,
        pipeline_version=pre.pipeline_version,
        speech_seconds=pre.speech_seconds,
        state=state,
        reason=reason,
    )


def transcript_key(prefix: str, settings: Settings) -> str:
    return f"{prefix}/transcript.{model_tag(settings)}.json"


def transcribe_shard(prefixes: list[str], store: ObjectStore, settings: Settings) -> dict[str, float]:
    """Transcribe every recording of a shard with one loaded model; returns audio/speech seconds done."""
    bucket = settings.artefacts_bucket
    done = {"recordings": 0.0, "speech_seconds": 0.0}
    for prefix in prefixes:
        key = transcript_key(prefix, settings)
        if store.exists(bucket, key):
            continue
        pre = Preprocessed.from_dict(get_json(store, bucket, f"{prefix}/manifest.json"))
        engine = get_engine(settings)
        transcript = build_transcript(pre, transcribe_chunks(pre, engine, store, settings), engine.model_name)
        put_json(store, bucket, key, transcript.to_dict())
        done["recordings"] += 1
        done["speech_seconds"] += pre.speech_seconds
        log.info("%s: %d segments", pre.recording.key, len(transcript.segments))
    return done


def index_results(
    results: list[StageResult], store: ObjectStore, index: TranscriptIndex, settings: Settings
) -> dict[str, int]:
    """Index transcripts and record quarantines; what is already indexed for this version is left alone."""
    bucket = settings.artefacts_bucket
    model = model_tag(settings)
    counts: Counter[str] = Counter()
    for result in results:
        if index.current_state(result.recording_id, model, PIPELINE_VERSION) is not None:
            counts["unchanged"] += 1
            continue
        if result.state == QUARANTINED:
            quarantine = Quarantine.from_dict(get_json(store, bucket, f"{result.artefact_prefix}/quarantine.json"))
            index.record_quarantine(quarantine)
            counts[QUARANTINED] += 1
            continue
        transcript = Transcript.from_dict(get_json(store, bucket, transcript_key(result.artefact_prefix, settings)))
        index.replace_recording(transcript)
        counts[transcript.state] += 1
    return dict(counts)


def to_xcom(results: list[StageResult]) -> list[dict[str, Any]]:
    return [r.__dict__.copy() for r in results]


def from_xcom(rows: list[dict[str, Any]]) -> list[StageResult]:
    return [StageResult(**row) for row in rows]
