"""What a transcript's words sound like, so that a search finds what was said where the model wrote it wrong.

A recogniser errs towards words that sound alike: on Mandarin a character of the
same or nearly the same pinyin (汇报 written 会报), on a telephone line an English
word with a sound blurred (``safe`` written ``faith``), a letter or two off
(``training``, ``trading``), or one word heard as two (``afternoon``, ``after
noon``). Every token of a text (an English word, or one Chinese character) gets
three forms, one per position, so that a phrase stays a phrase in each:

- ``tokens``: the word as written, lowercased;
- ``sounds``: a Chinese character's pinyin without its tone, with the usual
  blurs folded (zh/z, ch/c, sh/s, n/l, -ng/-n); an English word's consonant
  classes and the first vowel of each run of vowels (s/f/th/v/z are one class,
  as a telephone line blurs them: ``safe`` and ``faith`` are both ``faf``,
  ``free`` and ``three`` both ``fr``); a short or function word (``the``,
  ``this``) is its own sound (marked, so ``for`` is not ``four``), too common
  to be told by its sound alone;
- ``tones``: a Chinese character's pinyin with its tone (汇 and 会 are both
  ``hui4``); an English word's sound.

A tolerant term (``~word`` in a query, or every term of a sounds-like search)
matches its exact phrase, or its phrase of tones or of sounds (not a lone Chinese
character's: too many sound like it), or a phrase whose
words are each within ``budget`` edits of its own, where a word may also be heard
split in two and two words as one (``readings``). Both index backends are filled
with ``forms`` and render ``Tolerant`` into their own queries; ``spans`` finds the
same matches in a hit's text, to mark them and to say how each matched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterator

from rapidfuzz.distance import OSA

from asr_tasks.chars import CJK_CHAR, CJK_RANGES

FORM_FIELDS = ("tokens", "sounds", "tones")  # the forms each backend stores beside a segment's text
_TOKEN = re.compile(f"[{CJK_RANGES}]|[^\\W_{CJK_RANGES}]+")
_LETTERS = re.compile(r"[a-z]+")
MIN_SPLIT = 2  # letters of each part of a word heard as two
MAX_MERGED_WORDS = 6  # a phrase longer than this is not read with two of its words heard as one

# English spellings of one sound, longest first; then letters to their consonant class.
_DIGRAPHS = (("tch", "j"), ("sch", "sk"), ("ph", "f"), ("th", "f"), ("sh", "j"), ("ch", "j"), ("ck", "k"),
             ("gh", ""), ("wh", "w"), ("qu", "kw"), ("x", "ks"), ("dg", "j"))
_SILENT_START = (("kn", "n"), ("wr", "r"), ("gn", "n"), ("ps", "s"))
_CLASS = {**dict.fromkeys("bp", "p"), **dict.fromkeys("fvsz", "f"), **dict.fromkeys("kqg", "k"),
          **dict.fromkeys("dt", "t"), **dict.fromkeys("mn", "n"), "l": "l", "r": "r", "j": "j"}
_VOWELS = frozenset("aeiouy")
# Too short or too common to be told by their sound: each is its own sound ("the" would otherwise sound like
# "sue", "this" like "visa"), so a tolerant search of a word never finds every call through these.
OWN_SOUND_LETTERS = 3
OWN_SOUND = "0"  # ends such a word's sound: no sound of letters has a digit, no pinyin tone is 0
FUNCTION_WORDS = frozenset({  # of four letters or more
    "about", "above", "after", "again", "against", "also", "because", "been", "before", "being", "below", "between",
    "both", "cannot", "could", "does", "doing", "down", "during", "each", "from", "further", "have", "having",
    "here", "hers", "herself", "himself", "into", "itself", "just", "more", "most", "myself", "once", "only",
    "other", "ought", "ours", "ourselves", "over", "same", "shall", "should", "some", "such", "than", "that",
    "their", "theirs", "them", "themselves", "then", "there", "these", "they", "this", "those", "through", "under",
    "until", "very", "were", "what", "when", "where", "which", "while", "whom", "will", "with", "would", "your",
    "yours", "yourself", "yourselves"
})
_SOFT = frozenset("eiy")  # c and g before these are soft


@dataclass(frozen=True)
class Token:
    """One token of a text: its forms and where it stands in the text (characters ``start:end``)."""

    word: str
    sound: str
    tone: str
    start: int
    end: int

    @property
    def cjk(self) -> bool:
        return bool(CJK_CHAR.match(self.word))


@lru_cache(maxsize=65536)
def english_sound(word: str) -> str:
    """An English word's sound: consonant classes, a run of vowels its first vowel, a final vowel silent; a word
    with digits or other letters, of up to ``OWN_SOUND_LETTERS`` letters or a function word is its own sound."""
    if not word.isascii() or not _LETTERS.fullmatch(word):
        return word
    if len(word) <= OWN_SOUND_LETTERS or word in FUNCTION_WORDS:
        return word + OWN_SOUND  # marked: "for" is not the sound of "four" (f-o-r)
    for start, sound in _SILENT_START:
        if word.startswith(start) and len(word) > len(start):
            word = sound + word[len(start):]
    for digraph, sound in _DIGRAPHS:
        word = word.replace(digraph, sound)
    spelled = ""
    for n, ch in enumerate(word):  # c and g by the letter after them: "face" is f-a-s, "page" p-a-j
        soft = word[n + 1:n + 2] in _SOFT
        spelled += ("s" if soft else "k") if ch == "c" else ("j" if soft and n else ch) if ch == "g" else ch
    out, vowel = "", False
    for ch in spelled:
        if ch in _VOWELS:  # a run of vowels is its first one: "ai" in "faith" is the "a" of "safe"
            if not vowel:
                out += "i" if ch == "y" else ch
            vowel = True
            continue
        vowel = False
        mark = _CLASS.get(ch, "")
        if mark and not out.endswith(mark):
            out += mark
    stripped = out.rstrip("aeiou")
    return stripped or out or word


def fold(syllable: str) -> str:
    """A toneless pinyin syllable with the blurs of Mandarin as people speak it folded: zh/z, ch/c, sh/s, n/l,
    -ng/-n."""
    for retroflex in ("zh", "ch", "sh"):
        if syllable.startswith(retroflex):
            syllable = syllable[0] + syllable[2:]
    if syllable.startswith("n") and len(syllable) > 1:
        syllable = "l" + syllable[1:]
    return syllable[:-1] if syllable.endswith("ng") and len(syllable) > 2 else syllable


@lru_cache(maxsize=16384)
def _run_tones(run: str) -> tuple[str, ...]:
    """A run of CJK characters' pinyin with tones (neutral 5), read in context (多音字 by their phrase); a
    character without pinyin (kana, Hangul) is itself."""
    from pypinyin import Style, lazy_pinyin

    read = lazy_pinyin(run, style=Style.TONE3, neutral_tone_with_five=True)
    if len(read) == len(run):
        return tuple(str(s) if s.isascii() else ch for s, ch in zip(read, run))
    return tuple(_run_tones(ch)[0] for ch in run) if len(run) > 1 else (run,)


def toneless(char: str) -> str:
    """A Chinese character's pinyin without its tone, not folded (itself where it has none)."""
    return _run_tones(char)[0].rstrip("012345") or char


