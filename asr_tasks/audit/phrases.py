"""Phrases as QA rules match them: on the words the recogniser wrote, in their sentences, with negation in view.

A call's text becomes tokens (an English word, or one Chinese character) that keep
the word as written, its clause (a comma ends one) and sentence (a full stop, a
question mark, a colon), and its segment (for the seconds). A phrase matches a
run of tokens exactly or, when its rule asks, fuzzily: English word by word
(a long word may be spelt a little differently, "garanteed"; a short one must be
the same word, so "close" is never "lose"), Chinese character by character (a
homophone of the phrase's own character counts, 保正 for 保证, in phrases of
four characters or more, and is never an exact match).

Each match says whether it is negated: a negator of its language before it in its
clause (within a few words, not across "and"/"but"; "I cannot guarantee a
return", "我们不能保证收益"), or at the clause's start ("没有哪个产品能保证收益",
"No bank can guarantee..."), or right after it ("保证收益是不可能的", "a guaranteed
return is not something we offer"); and whether its sentence is a question.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from rapidfuzz import fuzz

from asr_tasks.chars import CJK_CHAR, CJK_RANGES
from asr_tasks.text.sounds import toneless

# "can't" is "ca" + "n't", so that "n't" is a token (read "not") of its own
_TOKEN = re.compile(rf"[^\W_{CJK_RANGES}]+?(?=n['’]t\b)|n['’]t\b|[{CJK_RANGES}]|%|[^\W_{CJK_RANGES}]+", re.UNICODE)
SENTENCE_MARKS, CLAUSE_MARKS = ";:!?；：！？。…", ",，、"
_SENTENCE = re.compile(f"[{SENTENCE_MARKS}]|\\.(?!\\d)")  # a full stop only where it is not a decimal point
_CLAUSE = re.compile(f"[{CLAUSE_MARKS}]")
_ENDS_SENTENCE = re.compile(f"([{SENTENCE_MARKS}]|(?<!\\d)\\.)\\s*$")
_ENDS_CLAUSE = re.compile(f"[{CLAUSE_MARKS}]\\s*$")
_QUESTION = re.compile(r"[?？]\s*$|[吗呢么]\s*$")
# spellings without the apostrophe, read as their two words
_RUN_TOGETHER = {w + "nt": (w, "not") for w in ("ca", "do", "does", "did", "wo", "is", "are", "was", "were",
                                                 "should", "would", "could", "have", "has", "had", "must")}
EN_NEGATORS = frozenset({"not", "no", "never", "cannot", "nobody", "nothing", "none", "neither", "nor", "without"})
EN_NOT_NEGATING = frozenset({"worry", "worries", "problem", "only", "doubt", "just"})  # "don't worry", "not only"
EN_BREAKS = frozenset({"and", "but", "or", "so", "because", "while"})  # a negator stops there
EN_AFTER = 3  # words after a phrase that its negation ("is not", "don't exist") may stand in
EN_AUXILIARIES = frozenset({"is", "are", "was", "were", "do", "does", "did", "will", "would", "can", "could", "has",
                            "have", "had", "should", "must", "ca", "wo"})
CLAUSE_NEGATORS = frozenset({"no", "nobody", "none", "never", "neither"})  # at a clause's start: all of it
THERE_IS = frozenset({"there", "s", "is", "are", "was", "were", "ll", "will", "be"})  # "there's no ..." opens so
EN_SCOPE = 4  # words before a phrase that a negator may stand in
ZH_NEGATORS = frozenset("不没无未别非勿莫")
# words that begin with a negator's character and negate nothing
ZH_NOT_NEGATORS = ("不过", "不错", "不仅", "不但", "不断", "不久", "不少", "不好意思", "不管", "不论", "不客气", "不要紧",
                   "不用担心", "别担心", "没问题", "没关系", "没错", "无论", "非常", "别人", "别的", "莫名")
ZH_BREAKS = ("而且", "并且", "但是", "所以", "因为", "和", "但", "可是")
ZH_AFTER = re.compile(r"^(是)?(不可能|不存在|不现实|没有的|是假的|不会有|无法|不能|做不到|不确定|不固定|没有保证|不保证)")
ZH_SCOPE = 4  # characters before a phrase
NEGATED = ("no", "yes", "any")  # a rule's choice: un-negated matches only (the default), negated only, or both
SHORT_WORD = 4  # letters: a word this short matches only as itself, even fuzzily
HOMOPHONE = 0.8  # a character of the same sound, against 1.0 for the character itself
MIN_FUZZY_CHARS = 4  # a Chinese phrase shorter than this matches only exactly


@dataclass(frozen=True)
class Token:
    text: str  # case- and width-folded, simplified script ("n't" read "not")
    raw: str  # as written ("" for the second word of a run-together "cant")
    clause: int
    sentence: int
    segment: int  # index into the call's segments (for the seconds)
    question: bool = False  # its sentence asks

    @property
    def cjk(self) -> bool:
        return CJK_CHAR.match(self.text) is not None


@dataclass(frozen=True)
class Match:
    first: int  # token indices, inclusive
    last: int
    confidence: float  # 1.0 for an exact match
    negated: bool
    question: bool


@lru_cache(maxsize=1)
def _to_simplified() -> Any:
    import opencc

    return opencc.OpenCC("t2s")


@lru_cache(maxsize=65536)
def _fold_word(word: str) -> str:
    word = word.lower()
    if word in ("n't", "n’t"):
        return "not"
    if word == "%":
        return "percent"
    return str(_to_simplified().convert(word)) if CJK_CHAR.match(word) else word


def fold(text: str) -> str:
    """What a phrase is compared as: its tokens' folded words."""
    return " ".join(t.text for t in tokens(text))


