"""How the ``asr`` commands read their options: argparse, with every refusal one line that names the command and
the option, and values checked by the same functions as the search API (``asr_tasks.inputs``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from asr_tasks.inputs import InputError


class Parser(argparse.ArgumentParser):
    """argparse's parser whose refusals are one line, ``asr search: MESSAGE``, and exit status 2: a script reads
    why from its log, a person sees it above the prompt (``--help`` shows the usage)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message}\n")


class Checked(argparse.Action):
    """An option whose value goes through a shared check, ``check(value, option)``: what the check answers is
    kept, what it refuses ends the command with its message (``--date '2026-13-01': not a calendar date``)."""

    def __init__(self, option_strings: Sequence[str], dest: str, check: Callable[[Any, str], Any],
                 **kwargs: Any) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self.check = check

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        try:
            setattr(namespace, self.dest, self.check(values, option_string or self.dest))
        except InputError as exc:
            parser.error(str(exc))


def option(field: str) -> str:
    """A filter's field as ``asr search`` spells its option: ``date_from`` is ``--date-from``."""
    return "--" + field.replace("_", "-")


def commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The subcommands' parsers by name (the choices of argparse's subparsers action)."""
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)