def tokens(text: str) -> list[Token]:
    """The text's tokens with their forms, in order."""
    found = [(m.group().lower(), m.start(), m.end()) for m in _TOKEN.finditer(text)]
    out: list[Token] = []
    n = 0
    while n < len(found):
        word, start, end = found[n]
        if not CJK_CHAR.match(word):
            sound = english_sound(word)
            out.append(Token(word, sound, sound, start, end))
            n += 1
            continue
        last = n
        while last + 1 < len(found) and CJK_CHAR.match(found[last + 1][0]) and found[last + 1][1] == found[last][2]:
            last += 1
        run = found[n:last + 1]
        for (char, s, e), tone in zip(run, _run_tones("".join(w for w, _, _ in run))):
            toneless = tone.rstrip("012345")
            out.append(Token(char, fold(toneless) if toneless.isascii() and toneless else char, tone, s, e))
        n = last + 1
    return out


def forms(text: str) -> dict[str, str]:
    """The text's three forms, each its tokens joined by spaces: what both backends index beside the text."""
    toks = tokens(text)
    return {"tokens": " ".join(t.word for t in toks), "sounds": " ".join(t.sound for t in toks),
            "tones": " ".join(t.tone for t in toks)}


def budget(word: str, in_phrase: bool) -> int:
    """Edits a word may be off and still match: none for one or two letters, a Chinese character or anything with
    digits; one up to five letters (two for four or five inside a phrase, whose other words hold it in place);
    two beyond (Elasticsearch's AUTO fuzziness), the second only with the word's first letter kept
    (``within``). The same on both backends."""
    if len(word) <= 2 or CJK_CHAR.match(word) or not word.isalpha():
        return 0
    if len(word) <= 5:
        return 2 if in_phrase and len(word) >= 4 else 1
    return 2


