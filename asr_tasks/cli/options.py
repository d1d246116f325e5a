"""How the ``asr`` commands read their options: argparse, with every refusal one line that names the command and
the option, and values checked by the same functions as the search API (``asr_tasks.inputs``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from asr_tasks.config import get_settings
from asr_tasks.index.query import Filters, checked_filters
from asr_tasks.inputs import InputError, speaker_names
from asr_tasks.states import GateOutcome


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


def add_call_filters(p: argparse.ArgumentParser) -> None:
    """The options that narrow a search to some calls, as ``asr search`` and ``asr watch add`` take them (the
    dates aside: a saved search runs over each new day)."""
    p.add_argument("--agent", help="agent id")
    p.add_argument("--speaker", help="a speaker of the settings (channel_speakers, mono_speaker): agent, customer, ...")
    p.add_argument("--quality", help="only recordings with this quality gate outcome: " + ", ".join(GateOutcome))
    p.add_argument("--min-non-talk-share", type=float, metavar="SHARE",
                   help="only calls with at least this share of non-talk time (0.3: 30 %%)")
    p.add_argument("--min-agent-interruptions", type=int, metavar="N", help="only calls where the agent interrupted N+ times")
    p.add_argument("--min-customer-interruptions", type=int, metavar="N",
                   help="only calls where the customer interrupted N+ times")
    p.add_argument("--rule", help="only calls with a QA finding of this rule")
    p.add_argument("--min-score", type=float, metavar="N", help="only calls whose scorecard score is at least N (0-100)")
    p.add_argument("--max-score", type=float, metavar="N", help="only calls whose scorecard score is at most N (0-100)")
    p.add_argument("--tag", action="append", default=[], metavar="TAG",
                   help="only calls the QA audit tagged TAG (complaint, ...); repeated: calls with every one")


def search_filters(args: argparse.Namespace) -> Filters:
    """The search's filters from its options, checked by the function that checks the API's parameters."""
    filters = Filters(args.date_from, args.date_to, args.agent, args.speaker, args.quality,
                      args.min_non_talk_share, args.min_agent_interruptions, args.min_customer_interruptions,
                      args.rule, tuple(args.tag), args.sounds_like, args.min_score, args.max_score)
    return checked_filters(filters, speaker_names(get_settings().audio), option)
