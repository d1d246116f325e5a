"""Personal data in transcripts: found after ITN, masked before anything is stored, indexed or reported.

The policy (kinds, patterns, checks, context words, prompts, masks) is
``include/pii/*.yaml`` (``pii_policy``). Two ways find a value. By its pattern, in
a reading (``spoken``) of each speaker's turn (``turns``), so a number said in two
goes, in words, or with the model's punctuation between its groups is one number.
By context, where someone asked for a kind ("what's the card number?"): the
digit-like speech said after it is that kind even where the model misheard digits.
A card that passes its check keeps its last four digits (``[CARD ****1111]``),
the rest become their kind's label. What was found is kept as a detection (kind, how it was found,
speaker, seconds, the masked value only), so the QA audit can still report that a
card number was read out. A segment that held personal data keeps no raw model
text (``text_raw``), and the words that said the value become one word holding the
mask: both would hold the data unmasked. The words' times give each part of a
detection its seconds, so the redacted audio silences the value, not the whole
segment, where the engine gave word times.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from difflib import SequenceMatcher

from asr_tasks.chars import CJK_CHAR
from asr_tasks.models import Segment, SpokenWord, Transcript
from asr_tasks.text.pii_policy import Kind, Policy, digits
from asr_tasks.text.spoken import Reading, read
from asr_tasks.text.turns import Answer, Piece, answers, turns

ANCHOR_CHARS = 3  # shortest run of characters shared by the text and the model's words that aligns them
ANCHOR_CJK_CHARS = 2  # the same for a run of Chinese characters, each of which is a word
BRIDGE_WORDS = 4  # other words an answer's digits may have between them ("4 1 1 I'm on 5 2 …")
SUBSPAN_DIGITS = 24  # the longest part of a number in groups that is tried as a value of its own
SUBSPAN_GROUPS = 64  # and the most groups a number has for its parts to be tried
ALIGN_CHARS = 4000  # a segment's text longer than this (a recogniser's loop) masks every word of the value's span
UNHEARD_SECONDS = 0.3  # the shortest stretch of speech (the VAD's) without words in an answer that is silenced
DIGIT_SECONDS = 0.3  # and as long as the kind's answer_digits take to say: a dropped "mm" is no card number
WORD = re.compile(rf"\d+|[A-Za-z\u00c0-\u024f']+|{CJK_CHAR.pattern}")  # a digit group, a word, a Chinese character


@dataclass(frozen=True)
class Detection:
    """One value found: its kind, how (pattern or context), who said it and when, and the mask that replaced it.

    ``parts`` are the seconds of each piece of speech that said it (a number said in two
    goes has two); ``start`` and ``end`` span them all.
    """

    kind: str
    channel: int
    speaker: str
    start: float
    end: float
    masked: str
    by: str = "pattern"
    parts: list[list[float]] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


@dataclass
class _Found:
    kind: str
    by: str
    mask: str
    pieces: list[Piece]  # what said it, in the segments' texts
    whole: frozenset[int] = frozenset()  # segments silenced whole (an answer's words may be as wrong as its digits)
    parts: list[list[float]] = field(default_factory=list)  # speech without words: its seconds
    who: tuple[int, str] = (0, "")  # and its (channel, speaker)


def _candidates(kind: Kind, reading: Reading) -> list[tuple[int, int]]:
    """Where the kind's pattern matches, longest first: its matches, and for a kind with a check each run of whole
    groups of a number in groups (so the card inside "300. 4111 1111 1111 1111" is found although the run as a
    whole fails the check; a kind without one would find a phone number in any long enough misheard card)."""
    pattern = kind.compiled
    spans = {m.span() for m in pattern.finditer(reading.text) if m.start() < m.end()}
    for groups in reading.groups(SUBSPAN_GROUPS) if kind.checks_or_context else ():
        for i, (a, _) in enumerate(groups):
            said = 0
            for start, b in groups[i:]:
                said += b - start
                if said > SUBSPAN_DIGITS:
                    break
                if pattern.fullmatch(reading.text, a, b):
                    spans.add((a, b))
    return sorted(spans, key=lambda s: (s[0] - s[1], s[0]))


def _find(reading: Reading, policy: Policy, language: str | None) -> list[tuple[int, int, str, str]]:
    """Every kind's values that count, the longest first (a kind earlier in the policy first among equals),
    none overlapping: a number is masked whole, as the kind that reads most of it."""
    counted = []
    for order, (name, kind) in enumerate(policy.kinds.items()):
        for start, end in _candidates(kind, reading):
            value, before = reading.text[start:end], reading.text[max(0, start - policy.context_chars) : start]
            if kind.counts(value, before, language):
                counted.append((start - end, order, start, end, name, value))
    found: list[tuple[int, int, str, str]] = []
    for _, _, start, end, name, value in sorted(counted):
        if not any(start < b and a < end for a, b, _, _ in found):
            kind = policy.kinds[name]
            mask = kind.mask.format(last4=digits(value)[-4:] if kind.checked(value) else "")
            found.append((start, end, policy.reported_as(name), mask))
    return sorted(found)


def find(text: str, policy: Policy, language: str | None = None) -> list[tuple[int, int, str, str]]:
    """(start, end, kind, mask) of every value in ``text`` found by its pattern, without overlaps, in order."""
    reading = read(text, policy.spoken)
    return [(*reading.source(a, b), kind, mask) for a, b, kind, mask in _find(reading, policy, language)]


def mask_text(text: str, policy: Policy, language: str | None = None) -> str:
    """Plain text (a search query, a form field) with every value the policy finds replaced by its mask."""
    for start, end, _, mask in reversed(find(text, policy, language)):
        text = text[:start] + mask + text[end:]
    return text


def _stretches(reading: Reading, policy: Policy) -> list[tuple[int, int, str]]:
    """Digit-like speech: digits, and words the model writes for misheard digits, with at most ``BRIDGE_WORDS``
    other words between two of them; (start, end, what was heard: digits, ``*`` for a misheard one) of each."""
    misheard = policy.spoken.misheard
    out: list[tuple[int, int, str]] = []
    start = end = between = 0
    heard = ""
    for m in WORD.finditer(reading.text):
        word = m.group()
        if word.isdigit() or word.lower() in misheard:
            if not heard:
                start = m.start()
            heard += word if word.isdigit() else "*"
            end, between = m.end(), 0
        elif heard and between < BRIDGE_WORDS:
            between += 1
        elif heard:
            out.append((start, end, heard))
            heard, between = "", 0
    if heard:
        out.append((start, end, heard))
    return out


def _claim(found: list[_Found], pieces: list[Piece], segments: list[Segment]) -> list[Piece]:
    """``pieces`` where nothing found already masks them; where something does, only the parts left that hold a
    digit (what a pattern found is the value; a misheard word beside it is not one of its own)."""
    out, cut = [], False
    for n, lo, hi in pieces:
        spans = [(lo, hi)]
        for f in found:
            for m, a, b in f.pieces:
                if m == n and a < hi and lo < b:
                    spans = [s for x, y in spans for s in ((x, min(y, a)), (max(x, b), y)) if s[0] < s[1]]
                    cut = True
        out += [(n, a, b) for a, b in spans if WORD.search(segments[n].text[a:b])]
    return [p for p in out if re.search(r"\d", segments[p[0]].text[p[1] : p[2]])] if cut else out
def _by_pattern(segments: list[Segment], policy: Policy, language: str | None) -> list[_Found]:
    found = []
    for passage in turns(segments, policy):
        reading = read(passage.text, policy.spoken)
        first = segments[passage.pieces[0][0]]
        for start, end, kind, mask in _find(reading, policy, first.language or language):
            found.append(_Found(kind, "pattern", mask, passage.locate(*reading.source(start, end))))
    return found


def _by_context(transcript: Transcript, segments: list[Segment], policy: Policy,
                found: list[_Found]) -> list[_Found]:
    """An answer to a prompt that says digits (``answer_digits`` or more, a third of them heard as digits at least):
    all its digit-like speech where patterns did not find it already, as the prompt's kind or the kind the
    speaker named just before it (``Policy.named_before``); and any speech in the answer that the model made no
    words of (``_unheard``)."""
    out: list[_Found] = []
    for answer in answers(segments, policy):
        kind = policy.kinds[answer.kind]
        for passage in answer.passages:
            reading = read(passage.text, policy.spoken)
            stretches = _stretches(reading, policy)
            heard = "".join(h for *_, h in stretches)
            if len(heard) < kind.answer_digits or 3 * len(heard.replace("*", "")) < len(heard):
                continue  # not an answer that says the kind's digits
            named: dict[str, list[Piece]] = {}
            language = segments[passage.pieces[0][0]].language or transcript.language
            for a, b, _ in stretches:
                before = reading.text[max(0, a - policy.context_chars) : a]
                said_as = policy.named_before(answer.kind, before, language)
                named.setdefault(said_as, []).extend(
                    _claim(found + out, passage.locate(*reading.source(a, b)), segments))
            for name, pieces in named.items():
                if pieces:
                    mask = policy.kinds[name].mask.format(last4="")  # what was heard last may be a code said after
                    whole = frozenset(n for n, _, _ in pieces if n != answer.segment)
                    out.append(_Found(policy.reported_as(name), "context", mask, pieces, whole))
        out += _unheard(answer, transcript, segments, policy)
    return out


def _unheard(answer: Answer, transcript: Transcript, segments: list[Segment], policy: Policy) -> list[_Found]:
    """Speech in an answer (the VAD's, per speaker) that segments of the answer mostly do not cover: the model
    dropped it, or wrote it into a segment it began before the prompt, so nobody can say it was not the number
    asked for; silenced as the prompt's kind, where it is long enough to say the kind's ``answer_digits``."""
    speech = (transcript.analytics or {}).get("speech") or {}
    out = []
    for speaker, spans in speech.items():
        said = [(s.start, s.end) for s in segments if s.speaker == speaker and s.text.strip()
                and s.start >= answer.start]
        left: list[tuple[float, float]] = []
        least = max(UNHEARD_SECONDS, policy.kinds[answer.kind].answer_digits * DIGIT_SECONDS)
        for a, b in spans:
            a, b = max(a, answer.asked), min(b, answer.until)
            covered = sum(max(0.0, min(b, y) - max(a, x)) for x, y in said)
            if b - a >= least and covered < (b - a) / 2:  # long enough to say the digits, mostly not in words
                left.append((a, b))
        if left:
            channel = next((s.channel for s in segments if s.speaker == speaker), answer.asker[0])
            mask = policy.kinds[answer.kind].mask.format(last4="")
            out.append(_Found(policy.reported_as(answer.kind), "context", mask, [], frozenset(),
                              [[round(a, 3), round(b, 3)] for a, b in left], (channel, speaker)))
    return out


def redact(transcript: Transcript, policy: Policy) -> tuple[Transcript, list[Detection]]:
    """The transcript with every value masked in ``text`` and in the words of each segment that said part of it,
    and what was found.

    Each part of a detection found by its pattern has the seconds of the words that
    said it, where the segment has word times, else the whole segment's; one found
    by context has the seconds of each segment of the answer that said it (of its
    words, in the prompt's own segment). A segment that held a value
    keeps no ``text_raw``; its words that said the value become one word holding the mask.
    """
    segments = list(transcript.segments)
    found = _by_pattern(segments, policy, transcript.language)
    found += _by_context(transcript, segments, policy, found)
    edits: dict[int, list[tuple[int, int, str]]] = {}
    word_edits: dict[int, list[tuple[int, int, str]]] = {}
    detections = []
    for f in found:
        parts = list(f.parts)
        for n, lo, hi in f.pieces:
            seg = segments[n]
            edits.setdefault(n, []).append((lo, hi, f.mask))
            said = _widened(seg.words, _word_range(seg.text, seg.words, lo, hi), policy)
            word_edits.setdefault(n, []).append((*(said or (0, len(seg.words) - 1)), f.mask))
            if said and n not in f.whole:
                parts.append([seg.words[said[0]].start, seg.words[said[1]].end])
            elif [seg.start, seg.end] not in parts:
                parts.append([seg.start, seg.end])
        channel, speaker = (segments[f.pieces[0][0]].channel, segments[f.pieces[0][0]].speaker) if f.pieces else f.who
        detections.append(Detection(f.kind, channel, speaker, min(p[0] for p in parts),
                                    max(p[1] for p in parts), f.mask, f.by, parts))
    for n, changes in edits.items():
        text = segments[n].text
        for lo, hi, replacement in sorted(changes, reverse=True):
            text = text[:lo] + replacement + text[hi:]
        segments[n] = dataclasses.replace(segments[n], text=re.sub(r"\s{2,}", " ", text).strip(), text_raw=None,
                                          words=_mask_words(segments[n].words, word_edits[n]))
    detections.sort(key=lambda d: (d.start, d.channel))
    return dataclasses.replace(transcript, segments=[s for s in segments if s.text]), detections


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
    if len(text) > ALIGN_CHARS:
        return 0, len(words) - 1
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


def _says_digits(word: str, policy: Policy) -> bool:
    spoken, bare = policy.spoken, word.strip(" ,.;:!?，。、；：！？-").lower()
    return bool(bare) and (bare.isdigit() or bare in spoken.digit_words or bare in spoken.repeat_words
                           or bare in spoken.plus_words or all(ch in spoken.digit_words or ch.isdigit() for ch in bare))


def _widened(words: list[SpokenWord], said: tuple[int, int] | None, policy: Policy) -> tuple[int, int] | None:
    """``said`` and the words next to it that say digits too: where the text and the model's words align
    uncertainly ("oh 240 8 oh two" against "five oh two four zero eight oh two"), the number's words all go."""
    if said is None:
        return None
    def digit_at(k: int, step: int) -> int | None:  # the word at k, or past punctuation, that says digits
        while 0 <= k < len(words) and not words[k].text.strip(" ,.;:，。、；：-"):
            k += step
        return k if 0 <= k < len(words) and _says_digits(words[k].text, policy) else None

    first, last = said
    while (k := digit_at(first - 1, -1)) is not None:
        first = k
    while (k := digit_at(last + 1, 1)) is not None:
        last = k
    return first, last


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
