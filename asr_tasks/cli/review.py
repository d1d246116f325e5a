"""``asr review``: a day's findings with their reviews, and a reviewer's verdict on one (``audit.reviews``), under
the name of the account that gives it."""

from __future__ import annotations

import argparse
from dataclasses import replace
import getpass
import sys
from typing import TYPE_CHECKING, Any

from asr_tasks.audit.verdicts import DISMISS_REASONS, STATUSES
from asr_tasks.cli.access import log_access
from asr_tasks.cli.audit import found
from asr_tasks.cli.console import print_json, table
from asr_tasks.cli.options import Checked
from asr_tasks.config import Settings, get_settings
from asr_tasks.index.query import clock
from asr_tasks.inputs import InputError, calendar_day

if TYPE_CHECKING:
    from asr_tasks.audit.reviews import Review
    from asr_tasks.audit.rules import Finding

LISTING_FILTERS = ("status", "rule", "severity", "agent", "team", "assignee")  # what narrows a listing, as typed


def _findings(day: str, settings: Settings) -> list[Finding]:
    """The day's findings as its stored audit holds them (refused where the day was never audited)."""
    from asr_tasks.audit.reports import stored_audit
    from asr_tasks.intake.stores import open_store

    result = stored_audit(day, open_store(settings.storage), settings)
    if result is None:
        raise InputError(f"no audit is stored for {day} (asr audit --date {day} --rerun audits it)")
    return result.findings


def cmd_review(args: argparse.Namespace) -> int:
    from asr_tasks.audit.reviews import Queue, ReviewError, open_reviews, precision, status_of
    from asr_tasks.audit.score_overrides import ScoreOverrides
    from asr_tasks.audit.scores import restate
    from asr_tasks.index.backends import open_index
    from asr_tasks.intake.stores import open_store
    from asr_tasks.records.ledger import open_ledger
    from asr_tasks.audit.rules import SEVERITIES
    from asr_tasks.records.teams import configured_teams

    verdicts = [args.confirm, args.dismiss is not None, args.assign is not None, args.reopen]
    listing = [args.list, args.status is not None, args.rule is not None, args.json, args.severity is not None,
               args.agent is not None, args.team is not None, args.assignee is not None]
    if (args.finding is None) == any(verdicts) or (args.finding is None and args.why is not None) or (
            args.finding is not None and any(listing)):
        raise InputError("--finding ID with one of --confirm, --dismiss REASON, --assign USER, --reopen (and "
                         "--why); or no --finding, to list the day's findings (--status, --rule, --severity, "
                         "--agent, --team, --assignee, --json)")
    settings = get_settings()
    findings, reviews = _findings(args.date, settings), open_reviews(settings)
    if args.finding is None:
        if args.status is not None and args.status not in STATUSES:
            raise InputError(f"--status {args.status!r}: one of {', '.join(STATUSES)}")
        if args.severity is not None and args.severity not in SEVERITIES:
            raise InputError(f"--severity {args.severity!r}: one of {', '.join(SEVERITIES)}")
        teams = configured_teams(settings)
        if args.team is not None and args.team not in {t.id for t in teams.teams}:
            raise InputError(f"--team {args.team!r}: not a team of {settings.audit.teams}")
        held = reviews.of(f.finding_id for f in findings)
        queue = Queue(args.status or "", args.rule or "", args.severity or "", args.agent or "",
                      teams.agents_of(args.team) if args.team else None, args.assignee or "")
        listed = [f for f in findings if queue.lists(f, held)]
        log_access("read", filters={k: getattr(args, k) for k in LISTING_FILTERS}, hits=len(listed),
                   detail=f"the review queue of {args.date}", subjects=[f.recording_id for f in listed])
        if args.json:
            print_json({"findings": [{**f.to_dict(), "status": status_of(f, held),
                                      "review": held[f.finding_id].to_dict() if f.finding_id in held else None}
                                     for f in listed],
                        "rules": precision([f for f in findings if replace(queue, status="").lists(f, held)], held)})
        elif listed:
            print(table(["STATUS", "RULE", "RECORDING", "SPEAKER", "TIME", "FOUND", "FINDING", "BY"],
                        [[status_of(f, held), f.rule_id, f.key, f.speaker, f"{clock(f.start)}-{clock(f.end)}",
                          found(f), f.finding_id, _by(held.get(f.finding_id))]
                         for f in listed]))
        else:
            print(f"{args.date}: no findings" + (f" {args.status}" if args.status else ""))
        return 0
    finding = next((f for f in findings if f.finding_id == args.finding), None)
    if finding is None:
        raise InputError(f"--finding {args.finding!r}: no finding of {args.date} has that id (asr review --date "
                         f"{args.date} lists them)")
    status = "confirmed" if args.confirm else "dismissed" if args.dismiss else "open" if args.reopen else "assigned"
    try:
        review = reviews.review(finding, getpass.getuser(), status, reason=args.dismiss, comment=args.why or "",
                                assignee=args.assign)
    except ReviewError as exc:
        print(f"asr review: {exc}", file=sys.stderr)
        return 2
    restate(args.date, open_store(settings.storage), open_index(settings.index), settings,
            ScoreOverrides(open_ledger(settings.ledger), reviews.access))
    print(f"{review.finding_id} ({review.rule_id}, {finding.key} at {clock(finding.start)}): {review.status}"
          + (f", {review.reason}" if review.reason else "") + (f" to {review.assignee}" if review.assignee else ""))
    return 0


def _by(review: Review | None) -> str:
    """Who reviewed the finding, and to whom they assigned it."""
    if review is None:
        return ""
    return review.reviewer + (f" → {review.assignee}" if review.assignee else "")


def add_commands(sub: Any) -> None:
    p = sub.add_parser("review", help="a day's findings with their reviews; confirm, dismiss or assign one")
    p.add_argument("--date", required=True, action=Checked, check=calendar_day, help="YYYY-MM-DD: the findings' day")
    p.add_argument("--finding", metavar="ID", help="the finding to review (its id, as the listing prints it)")
    verdict = p.add_mutually_exclusive_group()
    verdict.add_argument("--confirm", action="store_true", help="the finding is right")
    verdict.add_argument("--dismiss", metavar="REASON", choices=list(DISMISS_REASONS),
                         help="the finding is wrong, and why: " + "; ".join(f"{k}: {v}" for k, v in
                                                                           DISMISS_REASONS.items()))
    verdict.add_argument("--assign", metavar="USER", help="someone else is to review it")
    verdict.add_argument("--reopen", action="store_true", help="take the verdict back: the finding is open again")
    p.add_argument("--why", metavar="TEXT", help="a comment (kept masked, as everything people type)")
    p.add_argument("--status", help="list only findings of this status: " + ", ".join(STATUSES))
    p.add_argument("--rule", help="list only findings of this rule")
    p.add_argument("--severity", help="list only findings of this severity: low, medium, high, critical")
    p.add_argument("--agent", help="list only findings of this agent's calls")
    p.add_argument("--team", help="list only findings of the calls of this team's agents (audit.teams)")
    p.add_argument("--assignee", metavar="USER", help="list only findings assigned to this user")
    p.add_argument("--json", action="store_true", help="the listing, with each rule's findings by status")
    p.add_argument("--list", action="store_true", help="list the day's findings (what no --finding does)")
    p.set_defaults(func=cmd_review)

