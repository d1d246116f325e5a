"""The PII policy: kinds of personal data, how numbers are said, which questions ask for which kind.

It lives in ``include/pii/*.yaml`` and is validated when it loads, so a bank adds
its own kinds (a phone format of its country counts as ``phone``), its own spoken
digits, joiners and prompts, or turns a kind's context triggering off
(``card: {prompts: {}}``), in a file of its own beside the default one.
"""

from __future__ import annotations

import hashlib
import re
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from asr_tasks.chars import CJK_CHAR
from asr_tasks.config import regular_expression

PerLanguage = dict[str, tuple[str, ...]]  # language ("*": any) -> words or patterns


class PiiError(ValueError):
    """A PII policy file that cannot be used; the message names the file."""


def digits(value: str) -> str:
    return "".join(ch for ch in value if ch.isdigit())


def luhn(value: str) -> bool:
    numbers = [int(d) for d in digits(value)]
    total = sum(numbers[-1::-2]) + sum(sum(divmod(2 * d, 10)) for d in numbers[-2::-2])
    return bool(numbers) and total % 10 == 0


def prc_check_character(body: str) -> str:
    """The check character (GB 11643) that the 17 digits of a PRC resident ID's body call for."""
    weights = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
    return "10X98765432"[sum(int(d) * w for d, w in zip(body, weights)) % 11]


def prc_id(value: str) -> bool:
    """Whether an 18-character PRC resident ID has its check character, however it was grouped."""
    value = "".join(ch for ch in value if ch.isalnum())
    body, check = value[:17], value[17:].upper()
    return len(value) == 18 and body.isdigit() and prc_check_character(body) == check


CHECKS = {"luhn": luhn, "prc_id": prc_id}


def _patterns(value: PerLanguage) -> PerLanguage:
    for patterns in value.values():
        for pattern in patterns:
            regular_expression(pattern)
    return value


def _alternation(value: PerLanguage) -> re.Pattern[str] | None:
    """Every language's patterns as one (a call mixes languages, and short segments are often mislabelled)."""
    patterns = sorted({p for ps in value.values() for p in ps}, key=lambda p: (-len(p), p))
    return re.compile("|".join(f"(?:{p})" for p in patterns), re.IGNORECASE) if patterns else None


class Kind(BaseModel):
    """One kind of personal data: where it is, what must hold for it to count, what replaces it, who asks for it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pattern: str
    mask: str
    counts_as: str | None = None  # the kind it is reported as (a bank's own phone format counts as phone)
    checks_or_context: tuple[Literal["luhn", "prc_id"], ...] = ()  # a value counts if a check passes, or in context
    context: PerLanguage = Field(default_factory=dict)  # words said before the value
    prompts: PerLanguage = Field(default_factory=dict)  # questions whose answer is this kind (patterns)
    answer_digits: int = Field(6, ge=1)  # digit-like words an answer needs to be masked as this kind

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, pattern: str) -> str:
        return regular_expression(pattern)

    @field_validator("prompts")
    @classmethod
    def _prompts_compile(cls, prompts: PerLanguage) -> PerLanguage:
        return _patterns(prompts)

    @field_validator("mask")
    @classmethod
    def _known_fields(cls, mask: str) -> str:
        try:
            mask.format(last4="0000")
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(f"mask {mask!r} may use {{last4}} only") from exc
        return mask

    @cached_property
    def compiled(self) -> re.Pattern[str]:
        return re.compile(self.pattern, re.IGNORECASE)

    @cached_property
    def prompt(self) -> re.Pattern[str] | None:
        return _alternation(self.prompts)

    def cue(self, before: str, language: str | None) -> int:
        """Where the last of the kind's context words said in ``before`` ends (every language's, if its own has
        none); -1 where none is."""
        words = [*self.context.get(language or "", ()), *self.context.get("*", ())]
        if not words:
            words = [w for ws in self.context.values() for w in ws]
        lowered = before.lower()
        return max((at + len(w) for w in words if (at := lowered.rfind(w.lower())) >= 0), default=-1)

    def in_context(self, before: str, language: str | None) -> bool:
        """Whether one of the kind's context words was said in ``before``."""
        return self.cue(before, language) >= 0

    def checked(self, value: str) -> bool:
        """Whether the value passes one of the kind's checks: only then are its last four digits its own."""
        return any(CHECKS[check](value) for check in self.checks_or_context)

    def counts(self, value: str, before: str, language: str | None) -> bool:
        if self.checked(value):
            return True
        return self.in_context(before, language) if self.context else not self.checks_or_context


