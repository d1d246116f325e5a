"""Packing short speech chunks into Whisper's 30 s windows, and splitting the words back.

Whisper pads every input to 30 s, so a 4 s call costs as much encoder work as a
30 s one. Chunks of different recordings (of the same language) are laid out one
after another in a window with a short silence between them; the decoder reads
the window as one utterance, word timings from cross-attention alignment put each
word back into the chunk it was said in, and no word can land in a recording it
did not come from: every word belongs to exactly one slot of its window.

Every chunk must come out with words: a chunk that got none from its shared
window (Whisper skips a short utterance after a gap, or runs out of budget) is
decoded again alone, and only then may it end empty. ``PackingStats`` counts how
often that happens.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import re
import zlib
from abc import abstractmethod
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from asr_tasks.config import AsrSettings
from asr_tasks.models import SAMPLE_RATE, AudioChunk, Segment, SpokenWord
from asr_tasks.transcription.engine import AsrEngine

log = logging.getLogger(__name__)

WINDOW_SECONDS = 30.0
MAX_TOKENS = 448  # Whisper's decoder positions
TOKEN_MARGIN = 8
COMPRESSION_RATIO_LIMIT = 2.4
# Room left at the end of a window so the last word is not cut by the 30 s edge.
WINDOW_CAPACITY = 29.0
# A silence this long before a word that is not lower case ends a segment, punctuation
# or not: a chunk can hold several turns of one channel, and Whisper often leaves them unpunctuated.
PAUSE_SECONDS = 1.0
# Longest plausible word, as a multiple of the window's median word (at least 1 s).
LONG_WORD_FACTOR = 3.0
_SENTENCE_END = re.compile(r"[.!?。！？]$")


@dataclass(frozen=True)
class Slot:
    """Where one input chunk sits inside a window (seconds from the window start)."""

    item: int
    offset: float
    duration: float

    @property
    def end(self) -> float:
        return self.offset + self.duration


def tokens_per_second(settings: AsrSettings, language: str | None) -> float:
    """The decoding budget's rate for a language; for an unknown one, the most any configured language gets."""
    rates = {k: float(v) for k, v in settings.language_tokens_per_second.items()}
    if language is None:
        return max([settings.max_tokens_per_second, *rates.values()])
    return rates.get(language, settings.max_tokens_per_second)


def token_budget(settings: AsrSettings, speech_seconds: float, language: str | None) -> int:
    """Tokens that speech of this length may take: enough for fast speech, short for a repetition loop."""
    return math.ceil(tokens_per_second(settings, language) * speech_seconds) + TOKEN_MARGIN


@dataclass
class PackingStats:
    """What packing did over an engine's life: the fallbacks are the price of keeping every chunk's words."""

    chunks: int = 0  # chunks transcribed
    windows: int = 0  # windows of the first pass
    shared: int = 0  # chunks that shared their first window with others
    degenerate_redone: int = 0  # decoded again alone: their shared window looked like a loop or ran out of tokens
    empty_redone: int = 0  # decoded again alone: no words from their shared window
    empty_after_redo: int = 0  # of those, still without words when decoded alone

    @property
    def fallback_rate(self) -> float:
        """Shared chunks that had to be decoded again alone, of all shared chunks."""
        return (self.degenerate_redone + self.empty_redone) / self.shared if self.shared else 0.0

    def since(self, earlier: PackingStats) -> PackingStats:
        """What happened after ``earlier`` (a copy taken before)."""
        return PackingStats(**{f.name: getattr(self, f.name) - getattr(earlier, f.name)
                               for f in dataclasses.fields(self)})

    def as_dict(self) -> dict[str, float]:
        return {**dataclasses.asdict(self), "fallback_rate": round(self.fallback_rate, 4)}


@dataclass
class Window:
    """Up to 30 s of audio made of one or more chunks of the same language."""

    group: Hashable
    slots: list[Slot] = field(default_factory=list)

    @property
    def end(self) -> float:
        return self.slots[-1].end if self.slots else 0.0

    @property
    def speech_seconds(self) -> float:
        return sum(s.duration for s in self.slots)


@dataclass(frozen=True)
class Word:
    """One decoded word with its times inside its window and its probability."""

    text: str
    start: float
    end: float
    probability: float


def pack(durations: Sequence[float], groups: Sequence[Hashable], gap: float,
         capacity: float = WINDOW_CAPACITY) -> list[Window]:
    """First-fit decreasing: fewest windows, and chunks only share a window with their own group.

    A chunk longer than the capacity gets a window of its own. Windows come out
    sorted by length, longest first, so a batch of windows has similar lengths and
    an out-of-memory error shows up on the first batch.
    """
    windows: list[Window] = []
    for item in sorted(range(len(durations)), key=lambda i: (-durations[i], i)):
        duration = durations[item]
        for window in windows:
            if window.group == groups[item] and window.end + gap + duration <= capacity:
                window.slots.append(Slot(item, window.end + gap, duration))
                break
        else:
            windows.append(Window(groups[item], [Slot(item, 0.0, duration)]))
    return sorted(windows, key=lambda w: (-w.end, w.slots[0].item))


