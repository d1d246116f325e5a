"""Silero VAD over decoded PCM, streamed in blocks, and cutting speech into chunks at pauses.

The Silero v6 ONNX model ships inside faster-whisper, so no download is needed.
Probabilities are computed block by block (read from disk one block at a time)
with the recurrent state carried over, so memory stays flat however long the
recording is; the results equal a whole-file pass.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from asr_tasks.intake.audio import pcm_blocks

WINDOW = 512  # samples per VAD frame at 16 kHz (32 ms)
CONTEXT = 64  # samples of the previous frame the model sees
FRAMES_PER_BLOCK = 1_000  # 32 s of audio per model call: bounds the network's activations
ONSET_DB = 12.0  # a frame this far above the recording's noise floor holds sound
NOISE_FLOOR_MIN_DB = -70.0  # the floor of a recording with digital silence in it
WIDEN_MS = 500  # how far a region's edge may move out over such sound
WIDEN_GAP_MS = 250  # a quiet stretch this long ends the widening


@dataclass(frozen=True)
class SpeechRegion:
    start: float  # seconds
    end: float


class SileroVad:
    """The Silero VAD v6 network, run with onnxruntime on the CPU."""

    def __init__(self, model_path: Path | None = None) -> None:
        import onnxruntime

        if model_path is None:
            from faster_whisper.utils import get_assets_path

            model_path = Path(get_assets_path()) / "silero_vad_v6.onnx"
        opts = onnxruntime.SessionOptions()
        opts.inter_op_num_threads = 1
        opts.intra_op_num_threads = 1
        opts.log_severity_level = 4
        self.session = onnxruntime.InferenceSession(
            os.fspath(model_path), providers=["CPUExecutionProvider"], sess_options=opts
        )

    def probabilities(self, pcm_path: Path) -> np.ndarray:
        """Speech probability for each 32 ms frame of a 16 kHz s16le file."""
        h = np.zeros((1, 1, 128), dtype=np.float32)
        c = np.zeros((1, 1, 128), dtype=np.float32)
        context = np.zeros(CONTEXT, dtype=np.float32)
        out: list[np.ndarray] = []
        for pcm in pcm_blocks(pcm_path, WINDOW * FRAMES_PER_BLOCK):
            block = pcm.astype(np.float32) / 32768.0
            if len(block) % WINDOW:
                block = np.pad(block, (0, WINDOW - len(block) % WINDOW))
            frames = block.reshape(-1, WINDOW)
            contexts = np.concatenate([context[None, :], frames[:-1, -CONTEXT:]], axis=0)
            batch = np.concatenate([contexts, frames], axis=1)
            probs, h, c = self.session.run(None, {"input": batch, "h": h, "c": c})
            out.append(np.asarray(probs, dtype=np.float32).reshape(-1))
            context = frames[-1, -CONTEXT:].copy()
        return np.concatenate(out) if out else np.zeros(0, dtype=np.float32)


def frame_levels(pcm_path: Path) -> np.ndarray:
    """RMS level in dBFS of each VAD frame of a 16 kHz s16le file, read block by block."""
    out: list[np.ndarray] = []
    for pcm in pcm_blocks(pcm_path, WINDOW * FRAMES_PER_BLOCK):
        block = pcm.astype(np.float32) / 32768.0
        if len(block) % WINDOW:
            block = np.pad(block, (0, WINDOW - len(block) % WINDOW))
        rms = np.sqrt(np.mean(block.reshape(-1, WINDOW) ** 2, axis=1))
        out.append((20 * np.log10(np.maximum(rms, 1e-6))).astype(np.float32))
    return np.concatenate(out) if out else np.zeros(0, dtype=np.float32)


@lru_cache(maxsize=1)
def get_vad() -> SileroVad:
    """One VAD session per worker process."""
    return SileroVad()


def speech_regions(
    probs: np.ndarray,
    sample_rate: int,
    threshold: float = 0.5,
    min_silence_ms: int = 300,
    speech_pad_ms: int = 200,
    min_speech_ms: int = 150,
    levels: np.ndarray | None = None,
    duration: float | None = None,
) -> list[SpeechRegion]:
    """Hysteresis over frame probabilities: enter at ``threshold``, leave after a real pause.

    The network scores a soft first word ("Please call me...") low and enters the
    region late, by up to 0.4 s. Given the frames' ``levels`` (``frame_levels``), each
    region's edges move out over the sound next to them (frames ``ONSET_DB`` above the
    noise floor, at most ``WIDEN_MS``, across quiet gaps shorter than ``WIDEN_GAP_MS``),
    so a chunk does not clip the word the network missed. ``duration`` (the audio's
    seconds) keeps the padding of the last region inside the audio, which the last,
    partly filled frame would overshoot.
    """
    frame_s = WINDOW / sample_rate
    neg_threshold = max(threshold - 0.15, 0.01)
    min_silence = max(1, int(round(min_silence_ms / 1000 / frame_s)))
    regions: list[tuple[int, int]] = []
    start: int | None = None
    silent = 0
    for i, p in enumerate(probs):
        if start is None:
            if p >= threshold:
                start, silent = i, 0
            continue
        if p < neg_threshold:
            silent += 1
            if silent >= min_silence:
                regions.append((start, i - silent + 1))
                start = None
        elif p >= threshold:
            silent = 0
    if start is not None:
        regions.append((start, len(probs) - silent))
    regions = [(a, b) for a, b in regions if (b - a) * frame_s >= min_speech_ms / 1000]
    if levels is not None and len(levels):
        floor = max(float(np.percentile(levels, 10)), NOISE_FLOOR_MIN_DB)
        loud = levels >= floor + ONSET_DB
        reach, gap = int(WIDEN_MS / 1000 / frame_s), max(1, int(WIDEN_GAP_MS / 1000 / frame_s))
        regions = [_widen(a, b, loud, reach, gap) for a, b in regions]
    total = len(probs) * frame_s if duration is None else min(duration, len(probs) * frame_s)
    pad = speech_pad_ms / 1000
    padded: list[SpeechRegion] = []
    for a, b in regions:
        s, e = max(0.0, a * frame_s - pad), min(total, b * frame_s + pad)
        if padded and s <= padded[-1].end:
            padded[-1] = SpeechRegion(padded[-1].start, e)
        else:
            padded.append(SpeechRegion(s, e))
    return padded


def _widen(a: int, b: int, loud: np.ndarray, reach: int, gap: int) -> tuple[int, int]:
    """Frames [a, b) widened to the farthest loud frame within ``reach`` not cut off by ``gap`` quiet ones."""
    start, quiet = a, 0
    for i in range(a - 1, max(-1, a - 1 - reach), -1):
        quiet = 0 if loud[i] else quiet + 1
        if quiet >= gap:
            break
        if loud[i]:
            start = i
    end, quiet = b, 0
    for i in range(b, min(len(loud), b + reach)):
        quiet = 0 if loud[i] else quiet + 1
        if quiet >= gap:
            break
        if loud[i]:
            end = i + 1
    return start, end


def cut_chunks(
    regions: list[SpeechRegion],
    probs: np.ndarray,
    sample_rate: int,
    max_seconds: float,
    overlap_seconds: float = 0.0,
) -> list[SpeechRegion]:
    """Group speech regions into chunks of at most ``max_seconds``, cutting only at pauses.

    A single run of speech longer than the limit is split at its quietest frame
    (lowest speech probability) in the second half of the allowed span, never blindly.
    The two pieces share ``overlap_seconds`` around the cut, so a word the cut still
    touches is heard whole by one of them; stitching drops the text heard twice.
    Times are rounded to the millisecond, and no chunk is longer than ``max_seconds``.
    """
    if not 0 <= overlap_seconds < max_seconds / 2:
        raise ValueError(f"overlap_seconds {overlap_seconds} must be at least 0 and under half of {max_seconds}")
    frame_s = WINDOW / sample_rate
    half = overlap_seconds / 2
    pieces: list[SpeechRegion] = []
    for region in regions:
        start = region.start
        while region.end - start > max_seconds:
            latest = start + max_seconds - half  # the piece ends half an overlap after its cut
            lo = math.ceil((start + max_seconds / 2) / frame_s)
            hi = math.floor(latest / frame_s) + 1
            window = probs[lo:hi]
            cut = (lo + int(np.argmin(window))) * frame_s if len(window) else latest
            pieces.append(SpeechRegion(start, cut + half))
            start = cut - half
        pieces.append(SpeechRegion(start, region.end))

    chunks: list[SpeechRegion] = []
    for piece in pieces:
        if chunks and piece.end - chunks[-1].start <= max_seconds:
            chunks[-1] = SpeechRegion(chunks[-1].start, piece.end)
        else:
            chunks.append(piece)
    return [_to_ms(c, max_seconds) for c in chunks]


def _to_ms(chunk: SpeechRegion, max_seconds: float) -> SpeechRegion:
    """Millisecond times; rounding never makes a chunk longer than the limit."""
    start = round(chunk.start, 3)
    return SpeechRegion(start, min(round(chunk.end, 3), math.floor((start + max_seconds) * 1000 + 1e-6) / 1000))

