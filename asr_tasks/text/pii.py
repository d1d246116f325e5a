"""Personal data in transcripts: found after ITN, masked before anything is stored, indexed or reported.

The kinds, patterns, checks, context words and masks live in ``include/pii/*.yaml``
(validated when they load, so a bank can add its own kinds). Detection runs on
each speaker's consecutive segments joined with a space, so a number the model
split over two segments, or wrote with spaces or dashes, is still one number; a
card keeps its last four digits (``[CARD ****1111]``), the rest become their kind's
label. What was found is kept as a detection (kind, speaker, seconds, the masked
value only), so the QA audit can still report that a card number was read out.
A segment that held personal data keeps no raw model text (``text_raw``), and the
words that said the value become one word holding the mask: both would hold the
data unmasked. The words' times give the detection its seconds, so the redacted
audio silences the value, not the whole segment, where the engine gave word times.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import lru_cache
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from asr_tasks.config import regular_expression
from asr_tasks.chars import CJK_CHAR
from asr_tasks.models import Segment, SpokenWord, Transcript

JOIN_GAP_SECONDS = 3.0  # segments of one speaker this close together are read as one text
ANCHOR_CHARS = 3  # shortest run of characters shared by the text and the model's words that aligns them
ANCHOR_CJK_CHARS = 2  # the same for a run of Chinese characters, each of which is a word
CHECKS = ("luhn", "prc_id")


class PiiError(ValueError):
    """A PII policy file that cannot be used; the message names the file."""


class Kind(BaseModel):
    """One kind of personal data: where it is, what must hold for it to count, what replaces it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pattern: str
    mask: str
    checks_or_context: tuple[Literal["luhn", "prc_id"], ...] = ()  # a value counts if a check passes, or in context
    context: dict[str, tuple[str, ...]] = Field(default_factory=dict)  # language ("*": any) -> words said before it

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, pattern: str) -> str:
        return regular_expression(pattern)

    @field_validator("mask")
    @classmethod
    def _known_fields(cls, mask: str) -> str:
        try:
            mask.format(last4="0000")
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(f"mask {mask!r} may use {{last4}} only") from exc
        return mask


