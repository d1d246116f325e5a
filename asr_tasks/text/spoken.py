"""Numbers as people say them, read the way a detector needs them.

ITN makes most spoken numbers digits, but not all: "oh", "double", "triple" and
"plus" stay words, 幺 and 两 stay characters where a string was short, and a
number read in groups comes out as groups ("415, 555, 2671"; "138、1234、5678"),
split by whatever was said between them: a full stop the model put at the end of
a segment, "uh", "and the last eight digits are". A ``Reading`` of a text has the
digits written as digits, one space between the groups of one number and nothing
else between them, and knows for each of its characters which characters of the
text said it, so what is found in the reading is masked in the text.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field

from asr_tasks.chars import CJK_CHAR
from asr_tasks.text.pii_policy import Spoken

TOKEN = re.compile(rf"(?P<digits>\d+)|(?P<cjk>{CJK_CHAR.pattern})|(?P<word>[A-Za-z\u00c0-\u024f]+(?:['’][A-Za-z]+)*)"
                   r"|(?P<space>\s+)|(?P<mark>.)", re.S)
SEPARATORS = frozenset(",.，、。;；-–—·．…()（）")  # marks said, or written, between the groups of one number
FULL_WIDTH = str.maketrans("０１２３４５６７８９＋", "0123456789+")  # one character for one: offsets stay
CHAIN = re.compile(r"(?<![\d+])\+?\d++(?: \+?\d++)+")  # a number in groups, as a reading writes it
GROUP = re.compile(r"\+?\d+")


@dataclass
class _Token:
    kind: str  # digits, cjk, word, space, mark
    text: str
    start: int
    end: int
    digit: str | None = None  # the digits it says, where it may say some
    repeat: int = 0  # "double": 2
    plus: bool = False
    joiner: int = -1  # the joiner it is part of


@dataclass
class _Unit:
    """A token, or a joiner's tokens together: what a number is made of, or what separates its groups."""

    tokens: list[_Token]
    kind: str  # digit, repeat, plus, joiner, other

    @property
    def single(self) -> bool:
        """One digit said alone ("four", "一", "4"): spaces between such digits are not groups."""
        return self.kind == "repeat" or (self.kind == "digit" and len(self.tokens[0].digit or "") == 1)


@dataclass(frozen=True)
class Reading:
    """The text with its numbers as digits, and where each character came from (start, end in the text)."""

    text: str
    origin: tuple[tuple[int, int], ...] = field(repr=False)

    def source(self, start: int, end: int) -> tuple[int, int]:
        """The span of the text that said ``self.text[start:end]``."""
        return self.origin[start][0], self.origin[end - 1][1]

    def groups(self, most: int) -> list[list[tuple[int, int]]]:
        """The groups of each number said in more than one group and at most ``most`` (a longer run is no one
        number: a recogniser's loop), as spans of the reading."""
        chains = [[(g.start(), g.end()) for g in GROUP.finditer(self.text, c.start(), c.end())]
                  for c in CHAIN.finditer(self.text)]
        return [groups for groups in chains if len(groups) <= most]


def _tokens(text: str, spoken: Spoken) -> list[_Token]:
    tokens = []
    for m in TOKEN.finditer(text):
        kind = m.lastgroup or "mark"
        token = _Token(kind, m.group(), m.start(), m.end())
        lowered = token.text.lower()
        if kind == "digits":
            token.digit = token.text
        elif kind in ("word", "cjk"):
            token.digit = spoken.digit_words.get(lowered)
            token.repeat = spoken.repeat_words.get(lowered, 0)
            token.plus = lowered in spoken.plus_words
        tokens.append(token)
    if spoken.joiner is not None:
        starts = [t.start for t in tokens]
        for k, m in enumerate(spoken.joiner.finditer(text)):
            if m.start() == m.end():
                continue
            first, last = bisect.bisect_left(starts, m.start()), bisect.bisect_left(starts, m.end())
            inside = tokens[first:last]
            if inside and inside[-1].end <= m.end() and inside[0].start == m.start():
                for t in inside:
                    t.joiner = k
    return tokens


def _units(tokens: list[_Token]) -> list[_Unit]:
    """Tokens as units; spaces and separators belong to no unit (they are the gaps between units)."""
    units: list[_Unit] = []
    for t in tokens:
        if t.joiner >= 0:
            if units and units[-1].kind == "joiner" and units[-1].tokens[0].joiner == t.joiner:
                units[-1].tokens.append(t)
            else:
                units.append(_Unit([t], "joiner"))
        elif t.kind == "space" or (t.kind == "mark" and t.text in SEPARATORS):
            continue
        elif t.repeat:
            units.append(_Unit([t], "repeat"))
        elif t.digit is not None:
            units.append(_Unit([t], "digit"))
        else:
            units.append(_Unit([t], "plus" if t.plus else "other"))
    return units


def _runs(units: list[_Unit]) -> list[list[int]]:
    """Indices of the units of each number: digits side by side, through joiners between two numbers' worth.

    A digit word alone ("one of them", "oh", "一个") is a word; a "double" counts
    only before a digit; a "plus" just before a number is its first unit.
    """
    runs: list[list[int]] = []
    current: list[int] = []
    for n, unit in enumerate(units + [_Unit([], "other")]):
        ok = unit.kind == "digit" or (unit.kind == "repeat" and n + 1 < len(units) and units[n + 1].kind == "digit")
        if ok:
            current.append(n)
            continue
        if current and (len(current) > 1 or units[current[0]].tokens[0].kind == "digits"):
            runs.append(current)
        current = []
    merged: list[list[int]] = []
    for run in runs:
        if merged and run[0] - merged[-1][-1] == 2 and units[run[0] - 1].kind == "joiner":
            merged[-1] += [run[0] - 1, *run]
        else:
            if run[0] > 0 and units[run[0] - 1].kind == "plus":
                run = [run[0] - 1, *run]
            merged.append(run)
    return merged


def read(text: str, spoken: Spoken) -> Reading:
    """The reading of ``text``: see the module's docstring."""
    text = text.translate(FULL_WIDTH)
    tokens = _tokens(text, spoken)
    units = _units(tokens)
    out: list[tuple[str, int, int]] = []  # (written, start, end in text)
    for run in _runs(units):
        for k, n in enumerate(run):
            unit, after = units[n], units[run[k + 1]] if k + 1 < len(run) else None
            if unit.kind == "joiner":
                continue
            token = unit.tokens[0]
            written = "+" if unit.kind == "plus" else (
                (units[n + 1].tokens[0].digit or "")[:1] * (unit.tokens[0].repeat - 1) if unit.kind == "repeat"
                else token.digit or "")
            out.append((written, token.start, token.end))
            if after is None:
                continue
            gap_end = (units[run[k + 2]] if after.kind == "joiner" else after).tokens[0].start
            joined = unit.kind == "plus" or (after.kind != "joiner" and unit.single and after.single
                                             and not text[token.end : gap_end].strip())
            out.append(("" if joined else " ", token.end, gap_end))
    at = 0
    pieces: list[tuple[str, int, int]] = []
    for written, start, end in sorted(out, key=lambda p: p[1]):
        if at < start:
            pieces.append((text[at:start], at, start))
        pieces.append((written, start, end))
        at = max(at, end)
    pieces.append((text[at:], at, len(text)))
    chars, origin = [], []
    for written, start, end in pieces:
        chars.append(written)
        if written == text[start:end]:
            origin += [(start + i, start + i + 1) for i in range(len(written))]
        else:
            origin += [(start, end)] * len(written)
    return Reading("".join(chars), tuple(origin))