def singles(items: Iterable[int], durations: Sequence[float], groups: Sequence[Hashable]) -> list[Window]:
    """One window for each of ``items``: the unpacked layout (longest first)."""
    order = sorted(items, key=lambda i: (-durations[i], i))
    return [Window(groups[i], [Slot(i, 0.0, durations[i])]) for i in order]


def window_audio(window: Window, audios: Sequence[np.ndarray], sample_rate: int) -> np.ndarray:
    """The window's samples: each chunk at its offset, digital silence in between."""
    total = max(int(round(window.end * sample_rate)), 1)
    out = np.zeros(total, dtype=np.float32)
    for slot in window.slots:
        audio = np.asarray(audios[slot.item], dtype=np.float32)
        start = int(round(slot.offset * sample_rate))
        piece = audio[: max(0, total - start)]
        out[start : start + len(piece)] = piece
    return out


def assign_words(window: Window, words: Sequence[Word]) -> dict[int, list[Word]]:
    """Each word goes to the slot holding its midpoint, or to the nearest slot when it fell in a gap."""
    out: dict[int, list[Word]] = {slot.item: [] for slot in window.slots}
    for word in words:
        mid = (word.start + word.end) / 2
        slot = min(window.slots, key=lambda s: max(s.offset - mid, mid - s.end, 0.0))
        out[slot.item].append(word)
    return out


def tighten(words: Sequence[Word]) -> list[Word]:
    """Undo the alignment's habit of handing a silence to the word next to it.

    Cross-attention alignment gives every frame to some word, so the first word
    after a pause often starts seconds early (and a sentence's last word may end
    seconds late). A word far longer than the window's median word is cut back to
    the plausible length: at its end when it closes a sentence, at its start otherwise.
    Numbers are left alone: "4111" written as one word is four words said.
    """
    lengths = [w.end - w.start for w in words if w.end > w.start]
    if not lengths:
        return list(words)
    limit = max(1.0, LONG_WORD_FACTOR * float(np.median(lengths)))
    out = []
    for word in words:
        if word.end - word.start > limit and not any(c.isdigit() for c in word.text):
            if _SENTENCE_END.search(word.text.strip()):
                word = Word(word.text, word.start, word.start + limit, word.probability)
            else:
                word = Word(word.text, word.end - limit, word.end, word.probability)
        out.append(word)
    return out


def words_to_segments(chunk: AudioChunk, slot: Slot, words: Sequence[Word], language: str | None,
                      no_speech_prob: float) -> list[Segment]:
    """Sentences of one chunk's words, on the recording's clock and inside the chunk's bounds.

    A segment ends at sentence punctuation or at a pause of ``PAUSE_SECONDS``, and
    keeps its words with their times.

    avg_logprob is the mean log probability of the sentence's words, so each
    recording in a shared window gets a confidence of its own words only.
    """
    segments: list[Segment] = []
    sentence: list[Word] = []
    for n, word in enumerate(words):
        sentence.append(word)
        if n == len(words) - 1 or _SENTENCE_END.search(word.text.strip()) or _pause_before(words[n + 1], word):
            text = "".join(w.text for w in sentence).strip()
            if text:
                start = _clock(chunk, slot, sentence[0].start)
                end = max(start, _clock(chunk, slot, sentence[-1].end))
                logprob = float(np.mean([np.log(max(w.probability, 1e-6)) for w in sentence]))
                timed = [SpokenWord(w.text, round(_clock(chunk, slot, w.start), 3),
                                    round(max(_clock(chunk, slot, w.start), _clock(chunk, slot, w.end)), 3))
                         for w in sentence]
                segments.append(Segment(
                    recording_id=chunk.recording_id, channel=chunk.channel, speaker=chunk.speaker,
                    start=round(start, 3), end=round(end, 3), text=text,
                    avg_logprob=round(logprob, 4), no_speech_prob=round(float(no_speech_prob), 4),
                    language=language, words=timed,
                ))
            sentence = []
    return segments


def _pause_before(word: Word, previous: Word) -> bool:
    """A new sentence starts after a pause, unless the word is lower case (an English sentence going on)."""
    return word.start - previous.end >= PAUSE_SECONDS and not word.text.strip()[:1].islower()


def _clock(chunk: AudioChunk, slot: Slot, t: float) -> float:
    """A time inside the window, as seconds on the recording's clock, clipped to the chunk."""
    return min(chunk.end, max(chunk.start, chunk.start + (t - slot.offset)))


@dataclass
class Decoded:
    """One window's words, its no-speech probability, and whether its text looks degenerate."""

    words: list[Word]
    no_speech_prob: float
    degenerate: bool