class Spoken(BaseModel):
    """How people say numbers, beyond what ITN makes digits of: the words a detector reads as digits."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    digits: dict[str, dict[str, int]] = Field(default_factory=dict)  # a word or character saying one digit
    repeats: dict[str, dict[str, int]] = Field(default_factory=dict)  # "double" four: 44
    plus: PerLanguage = Field(default_factory=dict)  # "plus" four four: +44
    joiners: PerLanguage = Field(default_factory=dict)  # said between two groups of one number (patterns)
    sounds_like_digits: PerLanguage = Field(default_factory=dict)  # what a recogniser writes for a misheard digit
    backchannels: PerLanguage = Field(default_factory=dict)  # a listener's short reply that does not end a turn

    @field_validator("joiners", "backchannels")
    @classmethod
    def _compile(cls, value: PerLanguage) -> PerLanguage:
        return _patterns(value)

    @cached_property
    def digit_words(self) -> dict[str, str]:
        return {w.lower(): str(d) for words in self.digits.values() for w, d in words.items()}

    @cached_property
    def repeat_words(self) -> dict[str, int]:
        return {w.lower(): n for words in self.repeats.values() for w, n in words.items()}

    @cached_property
    def plus_words(self) -> set[str]:
        return {w.lower() for words in self.plus.values() for w in words}

    @cached_property
    def misheard(self) -> set[str]:
        return {w.lower() for words in self.sounds_like_digits.values() for w in words}

    @cached_property
    def joiner(self) -> re.Pattern[str] | None:
        return _alternation(self.joiners)

    @cached_property
    def backchannel_words(self) -> tuple[re.Pattern[str], ...]:
        return tuple(re.compile(p, re.IGNORECASE) for p in sorted({p for ps in self.backchannels.values() for p in ps}))

    def is_backchannel(self, text: str) -> bool:
        """Whether ``text`` is nothing but back-channel words ("Okay, thank you.", "嗯嗯，对"): each place it can
        be read to is tried once, so no spelling makes it slow (a regex of repeated repeats would be)."""
        text = re.sub(r"[\W_]+", " ", text.lower()).strip()
        if not text or not self.backchannel_words:
            return False
        reached, todo = {0}, [0]
        while todo:
            at = todo.pop()
            for word in self.backchannel_words:
                m = word.match(text, at)
                if m and m.end() > at and (m.end() == len(text) or text[m.end()] == " " or CJK_CHAR.match(text[m.end()])):
                    end = m.end() + (m.end() < len(text) and text[m.end()] == " ")
                    if end == len(text):
                        return True
                    if end not in reached:
                        reached.add(end)
                        todo.append(end)
        return False


class Policy(BaseModel):
    """All kinds, in the order they are tried (an earlier kind wins an overlapping value)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: int = 1
    context_chars: int = 40
    join_gap_seconds: float = Field(60.0, ge=0)  # a speaker's pause, up to this, does not end their turn
    answer_seconds: float = Field(60.0, ge=0)  # how long after a prompt an answer is looked for
    follow_ups: PerLanguage = Field(default_factory=dict)  # questions that ask for more of the same answer
    spoken: Spoken = Field(default_factory=Spoken)
    kinds: dict[str, Kind]

    @field_validator("follow_ups")
    @classmethod
    def _follow_ups_compile(cls, value: PerLanguage) -> PerLanguage:
        return _patterns(value)

    @cached_property
    def follow_up(self) -> re.Pattern[str] | None:
        return _alternation(self.follow_ups)

    @property
    def identity(self) -> str:
        """What the masked transcripts depend on: a changed pattern, prompt or mask is a new policy."""
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()[:12]

    def reported_as(self, name: str) -> str:
        return self.kinds[name].counts_as or name

    def named_before(self, asked: str, before: str, language: str | None) -> str:
        """The kind of digits said in answer to a prompt of kind ``asked``: the prompt's, unless the speaker named
        another kind just before them ("call me back on ..." after "your card number?") and not the asked one."""
        if self.kinds[asked].in_context(before, language):
            return asked
        cues = [(kind.cue(before, language), -order, name) for order, (name, kind) in enumerate(self.kinds.items())]
        at, _, name = max(cues)
        return name if at >= 0 else asked

    def without_context_triggers(self) -> Policy:
        """The same policy with no kind triggered by a prompt (what pattern matching alone finds)."""
        data = self.model_dump()
        return Policy.model_validate({**data, "kinds": {n: {**k, "prompts": {}} for n, k in data["kinds"].items()}})


def load_policy(folder: Path) -> Policy:
    """Every ``*.yaml`` in the folder, in name order: a later file adds kinds, or changes fields of one by name."""
    files = sorted(folder.glob("*.yaml"))
    if not files:
        raise PiiError(f"{folder}: no PII policy files (*.yaml)")
    return _load(tuple((str(f), f.stat().st_mtime_ns) for f in files))


def _merged(merged: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
    """``data`` over ``merged``: a kind's fields, and each ``spoken`` field's languages, one by one."""
    kinds = dict(merged.get("kinds") or {})
    for name, fields in (data.get("kinds") or {}).items():
        kinds[name] = {**kinds.get(name, {}), **(fields or {})}
    spoken = dict(merged.get("spoken") or {})
    for name, languages in (data.get("spoken") or {}).items():
        spoken[name] = {**spoken.get(name, {}), **(languages or {})}
    return {**merged, **data, "kinds": kinds, "spoken": spoken}


@lru_cache(maxsize=8)
def _load(files: tuple[tuple[str, int], ...]) -> Policy:
    merged: dict[str, Any] = {}
    for name, _ in files:
        try:
            data = yaml.safe_load(Path(name).read_text(encoding="utf-8")) or {}
            if not isinstance(data, dict):
                raise PiiError(f"{name}: expected a mapping with kinds")
            merged = _merged(merged, data)
            policy = Policy.model_validate(merged)
        except (yaml.YAMLError, ValidationError, AttributeError, TypeError) as exc:
            raise PiiError(f"{name}: {exc}") from exc
    return policy
