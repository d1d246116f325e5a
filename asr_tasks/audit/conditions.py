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

from asr_tasks.audit.phrases import Match, Phrase, Token, ends, find, tokens, written
from asr_tasks.models import Segment, Transcript
from asr_tasks.text.pii_policy import Spoken, luhn
from asr_tasks.text.turns import is_backchannel

DEFAULT_FUZZY = 0.85  # ``fuzzy: true``: how alike a window of words must be to a phrase
CALL_METRICS = ("duration", "talk_seconds", "non_talk_seconds", "non_talk_share", "longest_silence_seconds",
                "overlap_seconds", "turns", "interruptions")
SPEAKER_METRICS = ("talk_seconds", "talk_share", "words", "words_per_minute", "turns", "interruptions")


@dataclass(frozen=True)
class Hit:
    speaker: str
    start: float  # the seconds shown and played: the segments it lies in
    end: float
    text: str  # what was said there ("" where the condition is an absence or a measure)
    confidence: float = 1.0
    at: float = -1.0  # when it was said, as near as the call knows (-1: its start), to order hits in one segment

    @property
    def when(self) -> float:
        return self.start if self.at < 0 else self.at


@dataclass
class Turn:
    speaker: str
    tokens: list[Token] = field(default_factory=list)


class Call:
    """A transcript as conditions read it: each speaker's turns as tokens (a turn runs until the other speaker
    says more than a back-channel), its segments for the seconds, its analytics. A segment that ends without
    punctuation runs on into the speaker's next one (the recogniser cut a sentence at a pause)."""

    def __init__(self, transcript: Transcript, spoken: Spoken | None = None) -> None:
        self.transcript = transcript
        self.segments = sorted((s for s in transcript.segments if s.text.strip()), key=lambda s: (s.start, s.channel))
        self.duration = max([transcript.duration, *(s.end for s in self.segments)])
        self.turns: list[Turn] = []
        self.times: dict[tuple[int, int], tuple[float, float]] = {}  # (turn, token): when it was said
        open_turn: dict[str, int] = {}
        numbers: dict[str, tuple[int, int]] = {}  # speaker: the clause and sentence their next words continue
        for n, seg in enumerate(self.segments):
            at = open_turn.get(seg.speaker)
            if at is None:
                at = open_turn[seg.speaker] = len(self.turns)
                self.turns.append(Turn(seg.speaker))
                numbers[seg.speaker] = (n * 1000, n * 1000)
            if spoken is None or not is_backchannel(seg, spoken):
                for other in [who for who in open_turn if who != seg.speaker]:
                    del open_turn[other]
            clause, sentence = numbers[seg.speaker]
            toks = tokens(seg.text, n, clause, sentence)
            if toks:
                clause_ends, sentence_ends = ends(seg.text)
                numbers[seg.speaker] = (toks[-1].clause + clause_ends, toks[-1].sentence + sentence_ends)
            turn = self.turns[at]
            step = (seg.end - seg.start) / max(len(toks), 1)
            for k, _ in enumerate(toks):  # spread evenly over the segment: a token's seconds, roughly
                self.times[(at, len(turn.tokens) + k)] = (seg.start + k * step, seg.start + (k + 1) * step)
            turn.tokens += toks

    def span(self, turn: Turn, first: int, last: int) -> tuple[float, float]:
        a, b = self.segments[turn.tokens[first].segment], self.segments[turn.tokens[last].segment]
        return a.start, b.end


def _applies(speakers: tuple[str, ...], speaker: str) -> bool:
    """A speaker-scoped condition applies to that speaker, and to the whole of a mono ("mixed") call."""
    return not speakers or speaker in speakers or speaker == "mixed"


def _apart(a: Match, b: Match, toks: list[Token]) -> float:
    """Words between two matches (a Chinese character counts half a word); infinite across a sentence's end."""
    lo, hi = (a, b) if a.first <= b.first else (b, a)
    if toks[lo.last].sentence != toks[hi.first].sentence:
        return float("inf")
    return sum(0.5 if t.cjk else 1.0 for t in toks[lo.last + 1:hi.first])


