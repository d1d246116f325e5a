"""From the engine's segments to the text that is indexed.

``stitch`` puts per-chunk, per-channel segments back into one time-ordered
transcript; ``postprocess_segments`` then runs each language's configured steps
(traditional -> simplified script, filler removal, the term dictionary, inverse
text normalisation of numbers), keeping the model's words in ``text_raw``.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

import yaml

from asr_tasks.chars import CJK_CHAR, CJK_RANGES
from asr_tasks.config import ITN_LANGUAGES, ConfigError, PostprocessSettings, postprocess_step_names
from asr_tasks.models import Segment

_SPACES = re.compile(r"\s+")


def normalise_text(text: str) -> str:
    return _SPACES.sub(" ", text).strip()


def stitch(segments: list[Segment]) -> list[Segment]:
    """Order segments of all channels by time; drop empty ones and words heard twice at chunk seams.

    A speech run longer than ``chunk_max_seconds`` is cut into two chunks that share
    ``chunk_overlap_seconds`` of audio, so the words in that overlap come back from
    both. When a segment overlaps in time the previous one of its channel, its leading
    words that repeat that segment's trailing words are dropped (compared without case
    and punctuation; Chinese character by character), and it then starts where the
    previous one ends (its words said before that go with them).
    """
    ordered = sorted(segments, key=lambda s: (s.start, s.channel, s.end))
    result: list[Segment] = []
    last_by_channel: dict[int, Segment] = {}
    for seg in ordered:
        text = normalise_text(seg.text)
        start = seg.start
        prev = last_by_channel.get(seg.channel)
        if text and prev is not None and seg.start < prev.end:
            kept = _drop_repeated_words(prev.text, text)
            if kept != text:
                text, start = kept, min(max(seg.start, prev.end), seg.end)
        if not text:
            continue
        words = seg.words if start == seg.start else [w for w in seg.words if (w.start + w.end) / 2 >= start]
        stitched = dataclasses.replace(seg, text=text, start=start, words=words)
        result.append(stitched)
        last_by_channel[seg.channel] = stitched
    return sorted(result, key=lambda s: (s.start, s.channel, s.end))  # a trimmed segment starts later


_STITCH_TOKEN = re.compile(rf"[{CJK_RANGES}]|[^\s{CJK_RANGES}]+")


def _drop_repeated_words(earlier: str, later: str) -> str:
    """``later`` without its longest run of leading words that ``earlier`` ends with."""

    def words(text: str) -> list[tuple[str, int]]:
        found = ((re.sub(r"\W", "", m.group()).casefold(), m.start()) for m in _STITCH_TOKEN.finditer(text))
        return [(word, at) for word, at in found if word]

    head, tail = words(later), [w for w, _ in words(earlier)]
    for k in range(min(len(head), len(tail)), 0, -1):
        if [w for w, _ in head[:k]] == tail[-k:]:
            return normalise_text(later[head[k][1] :]) if k < len(head) else ""
    return later


# Per-language post-processing: script, fillers, terms, inverse text normalisation.

OTHER_LANGUAGES = "*"


class PostprocessError(ConfigError):
    """A post-processing setting or data file that cannot be used; the message names it."""


@dataclass(frozen=True)
class Term:
    """One dictionary entry: what the model writes, and what the bank calls it."""

    wrong: str
    right: str
    source: str  # file:line, for error messages and audits

    @property
    def pattern(self) -> re.Pattern[str]:
        if CJK_CHAR.search(self.wrong):
            return re.compile(re.escape(self.wrong))  # Chinese has no spaces between words
        return re.compile(rf"(?<!\w){re.escape(self.wrong)}(?!\w)", re.IGNORECASE)


def steps_for(settings: PostprocessSettings, language: str | None) -> list[str]:
    """The configured steps for one language, in order (validated when the settings loaded)."""
    table = settings.postprocess_steps
    return postprocess_step_names(table.get(language or "", table.get(OTHER_LANGUAGES, "")))


def load_fillers(path: Path) -> dict[str, tuple[str, ...]]:
    """Filler words per language from a YAML mapping ``language: [word, ...]``; re-read when the file changes."""
    try:
        return _parse_fillers(path, path.stat().st_mtime_ns)
    except FileNotFoundError as exc:
        raise PostprocessError(f"{path}: filler list not found") from exc


@lru_cache(maxsize=4)
def _parse_fillers(path: Path, mtime_ns: int) -> dict[str, tuple[str, ...]]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise PostprocessError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict) or not all(isinstance(v, list) for v in data.values()):
        raise PostprocessError(f"{path}: expected a mapping of language to a list of filler words")
    return {str(lang): tuple(sorted({str(w).strip() for w in words if str(w).strip()}, key=len, reverse=True))
            for lang, words in data.items()}


def load_terms(folder: Path) -> tuple[Term, ...]:
    """Every ``wrong<TAB>right`` line of ``folder/*.tsv``; ``#`` starts a comment line.

    Re-read when a file changes, so a long-running worker picks up dictionary edits.
    """
    if not folder.is_dir():
        raise PostprocessError(f"{folder}: term dictionary folder not found")
    return _parse_terms(tuple((path, path.stat().st_mtime_ns) for path in sorted(folder.glob("*.tsv"))))


@lru_cache(maxsize=4)
def _parse_terms(files: tuple[tuple[Path, int], ...]) -> tuple[Term, ...]:
    terms: dict[str, Term] = {}
    for path, _ in files:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            fields = line.split("\t")
            if len(fields) != 2 or not fields[0].strip() or not fields[1].strip():
                raise PostprocessError(f"{path}:{n}: expected 'wrong<TAB>right', got {line!r}")
            wrong, right = fields[0].strip(), fields[1].strip()
            key = wrong if CJK_CHAR.search(wrong) else wrong.lower()
            if key in terms and terms[key].right != right:
                earlier = terms[key]
                raise PostprocessError(f"{path}:{n}: {wrong!r} already maps to {earlier.right!r} ({earlier.source})")
            terms[key] = Term(wrong, right, f"{path.name}:{n}")
    # Longest first, so "harbour bank card" wins over "harbour bank".
    return tuple(sorted(terms.values(), key=lambda t: len(t.wrong), reverse=True))


def hotword_terms(settings: PostprocessSettings, limit: int = 40) -> list[str]:
    """The dictionary's correct spellings that engines are given as hotwords (none when that is off).

    Whisper reads them as preceding text, so only the first ``limit`` distinct ones are used.
    """
    if not settings.terms_as_hotwords:
        return []

    def file_order(term: Term) -> tuple[str, int]:
        name, line = term.source.rsplit(":", 1)
        return name, int(line)

    terms = sorted(load_terms(settings.path("terms_dir")), key=file_order)
    return list(dict.fromkeys(t.right for t in terms))[:limit]


def hotwords(settings: PostprocessSettings) -> str | None:
    """The hotword prompt for engines that take one (faster-whisper's ``hotwords``), or None."""
    return ", ".join(hotword_terms(settings)) or None


@lru_cache(maxsize=1)
def _t2s() -> Any:
    import opencc

    return opencc.OpenCC("t2s")


def to_simplified(text: str) -> str:
    """Traditional Chinese characters to simplified (OpenCC t2s)."""
    return str(_t2s().convert(text))


def remove_fillers(text: str, fillers: tuple[str, ...]) -> str:
    """Drop filler words and the comma after them; a sentence that began with one keeps its capital."""
    for word in fillers:
        if CJK_CHAR.search(word):
            text = re.sub(rf"(?:{re.escape(word)})+[，,、]?\s*", "", text)
            continue
        pattern = re.compile(rf"(?<![\w'-]){re.escape(word)}(?![\w'-])([,.?!]?)\s*(\w?)", re.IGNORECASE)

        def drop(m: re.Match[str]) -> str:
            sentence_start = m.string[: m.start()].rstrip()[-1:] in ("", ".", "?", "!")
            if sentence_start:  # "Um, so..." -> "So..."; "Hmm." disappears whole
                return m.group(2).upper() if m.group()[0].isupper() else m.group(2)
            end = m.group(1) if m.group(1) in (".", "?", "!") else ""
            return end + (" " if end and m.group(2) else "") + m.group(2)

        text = pattern.sub(drop, text)
    return normalise_text(re.sub(r"\s+([,.?!，。？！])", r"\1", text)).lstrip(",，、 ")


def apply_terms(text: str, terms: tuple[Term, ...]) -> str:
    """Replace dictionary spellings: whole words for Latin script, plain substrings for Chinese."""
    for term in terms:
        text = term.pattern.sub(term.right.replace("\\", "\\\\"), text)
    return text


# Chinese inverse text normalisation. cn2an converts a numeral to its value, but
# its whole-text ``transform`` also turns words into numbers (一些 -> 1些,
# 一下 -> 1下), misses times (三点二十分) and reads decimal-point times as
# decimals; so spans are found and classified here, and cn2an only converts them.
_ZH_DIGIT = "零〇一二三四五六七八九幺"
_ZH_NUM_CHARS = _ZH_DIGIT + "两壹贰叁肆伍陆柒捌玖十百千万亿拾佰仟"
_ZH_UNIT = "十百千万亿拾佰仟"
_NUM = f"[{_ZH_NUM_CHARS}]+"
_DIGIT_VALUE = {c: str(i) for i, c in enumerate("零一二三四五六七八九")} | {"〇": "0", "幺": "1"}
_TIME_OF_DAY = "上午|下午|早上|早晨|晚上|中午|凌晨|傍晚|夜里|今晚|明早"
_ZH_PERCENT = re.compile(rf"百分之({_NUM}(?:点[{_ZH_DIGIT}]+)?)")
_ZH_TIME = re.compile(rf"({_NUM})点(?:({_NUM})分|(半))")
_ZH_CLOCK = re.compile(rf"({_TIME_OF_DAY})({_NUM})点(?:钟)?(?!{_NUM}|半)")
_ZH_YEAR = re.compile(rf"([{_ZH_DIGIT}]{{2,4}})年")
_ZH_MONTH_DAY = re.compile(rf"({_NUM})月(?:({_NUM})(日|号))?")
_ZH_AMOUNT = re.compile(rf"({_NUM})(块|元)([{_ZH_DIGIT}])(?:毛|角)?")
_ZH_DIGIT_STRING = re.compile(f"[{_ZH_DIGIT}]{{3,}}")
_ZH_NUMBER = re.compile(rf"(?<![几{_ZH_NUM_CHARS}])({_NUM})(点[{_ZH_DIGIT}]+)?([万亿])?(?![几{_ZH_NUM_CHARS}])")
_ZH_MONEY_AFTER = ("元", "块", "美元", "港币", "港元", "%", "岁")
# Words and idioms with numerals in them that are not numbers.
ZH_PROTECTED = ("一五一十", "十有八九", "十之八九", "百分百")


def _zh_value(span: str) -> str | None:
    import cn2an

    try:
        value = cn2an.cn2an(span, "normal")
    except (ValueError, KeyError, IndexError):
        return None
    return str(value)


def _zh_digits(span: str) -> str:
    return "".join(_DIGIT_VALUE[c] for c in span)


def itn_zh(text: str, protected: tuple[str, ...] = ()) -> str:
    """Chinese numerals to digits: amounts, percentages, dates, times, digit strings; words stay words."""
    masks: list[str] = []

    def mask(m: re.Match[str]) -> str:
        masks.append(m.group())
        return chr(0xE000 + len(masks) - 1)

    numeric = {w for w in (*ZH_PROTECTED, *protected) if any(c in _ZH_NUM_CHARS for c in w)}
    words = sorted(numeric, key=len, reverse=True)
    if words:
        text = re.sub("|".join(map(re.escape, words)), mask, text)

    def percent(m: re.Match[str]) -> str:
        value = "100" if m.group(1) == "百" else _zh_value(m.group(1))
        return f"{value}%" if value is not None else m.group()

    def time(m: re.Match[str]) -> str:
        hour, minute = _zh_value(m.group(1)), "30" if m.group(3) else _zh_value(m.group(2) or "")
        if hour is None or minute is None or not (0 <= int(hour) <= 24 and 0 <= int(minute) < 60):
            return m.group()
        return f"{hour}:{int(minute):02d}"

    def clock(m: re.Match[str]) -> str:
        hour = _zh_value(m.group(2))
        return f"{m.group(1)}{hour}点" if hour is not None and 0 <= int(hour) <= 24 else m.group()

    def month_day(m: re.Match[str]) -> str:
        month = _zh_value(m.group(1))
        if month is None or not 1 <= int(month) <= 12:
            return m.group()
        if m.group(2) is None:
            return f"{month}月"
        day = _zh_value(m.group(2))
        if day is None or not 1 <= int(day) <= 31:
            day = m.group(2)
        return f"{month}月{day}{m.group(3)}"

    def amount(m: re.Match[str]) -> str:
        whole = _zh_value(m.group(1))
        return f"{whole}.{_DIGIT_VALUE[m.group(3)]}元" if whole is not None else m.group()

    def number(m: re.Match[str]) -> str:
        span, decimal, big = m.group(1), m.group(2) or "", m.group(3) or ""
        after = m.string[m.end():]
        if span[0] in _ZH_UNIT and span[0] != "十":
            return m.group()  # 万一, 千万, 百分: words, not numbers
        if len(span) == 1 and not decimal and not big and not after.startswith(_ZH_MONEY_AFTER):
            return m.group()  # 一个, 三次, 十全十美: a lone numeral stays a word
        if not any(c in _ZH_UNIT for c in span) and not decimal and not big and len(span) > 1:
            return m.group()  # 三四个: "three or four", not 34
        value = _zh_value(span + decimal)
        return m.group() if value is None else value + big

    text = _ZH_PERCENT.sub(percent, text)
    text = _ZH_TIME.sub(time, text)
    text = _ZH_CLOCK.sub(clock, text)
    text = _ZH_YEAR.sub(lambda m: _zh_digits(m.group(1)) + "年", text)
    text = _ZH_MONTH_DAY.sub(month_day, text)
    text = _ZH_AMOUNT.sub(amount, text)
    text = _ZH_DIGIT_STRING.sub(lambda m: _zh_digits(m.group()), text)
    text = _ZH_NUMBER.sub(number, text)
    if masks:
        text = re.sub(f"[\ue000-{chr(0xE000 + len(masks) - 1)}]", lambda m: masks[ord(m.group()) - 0xE000], text)
    return text


_EN_A_NUMBER = re.compile(r"\b(a|A)n? (hundred|thousand|million|billion)\b")
_EN_DIGIT_RUN = re.compile(r"(?<![\d.,-])\d(?:[ -]\d){2,}(?![\d.,-]\d)")
_EN_PERCENT = re.compile(r"(\d) ?(?:percent|per cent)\b", re.IGNORECASE)


def itn_en(text: str) -> str:
    """English number words to digits; digit strings read one by one ("4 4 7 2", "4-4-7-2") join, "percent" is %."""
    from text_to_num import alpha2digit

    text = _EN_A_NUMBER.sub(lambda m: ("One " if m.group(1) == "A" else "one ") + m.group(2), text)
    text = alpha2digit(text, "en")
    text = _EN_DIGIT_RUN.sub(lambda m: re.sub("[ -]", "", m.group()), text)
    return _EN_PERCENT.sub(r"\1%", text)


_ITN: dict[str, Callable[..., str]] = {"zh": itn_zh, "en": itn_en}
assert set(_ITN) == set(ITN_LANGUAGES), "config.ITN_LANGUAGES names the languages with an ITN here"


def postprocess_text(text: str, language: str | None, steps: list[str], settings: PostprocessSettings) -> str:
    """One segment's text through the language's steps, in their configured order."""
    for step in steps:
        if step == "t2s":
            text = to_simplified(text)
        elif step == "fillers":
            fillers = load_fillers(settings.path("fillers_file"))
            text = remove_fillers(text, fillers.get(language or "", ()))
        elif step == "terms":
            text = apply_terms(text, load_terms(settings.path("terms_dir")))
        elif step == "itn" and language == "zh":
            rights = tuple(t.right for t in load_terms(settings.path("terms_dir")))
            text = itn_zh(text, protected=rights)  # a product name is never turned into digits
        elif step == "itn":
            text = _ITN[language or ""](text)
    return normalise_text(text)


def postprocess_segments(
    segments: list[Segment], settings: PostprocessSettings, language: str | None = None
) -> tuple[list[Segment], dict[str, list[str]]]:
    """Apply each segment's language steps; keep the model's words in ``text_raw``.

    A segment that held nothing but fillers is dropped. Returns the segments and
    the steps applied per language, which the transcript records.
    """
    applied: dict[str, list[str]] = {}
    result: list[Segment] = []
    for seg in segments:
        lang = seg.language or language
        key = lang or OTHER_LANGUAGES
        if key not in applied:
            applied[key] = steps_for(settings, lang)
        raw = seg.text if seg.text_raw is None else seg.text_raw
        text = postprocess_text(raw, lang, applied[key], settings)
        if re.search(r"\w", text):  # a segment left with punctuation only held nothing but fillers
            result.append(dataclasses.replace(seg, text=text, text_raw=raw))
    return result, applied

