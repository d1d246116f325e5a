"""What a QA rule says about a call, as a tree of conditions, and where in the call each holds.

Leaves: ``said`` (phrases, with speaker, negation, fuzziness, proximity, a time
window, and what must or must not have been said before), ``pii`` (a kind of
``include/pii/`` read out), ``pattern`` (a regular expression) and ``metric``
(the call's analytics). Branches: ``all``, ``any``, ``not``. A condition
evaluates to its hits, the places in the call where it holds: a rule's findings
(or its tag) come from them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Union

from asr_tasks.audit import phrases
from asr_tasks.audit.phrases import Match, Phrase, Token, find, written
from asr_tasks.models import Segment, Transcript
from asr_tasks.text.pii_policy import luhn

DEFAULT_FUZZY = 0.85  # ``fuzzy: true``: how alike a window of words must be to a phrase
CALL_METRICS = ("duration", "talk_seconds", "non_talk_seconds", "non_talk_share", "longest_silence_seconds",
                "overlap_seconds", "turns", "interruptions")
SPEAKER_METRICS = ("talk_seconds", "talk_share", "words", "words_per_minute", "turns", "interruptions")


@dataclass(frozen=True)
class Hit:
    speaker: str
    start: float
    end: float
    text: str  # what was said there ("" where the condition is an absence or a measure)
    confidence: float = 1.0


@dataclass
class Turn:
    speaker: str
    tokens: list[Token] = field(default_factory=list)


class Call:
    """A transcript as conditions read it: each speaker's turns as tokens (a turn runs until the other speaker
    talks), its segments for the seconds, its analytics."""

    def __init__(self, transcript: Transcript) -> None:
        self.transcript = transcript
        self.segments = sorted((s for s in transcript.segments if s.text.strip()), key=lambda s: (s.start, s.channel))
        self.duration = max([transcript.duration, *(s.end for s in self.segments)])
        self.turns: list[Turn] = []
        clause = 0
        for n, seg in enumerate(self.segments):
            if not self.turns or self.turns[-1].speaker != seg.speaker:
                self.turns.append(Turn(seg.speaker))
            toks = phrases.tokens(seg.text, n, clause)
            clause = (toks[-1].clause if toks else clause) + 1  # a segment's end ends its clause
            self.turns[-1].tokens += toks

    def span(self, turn: Turn, first: int, last: int) -> tuple[float, float]:
        a, b = self.segments[turn.tokens[first].segment], self.segments[turn.tokens[last].segment]
        return a.start, b.end


def _applies(speakers: tuple[str, ...], speaker: str) -> bool:
    """A speaker-scoped condition applies to that speaker, and to the whole of a mono ("mixed") call."""
    return not speakers or speaker in speakers or speaker == "mixed"


@dataclass(frozen=True)
class Said:
    phrases: tuple[Phrase, ...]
    speakers: tuple[str, ...] = ()
    fuzzy: float | None = None
    negated: str = "no"  # phrases.NEGATED
    near: Said | None = None
    within: int = 8  # tokens between this phrase and its ``near`` one
    first_seconds: float | None = None
    last_seconds: float | None = None
    position: tuple[float, float] | None = None  # share of the call where it starts, e.g. (0.0, 0.25)
    preceded_by: Condition | None = None
    not_preceded_by: Condition | None = None

    def window(self, call: Call) -> tuple[float, float]:
        if self.first_seconds is not None:
            return 0.0, self.first_seconds  # the rule's seconds, even past a short call's end
        if self.last_seconds is not None:
            return max(0.0, call.duration - self.last_seconds), call.duration
        if self.position is not None:
            return self.position[0] * call.duration, self.position[1] * call.duration
        return 0.0, call.duration

    def matches(self, toks: list[Token]) -> list[Match]:
        out = [m for p in self.phrases for m in find(toks, p, self.fuzzy)
               if self.negated == "any" or m.negated == (self.negated == "yes")]
        kept: list[Match] = []
        for m in sorted(out, key=lambda m: (m.first, -m.confidence)):  # alternatives said at one place: one match
            if not kept or m.first > kept[-1].last:
                kept.append(m)
        return kept

    def hits(self, call: Call) -> list[Hit]:
        lo, hi = self.window(call)
        before = hits(self.preceded_by, call) if self.preceded_by else []
        not_before = hits(self.not_preceded_by, call) if self.not_preceded_by else []
        out = []
        for turn in call.turns:
            if not _applies(self.speakers, turn.speaker):
                continue
            near = self.near.matches(turn.tokens) if self.near else []
            for m in self.matches(turn.tokens):
                start, end = call.span(turn, m.first, m.last)
                if not (lo <= start < hi or (lo == hi == start)):
                    continue
                if self.near and not any(max(n.first - m.last, m.first - n.last) - 1 <= self.within for n in near):
                    continue
                if self.preceded_by and not any(h.start < start for h in before):
                    continue
                if any(h.start < start for h in not_before):
                    continue
                out.append(Hit(turn.speaker, start, end, written(turn.tokens, m), m.confidence))
        return out


@dataclass(frozen=True)
class Pii:
    kinds: tuple[str, ...]
    speakers: tuple[str, ...] = ()

    def hits(self, call: Call) -> list[Hit]:
        return [Hit(p["speaker"], p["start"], p["end"], p["masked"]) for p in call.transcript.pii
                if p["kind"] in self.kinds and _applies(self.speakers, p["speaker"])]


@dataclass(frozen=True)
class Pattern:
    regex: re.Pattern[str]
    luhn: bool = False
    speakers: tuple[str, ...] = ()

    def hits(self, call: Call) -> list[Hit]:
        return [Hit(s.speaker, s.start, s.end, m.group(0)) for s in call.segments if _applies(self.speakers, s.speaker)
                for m in self.regex.finditer(s.text) if not self.luhn or luhn(re.sub(r"\D", "", m.group(0)))]


@dataclass(frozen=True)
class Metric:
    name: str
    speakers: tuple[str, ...] = ()
    above: float | None = None
    below: float | None = None

    def value(self, call: Call) -> float | None:
        """The measure from the call's analytics; None where the call has none (a mono call has no speakers')."""
        data = call.transcript.analytics
        if not data:
            return None
        if self.speakers:
            stats = [s for name, s in (data.get("speakers") or {}).items() if name in self.speakers]
            return float(sum(s.get(self.name, 0) for s in stats)) if stats else None
        if self.name == "interruptions":
            return float(sum(s.get("interruptions", 0) for s in (data.get("speakers") or {}).values()))
        return float(data[self.name]) if self.name in data else None

    def hits(self, call: Call) -> list[Hit]:
        value = self.value(call)
        if value is None or (self.above is not None and value <= self.above) or (
                self.below is not None and value >= self.below):
            return []
        shown = f"{value:.0%}" if self.name.endswith("share") else f"{value:g}"
        return [Hit(",".join(self.speakers) or "any", 0.0, call.duration, f"{self.name} {shown}")]


@dataclass(frozen=True)
class AllOf:
    """Every condition holds; the hits are the first one's."""

    conditions: tuple[Condition, ...]

    def hits(self, call: Call) -> list[Hit]:
        found = [hits(c, call) for c in self.conditions]
        return found[0] if all(found) else []


