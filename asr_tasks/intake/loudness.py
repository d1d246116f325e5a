"""Loudness of decoded PCM (ITU-R BS.1770, as EBU R128 uses it), measured and applied in the worker's process.

ffmpeg's loudnorm measures true peak on a copy upsampled to 192 kHz, which is most
of what a short call's preprocessing costs, and its linear mode needs one more
ffmpeg process per channel to measure first. The ASR needs neither: it needs
each channel at one level. So the level is the integrated loudness with
BS.1770's gates, reached by one linear gain (a quiet and a loud passage keep
their distance, as they do on the line), and the few samples the gain would
push past the ceiling are bent under it by a soft limiter instead of a
limiter's look-ahead on an oversampled copy. Blocks in, blocks out: memory does
not grow with the length of the call.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
from scipy import signal

FULL_SCALE = 32768.0  # s16 samples as fractions of full scale
SUB_BLOCK_SECONDS = 0.1  # gating blocks are 400 ms long and start every 100 ms (75 % overlap)
SUB_BLOCKS_PER_BLOCK = 4
ABSOLUTE_GATE_LUFS = -70.0
RELATIVE_GATE_LU = -10.0
# The soft limiter leaves everything this far under the ceiling untouched: speech peaks a linear gain keeps
# under the ceiling stay as they were (bending every loud vowel from 6 dB under it cost Whisper 0.01 WER).
KNEE_BELOW_CEILING_DB = 1.0


@dataclass(frozen=True)
class Loudness:
    """A channel's integrated loudness (LUFS; -inf when nothing passes the gates) and sample peak (dBFS)."""

    integrated: float
    peak: float


def k_weighting(rate: int) -> np.ndarray:
    """BS.1770's K-weighting (a high shelf, then a high-pass) as second-order sections for ``rate``.

    The standard gives coefficients for 48 kHz; these are the same analogue filters
    (the shelf's and the high-pass's corner, gain and Q) through the bilinear
    transform at any rate, as libebur128 designs them.
    """
    f0, gain_db, q = 1681.974450955533, 3.999843853973347, 0.7071752369554196
    k = math.tan(math.pi * f0 / rate)
    vh = 10 ** (gain_db / 20)
    vb = vh ** 0.4996667741545416
    a0 = 1 + k / q + k * k
    shelf = [(vh + vb * k / q + k * k) / a0, 2 * (k * k - vh) / a0, (vh - vb * k / q + k * k) / a0,
             1.0, 2 * (k * k - 1) / a0, (1 - k / q + k * k) / a0]
    f0, q = 38.13547087602444, 0.5003270373238773
    k = math.tan(math.pi * f0 / rate)
    a0 = 1 + k / q + k * k
    high_pass = [1.0, -2.0, 1.0, 1.0, 2 * (k * k - 1) / a0, (1 - k / q + k * k) / a0]
    return np.array([shelf, high_pass])


def _lufs(mean_square: float | np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return -0.691 + 10 * np.log10(mean_square)


def measure(blocks: Iterable[np.ndarray], rate: int) -> Loudness:
    """Integrated loudness and sample peak of s16 mono blocks, read once."""
    sos = k_weighting(rate)
    state = np.zeros((sos.shape[0], 2))
    size = round(rate * SUB_BLOCK_SECONDS)
    left = np.zeros(0)
    energies: list[np.ndarray] = []
    peak = 0
    for block in blocks:
        if not len(block):
            continue
        peak = max(peak, int(np.abs(block.astype(np.int32)).max()))
        weighted, state = signal.sosfilt(sos, block / FULL_SCALE, zi=state)
        squares = np.concatenate([left, weighted * weighted])
        whole = len(squares) // size * size
        energies.append(squares[:whole].reshape(-1, size).mean(axis=1))
        left = squares[whole:]
    sub = np.concatenate(energies) if energies else np.zeros(0)
    peak_db = 20 * math.log10(peak / FULL_SCALE) if peak else -math.inf
    if len(sub) < SUB_BLOCKS_PER_BLOCK:
        return Loudness(-math.inf, peak_db)
    windows = np.lib.stride_tricks.sliding_window_view(sub, SUB_BLOCKS_PER_BLOCK).mean(axis=1)
    loud = windows[_lufs(windows) > ABSOLUTE_GATE_LUFS]
    if not len(loud):
        return Loudness(-math.inf, peak_db)
    gated = loud[_lufs(loud) > _lufs(float(loud.mean())) + RELATIVE_GATE_LU]
    return Loudness(float(_lufs(float(gated.mean()))), peak_db)


def gain_db(measured: Loudness, target_lufs: float) -> float:
    """The one gain that brings the channel to the target; none for silence."""
    return target_lufs - measured.integrated if math.isfinite(measured.integrated) else 0.0


def apply(blocks: Iterable[np.ndarray], gain: float, ceiling_db: float) -> Iterator[np.ndarray]:
    """s16 blocks times ``gain`` dB, their peaks softly limited under ``ceiling_db`` dBFS."""
    factor = 10 ** (gain / 20)
    ceiling = 10 ** (ceiling_db / 20)
    knee = ceiling * 10 ** (-KNEE_BELOW_CEILING_DB / 20)
    limit = min(32767, math.floor(ceiling * FULL_SCALE))  # rounding never lifts a sample over the ceiling
    for block in blocks:
        scaled = block * (factor / FULL_SCALE)
        over = np.abs(scaled) > knee
        if over.any():  # tanh bends what passes the knee towards the ceiling, never over it
            magnitude = np.abs(scaled[over])
            scaled[over] = np.sign(scaled[over]) * (knee + (ceiling - knee) * np.tanh((magnitude - knee)
                                                                                      / (ceiling - knee)))
        yield np.clip(np.rint(scaled * FULL_SCALE), -limit, limit).astype("<i2")