@dataclass(frozen=True)
class Said:
    phrases: tuple[Phrase, ...]
    speakers: tuple[str, ...] = ()
    fuzzy: float | None = None
    negated: str = "no"  # phrases.NEGATED
    asked: str = "any"  # "no": statements only; "yes": questions only
    near: Said | None = None
    within: int = 8  # words between this phrase and its ``near`` one, in one sentence
    first_seconds: float | None = None
    last_seconds: float | None = None
    position: tuple[float, float] | None = None  # share of the call where it starts, e.g. (0.0, 0.25)
    preceded_by: Condition | None = None
    not_preceded_by: Condition | None = None
    followed_by: Condition | None = None
    not_followed_by: Condition | None = None

    def window(self, call: Call) -> tuple[float, float]:
        if self.first_seconds is not None:
            return 0.0, self.first_seconds  # the rule's seconds, even past a short call's end
        if self.last_seconds is not None:
            return max(0.0, call.duration - self.last_seconds), call.duration
        if self.position is not None:
            return self.position[0] * call.duration, self.position[1] * call.duration
        return 0.0, call.duration

    def matches(self, toks: list[Token]) -> list[Match]:
        """Where its phrases are said: of alternatives said at one place the longest (保本保息, not 保本), then
        only those negated (or not) and asked (or not) as the condition says."""
        found = [m for p in self.phrases for m in find(toks, p, self.fuzzy)]
        kept: list[Match] = []
        for m in sorted(found, key=lambda m: (m.first, -(m.last - m.first), -m.confidence)):
            if not kept or m.first > kept[-1].last:
                kept.append(m)
        return [m for m in kept if (self.negated == "any" or m.negated == (self.negated == "yes"))
                and (self.asked == "any" or m.question == (self.asked == "yes"))]

    def _in_window(self, said: tuple[float, float], lo: float, hi: float) -> bool:
        """A phrase is within the first seconds when it was finished by then, within the last when it began in
        them, and in a share of the call when it began there."""
        if self.first_seconds is not None:
            return said[1] <= hi + 1e-9
        return lo <= said[0] < hi or lo == hi == said[0]

    def hits(self, call: Call) -> list[Hit]:
        lo, hi = self.window(call)
        order = {name: hits(c, call) for name, c in (("preceded_by", self.preceded_by),
                 ("not_preceded_by", self.not_preceded_by), ("followed_by", self.followed_by),
                 ("not_followed_by", self.not_followed_by)) if c is not None}
        out = []
        for at, turn in enumerate(call.turns):
            if not _applies(self.speakers, turn.speaker):
                continue
            near = self.near.matches(turn.tokens) if self.near else []
            for m in self.matches(turn.tokens):
                said = call.times[(at, m.first)][0], call.times[(at, m.last)][1]
                if not self._in_window(said, lo, hi):
                    continue
                if self.near and not any(_apart(m, n, turn.tokens) <= self.within for n in near):
                    continue
                when = said[0]
                if "preceded_by" in order and not any(h.when < when for h in order["preceded_by"]):
                    continue
                if any(h.when < when for h in order.get("not_preceded_by", ())):
                    continue
                if "followed_by" in order and not any(h.when > when for h in order["followed_by"]):
                    continue
                if any(h.when > when for h in order.get("not_followed_by", ())):
                    continue
                start, end = call.span(turn, m.first, m.last)
                out.append(Hit(turn.speaker, start, end, written(turn.tokens, m), m.confidence, when))
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

ORDER_FIELDS = ("preceded_by", "not_preceded_by", "followed_by", "not_followed_by")
SAID_FIELDS = {"said", "speaker", "fuzzy", "negated", "asked", "near", "within", "first_seconds", "last_seconds",
               "position", *ORDER_FIELDS}
NEAR_FIELDS = {"said", "fuzzy", "negated", "within"}  # the same speaker's turn: no speaker or window of its own
FIELDS = {"said": SAID_FIELDS, "pii": {"pii", "speaker"}, "pattern": {"pattern", "luhn", "speaker"},
          "metric": {"metric", "speaker", "above", "below"}, "all": {"all"}, "any": {"any"}, "not": {"not"}}