@dataclass(frozen=True)
class AnyOf:
    conditions: tuple[Condition, ...]

    def hits(self, call: Call) -> list[Hit]:
        found = dict.fromkeys(h for c in self.conditions for h in hits(c, call))  # in the order of the conditions
        return sorted(found, key=lambda h: h.start)


@dataclass(frozen=True)
class NotOf:
    """The condition does not hold anywhere (in its window): one hit over that window, on a call with speech."""

    condition: Condition

    def hits(self, call: Call) -> list[Hit]:
        if not call.segments or hits(self.condition, call):
            return []
        lo, hi = window_of(self.condition, call)
        speakers = speakers_in(self.condition)
        return [Hit(speakers[0] if len(speakers) == 1 else "any", lo, hi, "")]


def window_of(condition: Condition, call: Call) -> tuple[float, float]:
    """The stretch of the call a condition looks at: a ``said``'s window, the span of a combination's, else all."""
    if isinstance(condition, Said):
        return condition.window(call)
    if isinstance(condition, (AllOf, AnyOf)):
        spans = [window_of(c, call) for c in condition.conditions]
        return min(a for a, _ in spans), max(b for _, b in spans)
    return 0.0, call.duration


def speakers_in(condition: Condition) -> tuple[str, ...]:
    """Whose words a condition is about (empty: anyone's)."""
    if isinstance(condition, (AllOf, AnyOf)):
        found = [speakers_in(c) for c in condition.conditions]
        return () if any(not f for f in found) else tuple(dict.fromkeys(s for f in found for s in f))
    return tuple(getattr(condition, "speakers", ()))