@dataclass(frozen=True)
class Slot:
    """One word of a reading: it matches a token within ``budget`` edits, or two tokens that are its ``splits``."""

    word: str
    budget: int
    splits: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Tolerant:
    """A term as a tolerant search matches it (see the module's docstring)."""

    words: tuple[str, ...]
    sounds: tuple[str, ...]
    tones: tuple[str, ...]
    readings: tuple[tuple[Slot, ...], ...]

    @classmethod
    def of(cls, text: str) -> Tolerant | None:
        """The term's forms and readings; None for a term with no token."""
        toks = tokens(text)
        if not toks:
            return None
        words = tuple(t.word for t in toks)
        phrase = len(words) > 1
        if not phrase and toks[0].cjk:  # one character sounds like too many others: it matches as written
            return cls(words, (), (), ((_slot(words[0], False),),))
        readings = [tuple(_slot(w, phrase) for w in words)]
        if len(words) <= MAX_MERGED_WORDS:
            for n in range(len(words) - 1):
                if words[n].isalpha() and words[n + 1].isalpha() and not (toks[n].cjk or toks[n + 1].cjk):
                    readings.append((*readings[0][:n], _merged(words[n], words[n + 1]), *readings[0][n + 2:]))
        return cls(words, tuple(t.sound for t in toks), tuple(t.tone for t in toks), tuple(readings))


def _slot(word: str, in_phrase: bool) -> Slot:
    splits = tuple((word[:n], word[n:]) for n in range(MIN_SPLIT, len(word) - MIN_SPLIT + 1)) \
        if word.isascii() and word.isalpha() and len(word) >= 2 * MIN_SPLIT + 1 else ()
    return Slot(word, budget(word, in_phrase), splits)


def _merged(first: str, second: str) -> Slot:
    """Two words of a term heard as one: fewer edits than the shorter has letters, so that the one written word
    is never simply the other word with the shorter dropped ("refund it" does not match "refund")."""
    slot = _slot(first + second, True)
    return Slot(slot.word, min(slot.budget, min(len(first), len(second)) - 1), slot.splits)


def within(word: str, slot: Slot, edits: int) -> bool:
    """Whether ``edits`` (a written word's distance from the slot's) is within the slot's budget: a second edit
    only where the word keeps the slot's first letter (so "risk" may be heard "is" only as one edit could)."""
    return edits <= min(slot.budget, 1) or (edits <= slot.budget and word[:1] == slot.word[:1])


def alike(word: str, slot: Slot) -> bool:
    """Whether a written word is the slot's within its budget (transpositions count as one edit)."""
    return word == slot.word or (slot.budget > 0 and within(
        word, slot, OSA.distance(word, slot.word, score_cutoff=slot.budget)))


def _reading_ends(toks: list[Token], at: int, slots: tuple[Slot, ...]) -> Iterator[int]:
    """Where a reading that starts at token ``at`` ends (the token after its last), every way it can."""
    if not slots:
        yield at
        return
    slot, rest = slots[0], slots[1:]
    if at < len(toks) and alike(toks[at].word, slot):
        yield from _reading_ends(toks, at + 1, rest)
    if at + 1 < len(toks) and (toks[at].word, toks[at + 1].word) in slot.splits:
        yield from _reading_ends(toks, at + 2, rest)


MATCH_KINDS = ("exact", "sound", "fuzzy")  # how a hit matched, surest first


@dataclass(frozen=True)
class Span:
    """Where a tolerant term matched in a text (characters ``start:end``), and how."""

    start: int
    end: int
    kind: str


def spans(text: str, term: Tolerant) -> list[Span]:
    """Every place the term matches the text, each by the surest way it does (``MATCH_KINDS``)."""
    toks = tokens(text)
    size = len(term.words)
    found: list[Span] = []
    for at in range(len(toks)):
        window = toks[at:at + size]
        kind, end = "", at
        if len(window) == size:
            if tuple(t.word for t in window) == term.words:
                kind, end = "exact", at + size
            elif term.sounds and (tuple(t.tone for t in window) == term.tones
                                  or tuple(t.sound for t in window) == term.sounds):
                kind, end = "sound", at + size
        if not kind:
            ends = [e for reading in term.readings for e in _reading_ends(toks, at, reading)]
            if ends:
                kind, end = "fuzzy", max(ends)
        if kind:
            found.append(Span(toks[at].start, toks[end - 1].end, kind))
    return found