def speakers_of(value: Any, known: frozenset[str] = frozenset()) -> tuple[str, ...]:
    """A rule's ``speaker:``: a name or a list of names, each one a transcript can carry (``known``, when given)."""
    if value is None:
        return ()
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not values or not all(isinstance(v, str) and v for v in values):
        raise ValueError(f"speaker must be a name or a list of names, not {value!r}")
    unknown = [v for v in values if known and v not in known]
    if unknown:
        raise ValueError(f"speaker {unknown[0]!r}: not a speaker of these calls (one of {', '.join(sorted(known))})")
    return tuple(values)


def _strings(value: Any, what: str) -> list[str]:
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not values or not all(isinstance(v, str) and v.strip() for v in values):
        raise ValueError(f"{what} must be a phrase or a list of non-empty phrases, not {value!r}")
    return values


def _number(data: dict[str, Any], name: str, least: float = 0.0, most: float | None = None,
            above_least: bool = False) -> float | None:
    """A number of the rule file (YAML reads 1e3 as text: it is taken as the number it spells)."""
    value = data.get(name)
    if value is None:
        return None
    if isinstance(value, str) and re.fullmatch(r"\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*", value):
        value = float(value)
    ok = not isinstance(value, bool) and isinstance(value, (int, float)) and value == value and value != float("inf")
    if ok and (value < least or (above_least and value == least) or (most is not None and value > most)):
        ok = False
    if not ok:
        bounds = (f"more than {least:g}" if above_least else f"{least:g} or more") if most is None else \
            f"from {least:g} to {most:g}"
        raise ValueError(f"{name} must be a number {bounds}, not {data.get(name)!r}")
    return float(value)


