"""Word times from cross-attention: Whisper's alignment heads, smoothed, and a monotonic path through them.

The transformers engine computes the attention weights of the alignment heads
itself (a pass with ``output_attentions``); turning them into token times is the
classic recipe of the Whisper paper's reference code: normalise each head over
the text, smooth along time with a median filter, average the heads, and find the
cheapest monotonic path from the first token and frame to the last (dynamic time
warping). Kept here, small and numpy-only, rather than borrowed from a library's
private helpers.
"""

from __future__ import annotations

import numpy as np


def median_filter(weights: np.ndarray, width: int) -> np.ndarray:
    """A median over ``width`` frames along the last axis, the edges mirrored (odd widths only)."""
    if width <= 0 or width % 2 != 1:
        raise ValueError(f"the median filter's width must be an odd positive number, not {width}")
    pad = width // 2
    if weights.shape[-1] <= pad:
        return weights
    padded = np.pad(weights, [(0, 0)] * (weights.ndim - 1) + [(pad, pad)], mode="reflect")
    return np.median(np.lib.stride_tricks.sliding_window_view(padded, width, axis=-1), axis=-1)


def dynamic_time_warping(cost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The cheapest monotonic path through a (tokens x frames) cost matrix: each step's token and frame index."""
    tokens, frames = cost.shape
    total = np.full((tokens + 1, frames + 1), np.inf)
    total[0, 0] = 0.0
    step = np.zeros((tokens + 1, frames + 1), dtype=np.int8)  # 0: diagonal, 1: next token, 2: next frame
    for j in range(1, frames + 1):
        for i in range(1, tokens + 1):
            diagonal, up, left = total[i - 1, j - 1], total[i - 1, j], total[i, j - 1]
            if diagonal < up and diagonal < left:
                best, move = diagonal, 0
            elif up < diagonal and up < left:
                best, move = up, 1
            else:
                best, move = left, 2
            total[i, j] = cost[i - 1, j - 1] + best
            step[i, j] = move
    step[0, :], step[:, 0] = 2, 1
    i, j = tokens, frames
    token_path, frame_path = [], []
    while i > 0 or j > 0:
        token_path.append(i - 1)
        frame_path.append(j - 1)
        move = int(step[i, j])
        if move == 0:
            i, j = i - 1, j - 1
        elif move == 1:
            i -= 1
        else:
            j -= 1
    return np.array(token_path[::-1]), np.array(frame_path[::-1])

