"""Stitch per-chunk, per-channel segments back into one time-ordered transcript."""

from __future__ import annotations

import re

from asr_tasks.models import Segment

_SPACES = re.compile(r"\s+")


def normalise_text(text: str) -> str:
    return _SPACES.sub(" ", text).strip()


def stitch(segments: list[Segment]) -> list[Segment]:
    """Order segments of all channels by time; drop empty ones and exact repeats at chunk seams."""
    ordered = sorted(segments, key=lambda s: (s.start, s.channel, s.end))
    result: list[Segment] = []
    last_by_channel: dict[int, Segment] = {}
    for seg in ordered:
        text = normalise_text(seg.text)
        if not text:
            continue
        prev = last_by_channel.get(seg.channel)
        if prev is not None and prev.text == text and seg.start < prev.end:
            continue  # the same words seen twice where two chunks overlap
        seg.text = text
        result.append(seg)
        last_by_channel[seg.channel] = seg
    return result
