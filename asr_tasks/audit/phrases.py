"""Phrases as QA rules match them: on the words the recogniser wrote, in their clauses, with negation in view.

A call's text becomes tokens (an English word, or one Chinese character) that keep
their clause (punctuation ends one) and their segment (for the seconds). A phrase
matches a run of tokens exactly or, when its rule asks, fuzzily: English by the
edit distance of its letters over a window of one word more or less, Chinese by
the edit distance of its syllables (pinyin without tones, so a homophone the
model wrote still matches).
Each match says whether a negator of its language stands within a few tokens
before it in the same clause ("I cannot guarantee a return", "我们不能保证收益").
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from rapidfuzz import fuzz
from rapidfuzz.distance import Levenshtein

from asr_tasks.chars import CJK_CHAR, CJK_RANGES

_TOKEN = re.compile(rf"[{CJK_RANGES}]|[^\W_]+", re.UNICODE)
# a clause ends at punctuation; a full stop only where it is not a decimal point
_CLAUSE = re.compile(r"[,;:!?，。；：！？、…]|\.(?!\d)")
_NOT = re.compile(r"n[’']t\b")  # "can't", "don't": a "not" of their own
EN_NEGATORS = frozenset({"not", "no", "never", "cannot", "nobody", "nothing", "none", "neither", "nor", "without"})
EN_SCOPE = 4  # words before a phrase that a negator may stand in
ZH_NEGATORS = frozenset("不没无未别非勿莫")
# words that begin with a negator's character and negate nothing
ZH_NOT_NEGATORS = ("不过", "不错", "不仅", "不但", "不断", "不久", "不少", "不好意思", "无论", "非常", "别人", "别的",
                   "莫名")
ZH_SCOPE = 4  # characters before a phrase
NEGATED = ("no", "yes", "any")  # a rule's choice: un-negated matches only (the default), negated only, or both


@dataclass(frozen=True)
class Token:
    text: str  # case- and width-folded, simplified script
    clause: int
    segment: int  # index into the call's segments (for the seconds)

    @property
    def cjk(self) -> bool:
        return CJK_CHAR.match(self.text) is not None


@dataclass(frozen=True)
class Match:
    first: int  # token indices, inclusive
    last: int
    confidence: float  # 1.0 for an exact match
    negated: bool


@lru_cache(maxsize=1)
def _to_simplified() -> Any:
    import opencc

    return opencc.OpenCC("t2s")


def fold(text: str) -> str:
    """Width- and case-folded, in simplified script, with English contractions' "not" spelt out."""
    text = unicodedata.normalize("NFKC", text).lower()
    if CJK_CHAR.search(text):
        text = _to_simplified().convert(text)
    return _NOT.sub(" not", text)


def tokens(text: str, segment: int = 0, clause: int = 0) -> list[Token]:
    """A text's tokens, numbering its clauses from ``clause``."""
    out: list[Token] = []
    for n, part in enumerate(_CLAUSE.split(fold(text))):
        out += [Token(word, clause + n, segment) for word in _TOKEN.findall(part)]
    return out


@dataclass(frozen=True)
class Phrase:
    """One phrase of a rule, as tokens; how loosely it matches is its rule's choice."""

    text: str
    words: tuple[str, ...]

    @classmethod
    def of(cls, text: str) -> Phrase:
        words = tuple(t.text for t in tokens(text))
        if not words:
            raise ValueError(f"phrase {text!r} has no words")
        return cls(text, words)


@lru_cache(maxsize=65536)
def sound(token: str) -> str:
    """What a token sounds like: a Chinese character's pinyin without its tone; any other token itself."""
    if not CJK_CHAR.match(token):
        return token
    from pypinyin import Style, lazy_pinyin

    return str(lazy_pinyin(token, style=Style.NORMAL)[0])


def similarity(window: list[str], phrase: tuple[str, ...], cutoff: float = 0.0) -> float:
    """How alike a window of tokens is to a phrase, 0-1: for Chinese, syllable by syllable (a homophone is the
    same syllable, any other character a different one: 有风险 is not 没有风险); otherwise letter by letter
    over the words. Below ``cutoff`` it may answer 0 (and faster)."""
    if any(CJK_CHAR.match(w) for w in phrase):
        return float(Levenshtein.normalized_similarity([sound(w) for w in window], [sound(w) for w in phrase],
                                                       score_cutoff=cutoff))
    return float(fuzz.ratio(" ".join(window), " ".join(phrase), score_cutoff=cutoff * 100)) / 100.0


def negated(toks: list[Token], first: int) -> bool:
    """Whether a negator of its language stands in the few tokens before ``first``, in the same clause."""
    clause = toks[first].clause
    before = [t for t in toks[max(0, first - max(EN_SCOPE, ZH_SCOPE)):first] if t.clause == clause]
    words = [t.text for t in before if not t.cjk][-EN_SCOPE:]
    if EN_NEGATORS.intersection(words):
        return True
    chars = "".join(t.text for t in before if t.cjk)[-ZH_SCOPE:]
    for word in ZH_NOT_NEGATORS:
        chars = chars.replace(word, " ")
    return any(c in ZH_NEGATORS for c in chars)


def find(toks: list[Token], phrase: Phrase, fuzzy: float | None = None) -> list[Match]:
    """Where ``phrase`` is said in ``toks``: exact runs, or with ``fuzzy`` (0-1) the best window at each start whose
    similarity reaches it, non-overlapping, best first."""
    n = len(phrase.words)
    words = [t.text for t in toks]
    found: list[Match] = []
    for i in range(len(toks) - n + 1):
        if tuple(words[i:i + n]) == phrase.words:
            found.append(Match(i, i + n - 1, 1.0, negated(toks, i)))
    if fuzzy is None:
        return found
    taken = {k for m in found for k in range(m.first, m.last + 1)}
    candidates: list[Match] = []
    for i in range(len(toks)):
        best: tuple[float, int] | None = None
        for length in (n - 1, n, n + 1):
            if length < 1 or i + length > len(toks) or toks[i + length - 1].clause != toks[i].clause:
                continue
            score = similarity(words[i:i + length], phrase.words, fuzzy)
            if score >= fuzzy and (best is None or score > best[0]):
                best = (score, i + length - 1)
        if best is not None:
            candidates.append(Match(i, best[1], round(best[0], 3), negated(toks, i)))
    for m in sorted(candidates, key=lambda m: (-m.confidence, m.first)):
        span = set(range(m.first, m.last + 1))
        if not span & taken:
            found.append(m)
            taken |= span
    return sorted(found, key=lambda m: m.first)


def written(toks: list[Token], m: Match) -> str:
    """The matched words as the recogniser wrote them (folded): what a reviewer reads as the reason."""
    out = ""
    for t in toks[m.first:m.last + 1]:
        out += t.text if t.cjk and (not out or CJK_CHAR.match(out[-1])) else f" {t.text}" if out else t.text
    return out
