"""``asr progress``: the operator's view of nightly runs and backfills, as a table, JSON, or a live view."""

from __future__ import annotations

import argparse
import time
from datetime import date
from functools import partial
from typing import Any

from rich.console import Group
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table

from asr_tasks.cli.console import print_json, stdout_console
from asr_tasks.cli.options import Checked
from asr_tasks.config import get_settings
from asr_tasks.inputs import calendar_day, day_range, within
from asr_tasks.records.progress import Progress, first_day, progress

MAX_EVERY_SECONDS = 3600.0


def render(report: Progress) -> Group:
    """Periods with a bar each, throughput, the ETA, failures by reason and the days without recordings."""
    periods = Table(title=f"{report.date_from} to {report.date_to}, by {report.by}", title_justify="left")
    for column in ("period", "done", "", "recordings", "states", "audio h done", "audio h left"):
        periods.add_column(column, justify="right" if column not in ("period", "states", "") else "left")
    for p in report.periods:
        left = "?" if p.audio_hours_left is None else f"{p.audio_hours_left:.2f}"
        periods.add_row(p.period, f"{100 * p.share_done:.0f} %", ProgressBar(total=1.0, completed=p.share_done, width=24),
                        str(p.recordings), ", ".join(f"{s} {n}" for s, n in sorted(p.states.items())),
                        f"{p.audio_hours_done:.2f}", left)
    speed = Table(title="throughput", title_justify="left")
    for column in ("window", "recordings", "audio h", "audio h / wall h", "recordings / h"):
        speed.add_column(column, justify="right" if column != "window" else "left")
    for r in report.throughput:
        speed.add_row(r.window, str(r.recordings), f"{r.audio_hours:.2f}", f"{r.audio_hours_per_hour:.2f}",
                      f"{r.recordings_per_hour:.1f}")
    parts: list[Any] = [periods, speed]
    hours_left = report.audio_hours_left
    parts.append(f"left: {'unknown (nothing decoded yet)' if hours_left is None else f'{hours_left:.2f} audio hours'}; "
                 "ETA: "
                 + ("nothing left" if hours_left == 0 else f"{report.eta_hours:.1f} h (about {report.eta_at})"
                    if report.eta_hours is not None else "none (nothing finished in the last day)"))
    if report.failures:
        failed = Table(title="failures by reason", title_justify="left")
        for column in ("state", "count", "reason", "example"):
            failed.add_column(column)
        for f in report.failures:
            failed.add_row(f.state, str(f.count), f.reason, f.example_key)
        parts.append(failed)
    if report.days_without_recordings:
        shown = report.days_without_recordings
        parts.append(f"{len(shown)} days without recordings in the ledger (not run yet, or none uploaded): "
                     + ", ".join(shown[:10]) + (" ..." if len(shown) > 10 else ""))
    if report.message:
        parts.append(report.message)
    return Group(*parts)


def cmd_progress(args: argparse.Namespace) -> int:
    from asr_tasks.records.ledger import open_ledger

    last = args.date_to or date.today().isoformat()
    if args.date_from:  # every day from --from is a row: a range the ledger's first day starts is short enough
        day_range(args.date_from, last, "--from", "--to")
    ledger = open_ledger(get_settings().ledger)
    first = args.date_from or first_day(ledger) or last  # the ledger's first day: ten years are not all missing
    if args.json:
        print_json(progress(ledger, first, last, args.by).to_dict())
        return 0
    console = stdout_console()
    if not args.watch:
        console.print(render(progress(ledger, first, last, args.by)))
        return 0
    with Live(render(progress(ledger, first, last, args.by)), console=console, refresh_per_second=1) as live:
        try:
            while True:
                time.sleep(args.every)
                live.update(render(progress(ledger, first, last, args.by)))
        except KeyboardInterrupt:
            return 0


def add_commands(sub: Any) -> None:
    p = sub.add_parser("progress", help="how far the runs and backfills are: by month or day, throughput, ETA, failures")
    p.add_argument("--from", dest="date_from", action=Checked, check=calendar_day,
                   help="YYYY-MM-DD (default: the ledger's first day)")
    p.add_argument("--to", dest="date_to", action=Checked, check=calendar_day, help="YYYY-MM-DD (default: today)")
    p.add_argument("--by", choices=["month", "day"], default="month")
    p.add_argument("--json", action="store_true")
    p.add_argument("--watch", action="store_true", help="a live view, refreshed every --every seconds (Ctrl-C ends)")
    p.add_argument("--every", type=float, default=5.0, action=Checked,
                   check=partial(within, least=1.0, most=MAX_EVERY_SECONDS), help="seconds between refreshes")
    p.set_defaults(func=cmd_progress)