def ends(text: str) -> tuple[bool, bool]:
    """Whether a text ends its clause and whether it ends its sentence (a segment that ends neither runs on)."""
    sentence = _ENDS_SENTENCE.search(text) is not None
    return sentence or _ENDS_CLAUSE.search(text) is not None, sentence


def tokens(text: str, segment: int = 0, clause: int = 0, sentence: int = 0) -> list[Token]:
    """A text's tokens, numbering its clauses and sentences from ``clause`` and ``sentence``."""
    out: list[Token] = []
    text = unicodedata.normalize("NFKC", text)
    parts = _SENTENCE.split(text)
    marks = _SENTENCE.findall(text) + [""]
    for s, (part, mark) in enumerate(zip(parts, marks)):
        asked = mark in ("?", "？") or (not mark and _QUESTION.search(part) is not None)
        for piece in _CLAUSE.split(part):
            for raw in _TOKEN.findall(piece):
                words = _RUN_TOGETHER.get(raw.lower(), (_fold_word(raw),))
                out += [Token(w, raw if n == 0 else "", clause, sentence + s, segment, asked)
                        for n, w in enumerate(words)]
            clause += 1
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

    @property
    def cjk(self) -> bool:
        return any(CJK_CHAR.match(w) for w in self.words)


def sound(token: str) -> str:
    """What a token sounds like: a Chinese character's pinyin without its tone (as search reads it); any other
    token itself."""
    return toneless(token) if CJK_CHAR.match(token) else token


def _alike(word: str, target: str) -> float:
    """How alike one token is to the phrase's: 1 for the same; a Chinese character of the same sound HOMOPHONE;
    a long enough English word by its letters; anything else 0."""
    if word == target:
        return 1.0
    if CJK_CHAR.match(target):
        return HOMOPHONE if CJK_CHAR.match(word) and sound(word) == sound(target) else 0.0
    if len(target) <= SHORT_WORD or CJK_CHAR.match(word):
        return 0.0
    return float(fuzz.ratio(word, target)) / 100.0


def similarity(window: list[str], phrase: tuple[str, ...]) -> float:
    """How alike a window of tokens is to a phrase of as many, 0-1: token by token (``_alike``), the mean; 0 where
    any token is unlike its phrase token."""
    scores = [_alike(w, p) for w, p in zip(window, phrase)]
    return 0.0 if len(window) != len(phrase) or min(scores) < 0.5 else sum(scores) / len(scores)


