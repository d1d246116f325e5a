"""Silero VAD over decoded PCM, streamed in blocks, and cutting speech into chunks at pauses.

The Silero v6 ONNX model ships inside faster-whisper, so no download is needed.
Probabilities are computed block by block with the recurrent state carried over,
so memory stays flat however long the recording is; the results equal a
whole-file pass.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

WINDOW = 512  # samples per VAD frame at 16 kHz (32 ms)
CONTEXT = 64  # samples of the previous frame the model sees
FRAMES_PER_BLOCK = 10_000  # ~5 min of audio per model call


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
        pcm = np.memmap(pcm_path, dtype="<i2", mode="r")
        h = np.zeros((1, 1, 128), dtype=np.float32)
        c = np.zeros((1, 1, 128), dtype=np.float32)
        context = np.zeros(CONTEXT, dtype=np.float32)
        out: list[np.ndarray] = []
        step = WINDOW * FRAMES_PER_BLOCK
        for offset in range(0, len(pcm), step):
            block = pcm[offset : offset + step].astype(np.float32) / 32768.0
            if len(block) % WINDOW:
                block = np.pad(block, (0, WINDOW - len(block) % WINDOW))
            frames = block.reshape(-1, WINDOW)
            contexts = np.concatenate([context[None, :], frames[:-1, -CONTEXT:]], axis=0)
            batch = np.concatenate([contexts, frames], axis=1)
            probs, h, c = self.session.run(None, {"input": batch, "h": h, "c": c})
            out.append(np.asarray(probs, dtype=np.float32).reshape(-1))
            context = frames[-1, -CONTEXT:].copy()
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
) -> list[SpeechRegion]:
    """Hysteresis over frame probabilities: enter at ``threshold``, leave after a real pause."""
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
    total = len(probs) * frame_s
    pad = speech_pad_ms / 1000
    padded: list[SpeechRegion] = []
    for a, b in regions:
        if (b - a) * frame_s < min_speech_ms / 1000:
            continue
        s, e = max(0.0, a * frame_s - pad), min(total, b * frame_s + pad)
        if padded and s <= padded[-1].end:
            padded[-1] = SpeechRegion(padded[-1].start, e)
        else:
            padded.append(SpeechRegion(s, e))
    return padded


def cut_chunks(
    regions: list[SpeechRegion], probs: np.ndarray, sample_rate: int, max_seconds: float
) -> list[SpeechRegion]:
    """Group speech regions into chunks of at most ``max_seconds``, cutting only at pauses.

    A single run of speech longer than the limit is split at its quietest frame
    (lowest speech probability) in the second half of the allowed span, never blindly.
    """
    frame_s = WINDOW / sample_rate
    pieces: list[SpeechRegion] = []
    for region in regions:
        start = region.start
        while region.end - start > max_seconds:
            lo = int((start + max_seconds / 2) / frame_s)
            hi = max(lo + 1, int((start + max_seconds) / frame_s))
            window = probs[lo:hi]
            cut = (lo + int(np.argmin(window))) * frame_s if len(window) else start + max_seconds
            cut = min(cut, start + max_seconds)
            pieces.append(SpeechRegion(start, cut))
            start = cut
        pieces.append(SpeechRegion(start, region.end))

    chunks: list[SpeechRegion] = []
    for piece in pieces:
        if chunks and piece.end - chunks[-1].start <= max_seconds:
            chunks[-1] = SpeechRegion(chunks[-1].start, piece.end)
        else:
            chunks.append(piece)
    return [SpeechRegion(round(c.start, 3), round(c.end, 3)) for c in chunks]
