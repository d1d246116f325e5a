"""Word times from cross-attention: Whisper's alignment heads, smoothed, and a monotonic path through them.

The transformers engine computes the attention weights of the alignment heads
itself; turning them into token times is the classic recipe of the Whisper
paper's reference code: normalise each head over the text, smooth along time
with a median filter, average the heads, and find the cheapest monotonic path
from the first token and frame to the last (dynamic time warping). Kept here,
small, rather than borrowed from a library's private helpers. The median filter
runs in torch, on the device the weights are on; the path in numpy, one
anti-diagonal of the cost matrix at a time, since every cell of an anti-diagonal
depends only on the two before it.
"""

from __future__ import annotations

import numpy as np
import torch


def median_filter(weights: torch.Tensor | np.ndarray, width: int) -> torch.Tensor:
    """A median over ``width`` frames along the last axis, the edges mirrored (odd widths only)."""
    if width <= 0 or width % 2 != 1:
        raise ValueError(f"the median filter's width must be an odd positive number, not {width}")
    weights = torch.as_tensor(weights)
    pad = width // 2
    if weights.shape[-1] <= pad:
        return weights
    rows = weights.reshape(-1, weights.shape[-1])
    padded = torch.nn.functional.pad(rows, (pad, pad), mode="reflect")
    return padded.unfold(-1, width, 1).median(dim=-1).values.reshape(weights.shape)


def dynamic_time_warping(cost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The cheapest monotonic path through a (tokens x frames) cost matrix: each step's token and frame index.

    A tie goes to the next frame unless one move is strictly cheapest (the
    reference code's order), so the path does not depend on how it is computed.
    """
    tokens, frames = cost.shape
    width = frames + 1
    # cell (i, j) of the (tokens + 1) x (frames + 1) tables, flattened, is at i * width + j: the cells of an
    # anti-diagonal i + j = d are `frames` apart, so each anti-diagonal and its three neighbours are strided views
    padded = np.zeros((tokens + 1, width))
    padded[1:, 1:] = cost
    flat_cost = padded.ravel()
    total = np.full((tokens + 1) * width, np.inf)
    total[0] = 0.0
    step = np.zeros((tokens + 1) * width, dtype=np.int8)  # 0: diagonal, 1: next token, 2: next frame
    for d in range(2, tokens + frames + 1):
        first, last = max(1, d - frames) * frames + d, min(tokens, d - 1) * frames + d
        cells = slice(first, last + 1, frames)
        diagonal = total[first - width - 1 : last - width : frames]
        up = total[first - width : last - width + 1 : frames]
        left = total[first - 1 : last : frames]
        take_diagonal = (diagonal < up) & (diagonal < left)
        take_up = (up < diagonal) & (up < left)
        total[cells] = flat_cost[cells] + np.where(take_diagonal, diagonal, np.where(take_up, up, left))
        step[cells] = np.where(take_diagonal, 0, np.where(take_up, 1, 2))
    moves = step.reshape(tokens + 1, width)
    moves[0, :], moves[:, 0] = 2, 1
    i, j = tokens, frames
    token_path, frame_path = [], []
    while i > 0 or j > 0:
        token_path.append(i - 1)
        frame_path.append(j - 1)
        move = int(moves[i, j])
        if move == 0:
            i, j = i - 1, j - 1
        elif move == 1:
            i -= 1
        else:
            j -= 1
    return np.array(token_path[::-1]), np.array(frame_path[::-1])
