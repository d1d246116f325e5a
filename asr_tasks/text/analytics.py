"""Per-call analytics: who talked how much, silences, overlaps, interruptions, speaking rate and turns.

Speech comes from the per-channel VAD (each channel's speech regions, kept in
the manifest), words from the transcript. On a two-channel call each channel is one
speaker, so overlap and interruptions are measured; a mono call has talk and
non-talk time only. A speaker interrupts when they start talking while the
other is talking and both go on together for ``INTERRUPTION_SECONDS`` or more
(a short "mm" over the other side is no interruption). Speaking rate counts
words per minute of the speaker's own talk time, a Chinese character as a word.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from asr_tasks.chars import CJK_RANGES
from asr_tasks.models import Preprocessed, Segment

INTERRUPTION_SECONDS = 0.5
SILENCE_LISTED_SECONDS = 1.0
_WORD = re.compile(rf"[{CJK_RANGES}]|[^\s{CJK_RANGES}]+")

Spans = list[tuple[float, float]]


@dataclass
class SpeakerStats:
    """One speaker's share of the call."""

    talk_seconds: float = 0.0
    talk_share: float = 0.0  # of all talk time (the speakers' talk added up)
    words: int = 0
    words_per_minute: float = 0.0
    turns: int = 0
    interruptions: int = 0  # times this speaker talked over the other


@dataclass
class CallAnalytics:
    """The call's analytics, stored with the recording and shown on its page."""

    duration: float
    talk_seconds: float  # someone is talking
    non_talk_seconds: float
    non_talk_share: float
    longest_silence_seconds: float
    overlap_seconds: float  # both are talking (two-channel calls)
    turns: int
    speakers: dict[str, SpeakerStats] = field(default_factory=dict)
    silences: list[list[float]] = field(default_factory=list)  # non-talk stretches of SILENCE_LISTED_SECONDS or more
    speech: dict[str, list[list[float]]] = field(default_factory=dict)  # each speaker's talk, for the timeline

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "CallAnalytics":
        speakers = {name: SpeakerStats(**stats) for name, stats in (data.get("speakers") or {}).items()}
        return cls(**{**data, "speakers": speakers})


def merge(spans: Spans) -> Spans:
    """Overlapping or touching spans joined, in time order."""
    out: Spans = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def total(spans: Spans) -> float:
    return sum(end - start for start, end in spans)


def intersect(a: Spans, b: Spans) -> Spans:
    """Where two merged span lists overlap."""
    out: Spans = []
    i = j = 0
    while i < len(a) and j < len(b):
        start, end = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if start < end:
            out.append((start, end))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def gaps(spans: Spans, duration: float) -> Spans:
    """The stretches of ``[0, duration]`` that no span covers (the call's start and end included)."""
    out: Spans = []
    reach = 0.0
    for start, end in spans:
        if start > reach:
            out.append((reach, start))
        reach = max(reach, end)
    if duration > reach:
        out.append((reach, duration))
    return out


def interruptions(by: Spans, over: Spans) -> int:
    """How often ``by`` starts while ``over`` is talking and they talk together for INTERRUPTION_SECONDS or more."""
    count = 0
    for start, end in by:
        for other_start, other_end in over:
            if other_start < start < other_end and min(end, other_end) - start >= INTERRUPTION_SECONDS:
                count += 1
                break
    return count


def count_words(segment: Segment) -> int:
    return len(segment.words) if segment.words else len(_WORD.findall(segment.text))


def turns_of(segments: list[Segment]) -> dict[str, int]:
    """Turns per speaker: runs of consecutive segments (in time order) of one speaker."""
    out: dict[str, int] = {}
    previous = None
    for seg in sorted(segments, key=lambda s: (s.start, s.channel)):
        if seg.speaker != previous:
            out[seg.speaker] = out.get(seg.speaker, 0) + 1
            previous = seg.speaker
    return out


def unpadded(spans: Spans, pad: float, duration: float) -> Spans:
    """Speech without the margin the VAD adds around it for the model (kept at the recording's edges)."""
    out = [(start + pad if start > 0 else start, end - pad if end < duration else end) for start, end in spans]
    return [(start, end) for start, end in out if end > start]


def analyse(pre: Preprocessed, segments: list[Segment], pad_seconds: float = 0.0) -> CallAnalytics:
    """The call's analytics from its channels' speech (VAD, ``pad_seconds`` of margin taken off) and its words."""
    speech: dict[str, Spans] = {}
    for channel in pre.channels:
        speech.setdefault(channel.speaker, []).extend((start, end) for start, end in channel.speech)
    speech = {speaker: unpadded(merge(spans), pad_seconds, pre.duration) for speaker, spans in speech.items()}
    anyone = merge([span for spans in speech.values() for span in spans])
    silences = gaps(anyone, pre.duration)
    turns = turns_of(segments)
    stats: dict[str, SpeakerStats] = {}
    talk_sum = sum(total(spans) for spans in speech.values())
    for speaker, spans in speech.items():
        talk = total(spans)
        words = sum(count_words(s) for s in segments if s.speaker == speaker)
        others = merge([span for name, other in speech.items() if name != speaker for span in other])
        stats[speaker] = SpeakerStats(
            talk_seconds=round(talk, 3), talk_share=round(talk / talk_sum, 4) if talk_sum else 0.0, words=words,
            words_per_minute=round(60.0 * words / talk, 1) if talk else 0.0, turns=turns.get(speaker, 0),
            interruptions=interruptions(spans, others) if others else 0,
        )
    overlap = 0.0
    names = sorted(speech)
    for n, first in enumerate(names):
        for second in names[n + 1 :]:
            overlap += total(intersect(speech[first], speech[second]))
    duration = pre.duration
    return CallAnalytics(
        duration=round(duration, 3), talk_seconds=round(total(anyone), 3),
        non_talk_seconds=round(total(silences), 3),
        non_talk_share=round(total(silences) / duration, 4) if duration else 0.0,
        longest_silence_seconds=round(max((end - start for start, end in silences), default=0.0), 3),
        overlap_seconds=round(overlap, 3), turns=sum(turns.values()), speakers=stats,
        silences=[[round(a, 3), round(b, 3)] for a, b in silences if b - a >= SILENCE_LISTED_SECONDS],
        speech={speaker: [[round(a, 3), round(b, 3)] for a, b in spans] for speaker, spans in speech.items()},
    )

