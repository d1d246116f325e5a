"""What a person types into the ``asr`` command or the search API, checked once for both.

Each check answers the value it accepts or raises ``InputError``, whose message names
the option as the caller spells it (``--date-from`` on the command line, ``date_from``
in a URL) and says what it takes: the command exits 2 with that line, the API answers
422 with it. The index compares days as text and takes any number, so a value it would
silently misread (``2026-13-01``, ``--limit 0``) is refused here rather than answered
with nothing.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from datetime import date, timedelta
from typing import TypeVar

from asr_tasks.config import AudioSettings

DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
MAX_SPAN_YEARS = 100  # a range of days at most: commands and pages list or process every day of it
DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 500
MAX_TEXT_CHARS = 200  # an agent id, a rule, a quality outcome: a filter is short
MAX_COUNT = 1_000_000  # interruptions per call: more than any call has, less than an index integer holds

Number = TypeVar("Number", int, float)


class InputError(ValueError):
    """A value a person typed that is refused; the message names the option and says what it takes."""


def calendar_day(value: str, name: str) -> str:
    """A day of the calendar written YYYY-MM-DD (``fromisoformat`` alone also takes ``20261101``)."""
    if DAY.fullmatch(value):
        try:
            return date.fromisoformat(value).isoformat()
        except ValueError:
            pass
    raise InputError(f"{name} {value!r}: not a calendar date (YYYY-MM-DD)")


def day_range(first: str | None, last: str | None, first_name: str, last_name: str) -> None:
    """Two checked days, the first not after the last and at most ``MAX_SPAN_YEARS`` apart; an open end passes."""
    if first is None or last is None:
        return
    if first > last:
        raise InputError(f"{first_name} {first} is after {last_name} {last}")
    if (date.fromisoformat(last) - date.fromisoformat(first)).days > MAX_SPAN_YEARS * 366:
        raise InputError(f"{first_name} {first} to {last_name} {last}: at most {MAX_SPAN_YEARS} years at once")


def days_between(first: str, last: str) -> list[str]:
    """Every calendar day from ``first`` to ``last`` (checked by ``day_range``), both included."""
    start = date.fromisoformat(first)
    return [(start + timedelta(days=n)).isoformat() for n in range((date.fromisoformat(last) - start).days + 1)]


def speaker_names(audio: AudioSettings) -> list[str]:
    """The speakers a transcript can name: every channel's, and the one of a mono recording."""
    return sorted({*audio.channel_speakers.values(), audio.mono_speaker})


def one_of(value: str, choices: Sequence[str], name: str) -> str:
    """One of a fixed set of names (speakers, quality outcomes), which the index matches exactly."""
    if value not in choices:
        raise InputError(f"{name} {value!r}: not one of {', '.join(choices)}")
    return value


def short_text(value: str, name: str) -> str:
    """A filter's text of at most ``MAX_TEXT_CHARS``: what is typed is masked and logged with every search."""
    if len(value) > MAX_TEXT_CHARS:
        raise InputError(f"{name}: longer than {MAX_TEXT_CHARS} characters")
    return value


def within(value: Number, name: str, least: Number, most: Number) -> Number:
    """A number from ``least`` to ``most``; NaN and infinities are never within."""
    if not least <= value <= most:
        raise InputError(f"{name} {value}: not from {least} to {most}")
    return value


def page_size(value: int, name: str) -> int:
    """Hits per page: at least one, and no more than one answer should carry."""
    return within(value, name, 1, MAX_PAGE_SIZE)


def share(value: float, name: str) -> float:
    """A share of a call's time, from 0 to 1 (0.3 is 30 %)."""
    return within(value, name, 0.0, 1.0)


def percent(value: float, name: str) -> float:
    """A scorecard's score, from 0 to 100."""
    return within(value, name, 0.0, 100.0)


def count(value: int, name: str) -> int:
    """A number of events in a call (interruptions), from 0 up."""
    return within(value, name, 0, MAX_COUNT)


def has_control(text: str) -> bool:
    """Whether typed text holds a control, format (bidi) or surrogate character: line breaks and tabs aside,
    nothing a person types on purpose, and what would disguise a comment on a page or in a terminal."""
    return any(unicodedata.category(ch) in ("Cc", "Cf", "Cs") and ch not in "\n\t" for ch in text)