class Parser:
    """Conditions from a rule file's mappings, checked against the speakers these calls can have."""

    def __init__(self, known_speakers: frozenset[str] = frozenset()) -> None:
        self.known = known_speakers

    def parse(self, data: Any, speakers: tuple[str, ...] = ()) -> Condition:
        """A condition; ``speakers`` is the rule's, for conditions that name none. Raises ValueError saying what is
        wrong."""
        if isinstance(data, list):  # a bare list: any of its conditions
            if not data:
                raise ValueError("an empty list of conditions holds nowhere: give at least one")
            return AnyOf(tuple(self.parse(c, speakers) for c in data))
        if not isinstance(data, dict):
            raise ValueError(f"a condition must be a mapping (said, pii, pattern, metric, all, any, not), not {data!r}")
        kinds = [k for k in FIELDS if k in data]
        if len(kinds) != 1:
            raise ValueError(f"a condition needs exactly one of {', '.join(FIELDS)}; got {', '.join(sorted(data))}")
        kind = kinds[0]
        unknown = set(data) - FIELDS[kind]
        if unknown:
            raise ValueError(f"{kind}: unknown field(s) {', '.join(sorted(unknown))} "
                             f"(allowed: {', '.join(sorted(FIELDS[kind]))})")
        own = speakers_of(data["speaker"], self.known) if "speaker" in data else speakers
        if kind in ("all", "any"):
            children = data[kind]
            if not isinstance(children, list) or not children:
                raise ValueError(f"{kind} must be a non-empty list of conditions")
            parts = tuple(self.parse(c, speakers) for c in children)
            return AllOf(parts) if kind == "all" else AnyOf(parts)
        if kind == "not":
            if data["not"] in (None, [], {}):
                raise ValueError("not: needs the condition that must not hold")
            return NotOf(self.parse(data["not"], speakers))
        if kind == "pii":
            return Pii(tuple(_strings(data["pii"], "pii")), own)
        if kind == "pattern":
            if not isinstance(data.get("luhn", False), bool):
                raise ValueError(f"luhn must be true or false, not {data['luhn']!r}")
            try:
                return Pattern(re.compile(str(data["pattern"])), bool(data.get("luhn", False)), own)
            except re.error as exc:
                raise ValueError(f"invalid regular expression: {exc}") from exc
        if kind == "metric":
            return self._metric(data, own)
        return self._said(data, own, speakers)

    def _metric(self, data: dict[str, Any], own: tuple[str, ...]) -> Metric:
        name = data["metric"]
        allowed = SPEAKER_METRICS if "speaker" in data else CALL_METRICS
        if name not in allowed:
            raise ValueError(f"metric {name!r}: not one of {', '.join(allowed)}"
                             f"{' (per speaker)' if 'speaker' in data else ' (per call; per speaker with speaker:)'}")
        if data.get("above") is None and data.get("below") is None:
            raise ValueError(f"metric {name}: needs above or below")
        most = 1.0 if str(name).endswith("share") else None
        above, below = _number(data, "above", most=most), _number(data, "below", most=most)
        if above is not None and below is not None and above >= below:
            raise ValueError(f"metric {name}: above {above:g} and below {below:g} can never both hold")
        return Metric(name, own, above, below)

    def _said(self, data: dict[str, Any], own: tuple[str, ...], speakers: tuple[str, ...],
              near: bool = False) -> Said:
        fuzzy = data.get("fuzzy")
        if fuzzy is True:
            fuzzy = DEFAULT_FUZZY
        elif fuzzy is False:
            fuzzy = None
        elif fuzzy is not None:
            fuzzy = _number(data, "fuzzy", 0.5, 1.0)
        choice = {"negated": data.get("negated", False), "asked": data.get("asked", "any")}
        read: dict[str, str] = {}
        for name, value in choice.items():
            word = {False: "no", True: "yes", "any": "any"}.get(value) if isinstance(value, (bool, str)) else None
            if word is None:
                raise ValueError(f"{name} must be false, true or any, not {value!r}")
            read[name] = word
        close = None
        if "near" in data:
            given = data["near"]
            if not isinstance(given, dict) or "said" not in given:
                raise ValueError("near must be a mapping with said: (and within:, fuzzy:, negated:)")
            extra = set(given) - NEAR_FIELDS
            if extra:
                raise ValueError(f"near: unknown field(s) {', '.join(sorted(extra))} (allowed: "
                                 f"{', '.join(sorted(NEAR_FIELDS))}; it is the same speaker's turn)")
            close = self._said({k: v for k, v in given.items() if k != "within"}, own, speakers, near=True)
        within = data.get("within", data["near"].get("within", 8) if isinstance(data.get("near"), dict) else 8)
        if isinstance(within, bool) or not isinstance(within, int) or within < 0:
            raise ValueError(f"within must be a whole number of words, not {within!r}")
        position = data.get("position")
        if position is not None:
            if (not isinstance(position, list) or len(position) != 2 or not all(
                    isinstance(p, (int, float)) and 0 <= p <= 1 for p in position) or position[0] >= position[1]):
                raise ValueError(f"position must be [from, to], shares of the call from 0 to 1, not {position!r}")
            position = (float(position[0]), float(position[1]))
        windows = [k for k in ("first_seconds", "last_seconds", "position") if k in data]
        if len(windows) > 1:
            raise ValueError(f"one time window at most: {', '.join(windows)}")
        order = {k: self.parse(data[k], speakers) for k in ORDER_FIELDS if k in data}
        return Said(
            phrases=tuple(Phrase.of(p) for p in _strings(data["said"], "said")), speakers=own, fuzzy=fuzzy,
            negated=read["negated"], asked=read["asked"], near=close, within=within,
            first_seconds=_number(data, "first_seconds", above_least=True),
            last_seconds=_number(data, "last_seconds", above_least=True), position=position, **order)


def pii_kinds(condition: Condition) -> set[str]:
    """Every kind of personal data a condition names."""
    if isinstance(condition, Pii):
        return set(condition.kinds)
    if isinstance(condition, (AllOf, AnyOf)):
        return {k for c in condition.conditions for k in pii_kinds(c)}
    if isinstance(condition, NotOf):
        return pii_kinds(condition.condition)
    if isinstance(condition, Said):
        return {k for c in (condition.preceded_by, condition.not_preceded_by, condition.followed_by,
                            condition.not_followed_by) if c is not None for k in pii_kinds(c)}
    return set()


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
        named = who.strip().lower()
        who, text = (named, text.strip()) if sep and named in ("agent", "customer", "mixed") else (speaker, line.strip())
        out.append(Segment(recording_id="example", channel=0 if who == "agent" else 1, speaker=who,
                           start=4.0 * n, end=4.0 * n + 3.5, text=text))
    return out, analytics
