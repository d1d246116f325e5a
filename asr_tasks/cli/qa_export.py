"""``asr qa-export``: the findings, reviews or scorecard answers of a range of days as CSV or Parquet, for a
bank's BI tools (``audit.qa_exports``); the export is an access-log row under the account that ran it."""

from __future__ import annotations

import argparse
import sys
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from asr_tasks.cli.access import log_access
from asr_tasks.cli.options import Checked
from asr_tasks.config import get_settings
from asr_tasks.inputs import InputError, calendar_day, day_range

MAX_EXPORT_DAYS = 366


def cmd_qa_export(args: argparse.Namespace) -> int:
    from asr_tasks.audit.qa_exports import encode, table_rows
    from asr_tasks.audit.reports import stored_audit
    from asr_tasks.audit.reviews import open_reviews
    from asr_tasks.audit.score_overrides import ScoreOverrides, Scored
    from asr_tasks.audit.scorecards import Scorecard
    from asr_tasks.audit.scores import day_scores
    from asr_tasks.intake.stores import open_store
    from asr_tasks.records.ledger import open_ledger
    from asr_tasks.records.teams import configured_teams

    day_range(args.date_from, args.date_to, "--from", "--to")
    suffix = Path(args.out).suffix.lstrip(".").lower() if args.out else ""
    fmt = args.format or (suffix if suffix in ("csv", "parquet") else "csv")
    if args.out and suffix in ("csv", "parquet") and suffix != fmt:
        raise InputError(f"--format {fmt} into {args.out}: the file's name says {suffix}")
    if fmt == "parquet" and not args.out and sys.stdout.isatty():
        raise InputError("a Parquet file is binary: --out FILE writes it")
    first, last = date.fromisoformat(args.date_from), date.fromisoformat(args.date_to)
    if (last - first).days >= MAX_EXPORT_DAYS:
        raise InputError(f"--from {first} --to {last}: at most {MAX_EXPORT_DAYS} days at once")
    settings = get_settings()
    store, reviews = open_store(settings.storage), open_reviews(settings)
    audits = [a for n in range((last - first).days + 1)
              if (a := stored_audit((first + timedelta(days=n)).isoformat(), store, settings)) is not None]
    findings = [f for a in audits for f in a.findings]
    card: Scorecard | None = None
    scored: list[Scored] = []
    if args.table == "scores":  # as the day's scores stand: dismissed findings and overrides, as the API gives
        overrides = ScoreOverrides(open_ledger(settings.ledger), reviews.access)
        for a in audits:
            card, done = day_scores(a.call_date, store, settings, overrides)
            scored += done
    held = reviews.between(args.date_from, args.date_to) if args.table != "scores" else {}
    rows = table_rows(args.table, findings, held, card, scored, configured_teams(settings))
    data = encode(args.table, rows, fmt)
    log_access("export", hits=len(rows),
               detail=f"QA {args.table} of {first} to {last} as {fmt}, {len(rows)} rows (cli)")
    if args.out:
        Path(args.out).write_bytes(data)
        print(f"{len(rows)} rows of {args.table} ({len(audits)} audited days) to {args.out}", file=sys.stderr)
    else:
        sys.stdout.buffer.write(data)
    return 0


def add_commands(sub: Any) -> None:
    p = sub.add_parser("qa-export", help="findings, reviews or scorecard answers of a range of days as CSV or Parquet")
    p.add_argument("table", choices=["findings", "reviews", "scores"])
    p.add_argument("--from", dest="date_from", required=True, action=Checked, check=calendar_day,
                   help="YYYY-MM-DD: the first day")
    p.add_argument("--to", dest="date_to", required=True, action=Checked, check=calendar_day,
                   help="YYYY-MM-DD: the last day")
    p.add_argument("--format", choices=["csv", "parquet"],
                   help="csv or parquet (default: the --out file's extension, else csv)")
    p.add_argument("--out", metavar="PATH", help="write here (default: standard output)")
    p.set_defaults(func=cmd_qa_export)
