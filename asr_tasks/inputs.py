"""What a person types into the ``asr`` command or the search API, checked once for both.

Each check answers the value it accepts or raises ``InputError``, whose message names
the option as the caller spells it (``--date-from`` on the command line, ``date_from``
in a URL) and says what it takes: the command exits 2 with that line, the API answers
422 with it. The index compares days as text and takes any number, so a value it would
silently misread (``2026-13-01``, ``--limit 0``) is refused here rather than answered
with nothing.

What records management is given (a day, an object key, a recording id, an agent or
customer id) is also a pydantic type (``CalendarDay``, ``ObjectKey``, ``RecordingId``,
``PartyId``): the API's bodies are made of them, so FastAPI answers 422 naming the field,
and the command's options go through the same type (``calendar_day`` and its kin), so a
value is checked by one function wherever it comes from.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Mapping, Sequence
from datetime import date, timedelta
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, TypeAdapter, ValidationError

from asr_tasks.config import AudioSettings

DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
RECORDING_ID = re.compile(r"[0-9a-f]{24}")  # as ``models.recording_id_for`` makes them
MAX_KEY_BYTES = 1024  # the longest object key S3 and MinIO store
TOKEN = re.compile(r"[0-9a-f]{32}")  # an erasure's confirmation (``records/erasure.py``)
MAX_SPAN_YEARS = 100  # a range of days at most: commands and pages list or process every day of it
DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 500
MAX_TEXT_CHARS = 200  # an agent id, a rule, a quality outcome: a filter is short
MAX_COUNT = 1_000_000  # interruptions per call: more than any call has, less than an index integer holds

Number = TypeVar("Number", int, float)


class InputError(ValueError):
    """A value a person typed that is refused; the message names the option and says what it takes."""


def _day(value: str) -> str:
    """A day of the calendar written YYYY-MM-DD (``fromisoformat`` alone also takes ``20261101`` and
    ``2026-11-27T00:00``): the ledger compares days as text, so nothing else may pass for one."""
    if DAY.fullmatch(value):
        try:
            return date.fromisoformat(value).isoformat()
        except ValueError:
            pass
    raise ValueError("not a calendar date (YYYY-MM-DD)")


def _controls(value: str) -> str:
    """Text without a control, format (bidi) or surrogate character, line breaks and tabs included: an id or a
    key is one line, and such a character would make two values look alike on a page or in a terminal."""
    if has_control(value) or "\n" in value or "\t" in value:
        raise ValueError("holds a control character")
    return value


def _object_key(value: str) -> str:
    """An object key as the store lists it. Surrounding spaces are refused, not stripped: the store keeps a key
    as it was written, and a key with a stray space is another key (or none), never the one meant."""
    if not _controls(value):
        raise ValueError("empty")
    if value != value.strip():
        raise ValueError("begins or ends with a space (a key is taken as written; its recording id names it too)")
    if len(value.encode()) > MAX_KEY_BYTES:
        raise ValueError(f"longer than {MAX_KEY_BYTES} bytes")
    return value


def _recording_id(value: str) -> str:
    if not RECORDING_ID.fullmatch(value):
        raise ValueError("not a recording id (24 lowercase hex digits)")
    return value


def _token(value: str) -> str:
    if not TOKEN.fullmatch(value):
        raise ValueError("not a confirmation token (32 hex digits, as the dry run gave it)")
    return value


def _party_id(value: str) -> str:
    """An agent's or a customer's id, surrounding spaces stripped (ids have none: ``party_id_pattern``)."""
    value = _controls(value.strip())
    if not value:
        raise ValueError("empty")
    if len(value) > MAX_TEXT_CHARS:
        raise ValueError(f"longer than {MAX_TEXT_CHARS} characters")
    return value


CalendarDay = Annotated[str, AfterValidator(_day)]
ObjectKey = Annotated[str, AfterValidator(_object_key)]
RecordingId = Annotated[str, AfterValidator(_recording_id)]
PartyId = Annotated[str, AfterValidator(_party_id)]
ConfirmationToken = Annotated[str, AfterValidator(_token)]


@functools.cache
def _adapter(kind: Any) -> TypeAdapter[Any]:
    return TypeAdapter(kind)


def typed(kind: Any, value: Any) -> Any:
    """``value`` as a type of this module takes it (pydantic's ``ValidationError`` where it does not): for a
    model's field whose type depends on another field."""
    return _adapter(kind).validate_python(value)


def message_of(exc: ValidationError) -> str:
    """What the first error of a validation says, without pydantic's ``Value error,`` before it."""
    error = exc.errors()[0]
    return str(error.get("ctx", {}).get("error", error["msg"]))


def refusal(exc: ValidationError, spelled: Mapping[str, str]) -> InputError:
    """A model's refusal as one line naming the option (``spelled``: a field as the caller spells it)."""
    error = exc.errors()[0]
    field = str(error["loc"][0]) if error["loc"] else ""
    return InputError(f"{spelled.get(field, field)}: {message_of(exc)}" if field else message_of(exc))


def checked(kind: Any, value: Any, name: str) -> Any:
    """``value`` as one of this module's types takes it, or ``InputError`` naming the option ``name``."""
    try:
        return typed(kind, value)
    except ValidationError as exc:
        raise InputError(f"{name} {value!r}: {message_of(exc)}") from None


def calendar_day(value: str, name: str) -> str:
    """A day of the calendar written YYYY-MM-DD (``CalendarDay``)."""
    return str(checked(CalendarDay, value, name))


def object_key(value: str, name: str) -> str:
    """An object key, as written (``ObjectKey``)."""
    return str(checked(ObjectKey, value, name))


def recording_id(value: str, name: str) -> str:
    """A recording's id (``RecordingId``)."""
    return str(checked(RecordingId, value, name))


def party_id(value: str, name: str) -> str:
    """An agent's or a customer's id (``PartyId``)."""
    return str(checked(PartyId, value, name))


def confirmation_token(value: str, name: str) -> str:
    """An erasure's confirmation token (``ConfirmationToken``)."""
    return str(checked(ConfirmationToken, value, name))


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