Condition = Union[Said, Pii, Pattern, Metric, AllOf, AnyOf, NotOf]


def hits(condition: Condition, call: Call) -> list[Hit]:
    return condition.hits(call)


# --- from a rule file ---------------------------------------------------------------------------------------------

SAID_FIELDS = {"said", "speaker", "fuzzy", "negated", "near", "within", "first_seconds", "last_seconds", "position",
               "preceded_by", "not_preceded_by"}
FIELDS = {"said": SAID_FIELDS, "pii": {"pii", "speaker"}, "pattern": {"pattern", "luhn", "speaker"},
          "metric": {"metric", "speaker", "above", "below"}, "all": {"all"}, "any": {"any"}, "not": {"not"}}


def speakers_of(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not all(isinstance(v, str) and v for v in values):
        raise ValueError(f"speaker must be a name or a list of names, not {value!r}")
    return tuple(values)


def _strings(value: Any, what: str) -> list[str]:
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not values or not all(isinstance(v, str) and v.strip() for v in values):
        raise ValueError(f"{what} must be a phrase or a list of non-empty phrases, not {value!r}")
    return values


def _number(data: dict[str, Any], name: str, least: float = 0.0, most: float = float("inf")) -> float | None:
    value = data.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not least <= value <= most:
        raise ValueError(f"{name} must be a number from {least:g} to {most:g}, not {value!r}")
    return float(value)


def parse(data: Any, speakers: tuple[str, ...] = ()) -> Condition:
    """A condition from a rule file's mapping; ``speakers`` is the rule's, for conditions that name none.
    Raises ValueError saying what is wrong."""
    if isinstance(data, list):  # a bare list: any of its conditions
        return AnyOf(tuple(parse(c, speakers) for c in data))
    if not isinstance(data, dict):
        raise ValueError(f"a condition must be a mapping (said, pii, pattern, metric, all, any, not), not {data!r}")
    kinds = [k for k in FIELDS if k in data]
    if len(kinds) != 1:
        raise ValueError(f"a condition needs exactly one of {', '.join(FIELDS)}; got {sorted(data)}")
    kind = kinds[0]
    unknown = set(data) - FIELDS[kind]
    if unknown:
        raise ValueError(f"{kind}: unknown field(s) {', '.join(sorted(unknown))} "
                         f"(allowed: {', '.join(sorted(FIELDS[kind]))})")
    own = speakers_of(data["speaker"]) if "speaker" in data else speakers
    if kind in ("all", "any"):
        children = data[kind]
        if not isinstance(children, list) or not children:
            raise ValueError(f"{kind} must be a non-empty list of conditions")
        parts = tuple(parse(c, speakers) for c in children)
        return AllOf(parts) if kind == "all" else AnyOf(parts)
    if kind == "not":
        return NotOf(parse(data["not"], speakers))
    if kind == "pii":
        return Pii(tuple(_strings(data["pii"], "pii")), own)
    if kind == "pattern":
        try:
            return Pattern(re.compile(str(data["pattern"])), bool(data.get("luhn", False)), own)
        except re.error as exc:
            raise ValueError(f"invalid regular expression: {exc}") from exc
    if kind == "metric":
        name = data["metric"]
        allowed = SPEAKER_METRICS if "speaker" in data else CALL_METRICS
        if name not in allowed:
            raise ValueError(f"metric {name!r}: not one of {', '.join(allowed)}"
                             f"{' (per speaker)' if 'speaker' in data else ' (per call; per speaker with speaker:)'}")
        if data.get("above") is None and data.get("below") is None:
            raise ValueError(f"metric {name}: needs above or below")
        return Metric(name, own, _number(data, "above"), _number(data, "below"))
    return _said(data, own, speakers)


def _said(data: dict[str, Any], own: tuple[str, ...], speakers: tuple[str, ...]) -> Said:
    fuzzy = data.get("fuzzy")
    if fuzzy is True:
        fuzzy = DEFAULT_FUZZY
    elif fuzzy is False:
        fuzzy = None
    elif fuzzy is not None:
        fuzzy = _number(data, "fuzzy", 0.5, 1.0)
    negated = data.get("negated", False)
    negated = {False: "no", True: "yes", "any": "any"}.get(negated) if isinstance(negated, (bool, str)) else None
    if negated is None:
        raise ValueError(f"negated must be false, true or any, not {data.get('negated')!r}")
    near = None
    if "near" in data:
        if not isinstance(data["near"], dict) or "said" not in data["near"]:
            raise ValueError("near must be a mapping with said: (and within:, fuzzy:, negated:)")
        near = _said({k: v for k, v in data["near"].items() if k != "within"}, own, speakers)
    within = data.get("within", (data.get("near") or {}).get("within", 8) if isinstance(data.get("near"), dict) else 8)
    if isinstance(within, bool) or not isinstance(within, int) or within < 0:
        raise ValueError(f"within must be a whole number of words, not {within!r}")
    position = data.get("position")
    if position is not None:
        if (not isinstance(position, list) or len(position) != 2
                or not all(isinstance(p, (int, float)) and 0 <= p <= 1 for p in position) or position[0] > position[1]):
            raise ValueError(f"position must be [from, to], shares of the call from 0 to 1, not {position!r}")
        position = (float(position[0]), float(position[1]))
    windows = [k for k in ("first_seconds", "last_seconds", "position") if k in data]
    if len(windows) > 1:
        raise ValueError(f"one time window at most: {', '.join(windows)}")
    return Said(
        phrases=tuple(Phrase.of(p) for p in _strings(data["said"], "said")), speakers=own, fuzzy=fuzzy,
        negated=negated, near=near, within=within, first_seconds=_number(data, "first_seconds"),
        last_seconds=_number(data, "last_seconds"), position=position,
        preceded_by=parse(data["preceded_by"], speakers) if "preceded_by" in data else None,
        not_preceded_by=parse(data["not_preceded_by"], speakers) if "not_preceded_by" in data else None,
    )


def segments_of(example: Any, speaker: str) -> tuple[list[Segment], dict[str, Any]]:
    """A rule's example as the segments of a call: a line of text (said by the rule's speaker), or a list of
    ``"speaker: text"`` turns four seconds apart, or a mapping with ``turns:`` and the call's ``analytics:``."""
    analytics: dict[str, Any] = {}
    if isinstance(example, dict):
        unknown = set(example) - {"turns", "analytics"}
        if unknown or "turns" not in example:
            raise ValueError(f"an example mapping has turns: (and analytics:), not {sorted(example)}")
        analytics = dict(example.get("analytics") or {})
        example = example["turns"]
    lines = [example] if isinstance(example, str) else example
    if not isinstance(lines, list) or not all(isinstance(line, str) for line in lines):
        raise ValueError(f"an example is a line, a list of 'speaker: text' lines, or a mapping, not {example!r}")
    out = []
    for n, line in enumerate(lines):
        who, sep, text = line.partition(":")
        who, text = (who.strip(), text.strip()) if sep and who.strip() in ("agent", "customer", "mixed") else (
            speaker, line.strip())
        out.append(Segment(recording_id="example", channel=0 if who == "agent" else 1, speaker=who,
                           start=4.0 * n, end=4.0 * n + 3.5, text=text))
    return out, analytics