class Policy(BaseModel):
    """All kinds, in the order they are tried (an earlier kind wins an overlapping value)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: int = 1
    context_chars: int = 40
    kinds: dict[str, Kind]

    @property
    def identity(self) -> str:
        """What the masked transcripts depend on: a changed pattern or mask is a new policy."""
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Detection:
    """One value found: its kind, who said it and when (the segments' span), and the mask that replaced it."""

    kind: str
    channel: int
    speaker: str
    start: float
    end: float
    masked: str

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def load_policy(folder: Path) -> Policy:
    """Every ``*.yaml`` in the folder, in name order; a later file adds kinds (or replaces one by name)."""
    files = sorted(folder.glob("*.yaml"))
    if not files:
        raise PiiError(f"{folder}: no PII policy files (*.yaml)")
    return _load(tuple((str(f), f.stat().st_mtime_ns) for f in files))


@lru_cache(maxsize=8)
def _load(files: tuple[tuple[str, int], ...]) -> Policy:
    merged: dict[str, object] = {"kinds": {}}
    for name, _ in files:
        try:
            data = yaml.safe_load(Path(name).read_text(encoding="utf-8")) or {}
            if not isinstance(data, dict):
                raise PiiError(f"{name}: expected a mapping with kinds")
            kinds = dict(merged["kinds"])  # type: ignore[call-overload]
            kinds.update(data.get("kinds") or {})
            merged = {**merged, **data, "kinds": kinds}
            policy = Policy.model_validate(merged)
        except (yaml.YAMLError, ValidationError) as exc:
            raise PiiError(f"{name}: {exc}") from exc
    return policy


def digits(value: str) -> str:
    return "".join(ch for ch in value if ch.isdigit())


def luhn(value: str) -> bool:
    numbers = [int(d) for d in digits(value)]
    total = sum(numbers[-1::-2]) + sum(sum(divmod(2 * d, 10)) for d in numbers[-2::-2])
    return bool(numbers) and total % 10 == 0


def prc_id(value: str) -> bool:
    """The check character of an 18-character PRC resident ID (GB 11643)."""
    body, check = value[:17], value[17:].upper()
    if len(value) != 18 or not body.isdigit():
        return False
    weights = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
    return "10X98765432"[sum(int(d) * w for d, w in zip(body, weights)) % 11] == check


def _in_context(kind: Kind, before: str, language: str | None) -> bool:
    words = [*kind.context.get(language or "", ()), *kind.context.get("*", ())]
    if not words:  # words of every language when the segment's language has none of its own
        words = [w for ws in kind.context.values() for w in ws]
    lowered = before.lower()
    return any(w.lower() in lowered for w in words)


def _counts(kind: Kind, value: str, before: str, language: str | None) -> bool:
    passes = {"luhn": luhn, "prc_id": prc_id}
    if any(passes[check](value) for check in kind.checks_or_context):
        return True
    return _in_context(kind, before, language) if kind.context else not kind.checks_or_context


def find(text: str, policy: Policy, language: str | None = None) -> list[tuple[int, int, str, str]]:
    """(start, end, kind, mask) of every value in ``text``, without overlaps, in order."""
    found: list[tuple[int, int, str, str]] = []
    taken: list[tuple[int, int]] = []
    for name, kind in policy.kinds.items():
        for match in re.finditer(kind.pattern, text, flags=re.IGNORECASE):
            start, end = match.span()
            if start == end or any(start < b and a < end for a, b in taken):
                continue
            before = text[max(0, start - policy.context_chars) : start]
            if _counts(kind, match.group(), before, language):
                found.append((start, end, name, kind.mask.format(last4=digits(match.group())[-4:])))
                taken.append((start, end))
    return sorted(found)


def mask_text(text: str, policy: Policy, language: str | None = None) -> str:
    """Plain text (a search query, a form field) with every value the policy finds replaced by its mask."""
    for start, end, _, mask in reversed(find(text, policy, language)):
        text = text[:start] + mask + text[end:]
    return text


def redact(transcript: Transcript, policy: Policy) -> tuple[Transcript, list[Detection]]:
    """The transcript with every value masked in ``text`` and in the words, and what was found.

    A detection's seconds are those of the words that said it, where the segment
    has word times, else the whole segment's. A segment that held a value keeps no
    ``text_raw``; its words that said the value become one word holding the mask.
    """
    segments = list(transcript.segments)
    detections: list[Detection] = []
    for run in _runs(segments):
        joined, spans = "", []
        for n in run:
            if joined:
                joined += " "
            spans.append((n, len(joined), len(joined) + len(segments[n].text)))
            joined += segments[n].text
        edits: dict[int, list[tuple[int, int, str]]] = {}
        word_edits: dict[int, list[tuple[int, int, str]]] = {}
        for start, end, kind, mask in find(joined, policy, segments[run[0]].language or transcript.language):
            touched = [(n, max(start, a) - a, min(end, b) - a) for n, a, b in spans if start < b and a < end]
            times = []
            for i, (n, lo, hi) in enumerate(touched):
                seg = segments[n]
                edits.setdefault(n, []).append((lo, hi, mask if i == 0 else ""))
                said = _word_range(seg.text, seg.words, lo, hi)
                word_edits.setdefault(n, []).append((*(said or (0, len(seg.words) - 1)), mask if i == 0 else ""))
                times += [seg.words[said[0]].start, seg.words[said[1]].end] if said else [seg.start, seg.end]
            first = segments[touched[0][0]]
            detections.append(Detection(kind, first.channel, first.speaker, min(times), max(times), mask))
        for n, changes in edits.items():
            text = segments[n].text
            for lo, hi, replacement in sorted(changes, reverse=True):
                text = text[:lo] + replacement + text[hi:]
            segments[n] = dataclasses.replace(segments[n], text=re.sub(r"\s{2,}", " ", text).strip(), text_raw=None,
                                              words=_mask_words(segments[n].words, word_edits[n]))
    kept = [s for s in segments if s.text]
    return dataclasses.replace(transcript, segments=kept), detections


def _fold(text: str) -> str:
    """Lower case, one character for one (so offsets into the result are offsets into ``text``)."""
    return "".join(c.lower() if len(c.lower()) == 1 else c for c in text)


def _word_range(text: str, words: list[SpokenWord], lo: int, hi: int) -> tuple[int, int] | None:
    """The first and last of ``words`` that said ``text[lo:hi]``, or None where the segment has no word times.

    ``text`` is post-processed (ITN made "four one one one" into "4111"), the words
    are the model's: the two are aligned on the runs of at least ``ANCHOR_CHARS``
    characters they share, and a span that falls between two such runs takes
    every word between them, so an uncertain alignment masks more, never less.
    """
    if not words:
        return None
    spoken, bounds = "", []
    for word in words:
        bounds.append((len(spoken), len(spoken) + len(word.text)))
        spoken += word.text
    matcher = SequenceMatcher(None, _fold(text), _fold(spoken), autojunk=False)
    anchors = [b for b in matcher.get_matching_blocks() if b.size >= ANCHOR_CHARS or (
        b.size >= ANCHOR_CJK_CHARS and all(CJK_CHAR.match(ch) for ch in text[b.a : b.a + b.size]))]
    start = next((b.b + lo - b.a for b in anchors if b.a <= lo < b.a + b.size),
                 max((b.b + b.size for b in anchors if b.a + b.size <= lo), default=0))
    end = next((b.b + hi - b.a for b in anchors if b.a < hi <= b.a + b.size),
               min((b.b for b in anchors if b.a >= hi), default=len(spoken)))
    said = [k for k, (a, b) in enumerate(bounds) if a < end and start < b and words[k].text.strip()]
    return (said[0], said[-1]) if said else (0, len(words) - 1)


def _mask_words(words: list[SpokenWord], edits: list[tuple[int, int, str]]) -> list[SpokenWord]:
    """``words`` with each edited range (overlapping ranges merged) replaced by one word holding its mask."""
    merged: list[tuple[int, int, str]] = []
    for first, last, mask in sorted(edits):
        if merged and first <= merged[-1][1] + 1:
            a, b, previous = merged[-1]
            merged[-1] = (a, max(b, last), " ".join(m for m in (previous, mask) if m))
        else:
            merged.append((first, last, mask))
    out = list(words)
    for first, last, mask in reversed(merged):
        if first > last:
            continue
        replacement = [SpokenWord(f" {mask}", out[first].start, out[last].end)] if mask else []
        out[first : last + 1] = replacement
    return out


def redact_transcript(transcript: Transcript, policy: Policy) -> Transcript:
    """The transcript masked, with what was found and the policy's identity recorded (idempotent)."""
    if transcript.pii_policy == policy.identity:
        return transcript
    clean, found = redact(transcript, policy)
    return dataclasses.replace(clean, pii=[*transcript.pii, *(d.to_dict() for d in found)], pii_policy=policy.identity)


def _runs(segments: list[Segment]) -> list[list[int]]:
    """Indices of each speaker's consecutive segments (in time order, gaps up to JOIN_GAP_SECONDS)."""
    runs: list[list[int]] = []
    last: dict[int, int] = {}  # channel -> index in runs
    for n in sorted(range(len(segments)), key=lambda i: (segments[i].channel, segments[i].start)):
        seg = segments[n]
        at = last.get(seg.channel)
        if at is not None and seg.start - segments[runs[at][-1]].end <= JOIN_GAP_SECONDS:
            runs[at].append(n)
        else:
            last[seg.channel] = len(runs)
            runs.append([n])
    return runs

