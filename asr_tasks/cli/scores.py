"""``asr scores``: each call's score and answers on the scorecard for a day, and a reviewer's answer to one
question of one call (``audit.scores``), under the name of the account that gives it."""

from __future__ import annotations

import argparse
import getpass
import sys
from typing import TYPE_CHECKING, Any

from asr_tasks.cli.access import log_access
from asr_tasks.cli.console import print_json, table
from asr_tasks.cli.options import Checked
from asr_tasks.config import get_settings
from asr_tasks.inputs import calendar_day

if TYPE_CHECKING:
    from asr_tasks.audit.scorecards import Scorecard

AUTOMATIC = "auto"  # ``--answer auto``: the audit's answer again


def cmd_scores(args: argparse.Namespace) -> int:
    from asr_tasks.audit.score_overrides import OverrideError, ScoreOverrides
    from asr_tasks.audit.scores import answer, day_scores
    from asr_tasks.index.backends import open_index
    from asr_tasks.inputs import InputError
    from asr_tasks.intake.stores import open_store
    from asr_tasks.records.access_log import open_access_log
    from asr_tasks.records.ledger import open_ledger
    from asr_tasks.text.masking import configured_policy

    answering = [args.call is not None, args.question is not None, args.answer is not None]
    if any(answering) and not all(answering) or any(answering) and args.json:
        raise InputError("--call ID --question Q --answer yes|no|na|auto (and --why) to answer a question; or "
                         "none of them, to list the day's scores (--json)")
    settings = get_settings()
    store, user = open_store(settings.storage), getpass.getuser()
    overrides = ScoreOverrides(open_ledger(settings.ledger), open_access_log(settings), configured_policy(settings))
    if args.call is not None:
        try:
            now = answer(args.date, args.call, args.question, None if args.answer == AUTOMATIC else args.answer,
                         args.why or "", user, store, open_index(settings.index), settings, overrides)
        except OverrideError as exc:
            print(f"asr scores: {exc}", file=sys.stderr)
            return 2
        print(f"{now.call.key}: {args.question} {now.answers.get(args.question) or 'unanswered'}; "
              f"score {_shown(now.score)}")
        return 0
    card, scored = day_scores(args.date, store, settings, overrides)
    log_access("read", hits=len(scored), detail=f"the scores of {args.date}")
    if args.json:
        print_json({"date": args.date, "scorecard": _form(card), "calls": [s.to_dict() for s in scored]})
    elif card is None:
        print("no scorecard is configured (audit.scorecard)")
    elif scored:
        print(table(["RECORDING", "AGENT", "SCORE", "YES", "NO", "N/A", "OPEN", "OVERRIDDEN", "ID"],
                    [[s.call.key, s.call.agent_id or "-", _shown(s.score),
                      *(str(sum(1 for a in s.answers.values() if a == v)) for v in ("yes", "no", "na", None)),
                      ", ".join(sorted(s.overrides)), s.call.recording_id] for s in scored]))
    else:
        print(f"{args.date}: no calls scored on {card.id}")
    return 0


def _shown(score: float | None) -> str:
    return "-" if score is None else f"{score:g}"


def _form(card: Scorecard | None) -> dict[str, Any] | None:
    """The form as the listing prints it: its questions, their sections and weights, and which the audit
    answers."""
    if card is None:
        return None
    return {"id": card.id, "title": card.title, "identity": card.identity,
            "questions": [{"id": q.id, "section": q.section, "text": q.text, "weight": q.weight,
                           "automatic": q.automatic} for q in card.questions]}


def add_commands(sub: Any) -> None:
    p = sub.add_parser("scores", help="each call's scorecard score and answers for a day; answer a question of one")
    p.add_argument("--date", required=True, action=Checked, check=calendar_day, help="YYYY-MM-DD: the calls' day")
    p.add_argument("--call", metavar="ID", help="the call to answer a question of (its recording id)")
    p.add_argument("--question", metavar="Q", help="the question's id (the listing's --json names them)")
    p.add_argument("--answer", choices=["yes", "no", "na", AUTOMATIC],
                   help="the reviewer's answer; auto: take the override back (the audit's answer again)")
    p.add_argument("--why", metavar="TEXT", help="why the reviewer answers so (required for an override; kept "
                                                 "masked, as everything people type)")
    p.add_argument("--json", action="store_true", help="the form and every call's answers, automatic and overridden")
    p.set_defaults(func=cmd_scores)
