"""The alignment helpers of the transformers engine: a median along time, and the monotonic path."""

from __future__ import annotations

import numpy as np
import pytest

from asr_tasks.transcription.alignment import dynamic_time_warping, median_filter


def test_median_filter_smooths_along_time_with_mirrored_edges() -> None:
    weights = np.array([[[1.0, 9.0, 1.0, 1.0, 5.0]]])
    assert median_filter(weights, 3).tolist() == [[[9.0, 1.0, 1.0, 1.0, 1.0]]]  # edges mirrored: [9, 1, 9], ...
    assert median_filter(weights[..., :1], 3).tolist() == weights[..., :1].tolist()  # too short to filter
    with pytest.raises(ValueError, match="odd"):
        median_filter(weights, 4)


def test_dynamic_time_warping_finds_the_cheap_diagonal() -> None:
    cost = np.ones((3, 6))
    for token, frames in enumerate([(0, 1), (2, 3), (4, 5)]):
        cost[token, list(frames)] = 0.0  # token 0 in frames 0-1, token 1 in 2-3, token 2 in 4-5
    tokens, frames = dynamic_time_warping(cost)
    assert tokens.tolist() == [0, 0, 1, 1, 2, 2] and frames.tolist() == [0, 1, 2, 3, 4, 5]
    jumps = np.pad(np.diff(tokens), (1, 0), constant_values=1).astype(bool)
    assert frames[jumps].tolist() == [0, 2, 4]  # each token starts where its cheap frames do