class WindowedWhisper(AsrEngine):
    """Whisper over packed 30 s windows; subclasses run the model (``_detect_batch``, ``_decode_batch``).

    A window whose text looks degenerate (a repetition loop, or the token budget
    used up) is decoded again with one chunk per window, so one bad chunk cannot
    spoil the recordings it shared a window with.
    """

    settings: AsrSettings
    multilingual: bool
    device: str
    packing_stats: PackingStats

    def transcribe_batch(self, items: Sequence[tuple[AudioChunk, np.ndarray]]) -> list[list[Segment]]:
        if not items:
            return []
        stats = self.packing_stats
        audios = [np.asarray(audio, dtype=np.float32) for _, audio in items]
        durations = [len(audio) / SAMPLE_RATE for audio in audios]
        languages = self._languages(items)
        if self.settings.pack_windows:
            windows = pack(durations, languages, self.settings.pack_gap_seconds)
        else:
            windows = singles(range(len(items)), durations, languages)
        out: list[list[Segment]] = [[] for _ in items]
        degenerate: list[int] = []
        empty: list[int] = []
        for window, decoded in zip(windows, self._decode(windows, audios)):
            shared = [slot.item for slot in window.slots] if len(window.slots) > 1 else []
            stats.shared += len(shared)
            if decoded.degenerate and shared:
                degenerate.extend(shared)
                continue
            self._emit(window, decoded, items, out)
            empty.extend(item for item in shared if not out[item])
        stats.chunks += len(items)
        stats.windows += len(windows)
        stats.degenerate_redone += len(degenerate)
        stats.empty_redone += len(empty)
        if empty:
            log.info("%d of %d chunks got no words from their shared window: decoding them alone",
                     len(empty), len(items))
        if degenerate or empty:
            alone = singles(degenerate + empty, durations, languages)
            for window, decoded in zip(alone, self._decode(alone, audios)):
                self._emit(window, decoded, items, out)
            stats.empty_after_redo += sum(1 for item in empty if not out[item])
        return out

    def max_new_tokens(self, speech_seconds: float, language: str | None) -> int:
        """A token budget from the audio's length and language (see ``token_budget``)."""
        return token_budget(self.settings, speech_seconds, language)

    @abstractmethod
    def _detect_batch(self, audios: list[np.ndarray]) -> list[str]:
        """The most likely language code of each audio (up to 30 s each)."""

    @abstractmethod
    def _decode_batch(self, windows: list[Window], audios: Sequence[np.ndarray], language: str) -> list[Decoded]:
        """One model call over a batch of windows of one language."""

    def _languages(self, items: Sequence[tuple[AudioChunk, np.ndarray]]) -> list[str]:
        """The configured language, or one detected per recording from its longest chunk.

        Chunks only share a window with chunks of the same language, and a
        window's language is fixed in the decoder prompt, so detection happens
        before packing: one encoder pass per recording, not per chunk.
        """
        if self.settings.language or not self.multilingual:
            return [self.settings.language or "en"] * len(items)
        longest: dict[str, int] = {}
        for n, (chunk, audio) in enumerate(items):
            best = longest.get(chunk.recording_id)
            if best is None or len(audio) > len(items[best][1]):
                longest[chunk.recording_id] = n
        detected = self.backoff("detect", f"{self.device} (language detection)").run(
            list(longest.values()), self.batch_size,
            lambda batch: self._detect_batch([np.asarray(items[n][1], dtype=np.float32) for n in batch]),
        )
        by_recording = dict(zip(longest, detected))
        return [by_recording[chunk.recording_id] for chunk, _ in items]

    def _decode(self, windows: list[Window], audios: Sequence[np.ndarray]) -> list[Decoded]:
        """Every window decoded, batch by batch, one language at a time; results in window order."""
        results: dict[int, Decoded] = {}
        for language in dict.fromkeys(str(w.group) for w in windows):
            indices = [n for n, w in enumerate(windows) if w.group == language]
            def run(batch: Sequence[int], language: str = language) -> list[Decoded]:
                return self._decode_batch([windows[n] for n in batch], audios, language)

            decoded = self.backoff("decode", f"{self.device} (batch of 30 s windows)").run(indices, self.batch_size, run)
            results.update(zip(indices, decoded))
        return [results[n] for n in range(len(windows))]

    def _emit(self, window: Window, decoded: Decoded, items: Sequence[tuple[AudioChunk, np.ndarray]],
              out: list[list[Segment]]) -> None:
        by_slot = assign_words(window, tighten(decoded.words))
        for slot in window.slots:
            out[slot.item] = words_to_segments(items[slot.item][0], slot, by_slot[slot.item], str(window.group),
                                               decoded.no_speech_prob)


def looks_degenerate(text: str) -> bool:
    """A repetition loop: the text compresses far better than language does (Whisper's 2.4 threshold)."""
    data = text.strip().encode("utf-8")
    return bool(data) and len(data) / len(zlib.compress(data)) > COMPRESSION_RATIO_LIMIT