def negated(toks: list[Token], first: int, last: int) -> bool:
    """Whether a negator of its language governs the match ``toks[first..last]`` (see the module's docstring)."""
    clause = toks[first].clause
    before = [t for t in toks[max(0, first - 12):first] if t.clause == clause]
    words = [t.text for t in before if not t.cjk]
    for n, word in enumerate(reversed(words[-EN_SCOPE:])):
        if word in EN_BREAKS:
            break
        following = words[len(words) - n] if n else toks[first].text
        if word in EN_NEGATORS and following not in EN_NOT_NEGATING:
            return True
    start = first
    while start > 0 and toks[start - 1].clause == clause:
        start -= 1
    opening = [t.text for t in toks[start:first]]  # the clause up to the match
    english = [w for w in opening if not CJK_CHAR.match(w)]
    while english[:1] and english[0] in THERE_IS:
        english = english[1:]
    if english[:1] and english[0] in CLAUSE_NEGATORS and english[1:2] != [] and english[1] not in EN_NOT_NEGATING:
        return True  # "No bank can guarantee ...", "There's no bank that can guarantee ..."
    chars = "".join(t.text for t in before if t.cjk)
    for word in ZH_NOT_NEGATORS:
        chars = chars.replace(word, " " * len(word))
    for word in ZH_BREAKS:
        cut = chars.rfind(word)
        if cut >= 0:
            chars = chars[cut + len(word):]
    if any(c in ZH_NEGATORS for c in chars[-ZH_SCOPE:]):
        return True
    leading = "".join(w for w in opening if CJK_CHAR.match(w))
    for word in ZH_NOT_NEGATORS:
        leading = leading.replace(word, " " * len(word))
    if leading[:1] in ("没", "无") and not any(b in leading for b in ZH_BREAKS):
        return True  # "没有哪个产品能保证收益"
    after = [t for t in toks[last + 1:last + 1 + EN_AFTER + 3] if t.clause == clause]
    after_words = [t.text for t in after if not t.cjk][:EN_AFTER]
    if after_words[:1] in (["not"], ["never"]) or (
            len(after_words) > 1 and after_words[0] in EN_AUXILIARIES and after_words[1] in ("not", "never")):
        return True  # "a guaranteed return is not ...", "guaranteed returns don't exist"
    return ZH_AFTER.match("".join(t.text for t in after if t.cjk)) is not None


def find(toks: list[Token], phrase: Phrase, fuzzy: float | None = None) -> list[Match]:
    """Where ``phrase`` is said in ``toks``, within one clause: exact runs, or with ``fuzzy`` (0-1) also runs of as
    many tokens whose similarity reaches it, non-overlapping, best first."""
    n = len(phrase.words)
    words = [t.text for t in toks]
    found: list[Match] = []

    def match(i: int, confidence: float) -> Match:
        last = i + n - 1
        return Match(i, last, round(confidence, 3), negated(toks, i, last), toks[last].question)

    for i in range(len(toks) - n + 1):
        if tuple(words[i:i + n]) == phrase.words and toks[i].clause == toks[i + n - 1].clause:
            found.append(match(i, 1.0))
    if fuzzy is None or (phrase.cjk and n < MIN_FUZZY_CHARS):
        return found
    taken = {k for m in found for k in range(m.first, m.last + 1)}
    candidates = []
    for i in range(len(toks) - n + 1):
        if i in taken or toks[i + n - 1].clause != toks[i].clause:
            continue
        score = similarity(words[i:i + n], phrase.words)
        if fuzzy <= score < 1.0:
            candidates.append(match(i, score))
    for m in sorted(candidates, key=lambda m: (-m.confidence, m.first)):
        span = set(range(m.first, m.last + 1))
        if not span & taken:
            found.append(m)
            taken |= span
    return sorted(found, key=lambda m: m.first)


def written(toks: list[Token], m: Match) -> str:
    """The matched words as the recogniser wrote them: what a reviewer reads as the reason."""
    out = ""
    for t in toks[m.first:m.last + 1]:
        if not t.raw:
            continue
        glued = t.cjk and (not out or CJK_CHAR.match(out[-1])) or t.raw.lower() in ("n't", "n’t")
        out += t.raw if glued or not out else f" {t.raw}"
    return out
