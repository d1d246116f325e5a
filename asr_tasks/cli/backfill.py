"""``asr backfill``: a backfill of the daily DAG that does not sit queued behind a paused DAG.

Airflow creates a backfill's runs whether or not their DAG is paused, runs none
of them while it is, and a DAG starts paused: ten years of runs would wait
without a word. This command asks Airflow (its CLI, as an operator would)
whether ``transcribe_daily`` is paused, refuses to start while it is unless told
to unpause it, creates the backfill, unpauses the DAG only then, and says how to
watch it.

On SQLite (the embedded default) the scheduler and DAG processor write the same
file while Airflow creates the backfill's runs, each in a transaction that reads
before it writes; its first write then fails at once with "database is locked"
whenever another process committed in between (a busy timeout does not apply to a
read upgraded to a write), so a year's backfill never came whole. The creation
therefore runs through ``airflow_immediate``, whose transactions take the write
lock first and wait for it. Should the wait outlast the database's busy timeout,
Airflow removes the half-made backfill and this command creates it again, with
back-off. The DAG stays paused until the backfill is whole: a scheduler that had
begun the runs of a half-made backfill fails on the rows Airflow removes
(``ObjectDeletedError``), and a paused DAG's runs are not begun. While the runs
are made, Airflow's other processes wait for the lock (their heartbeats too:
ten years take about 30 s on two cores, 26 years two minutes), so on SQLite one
backfill makes at most ``SQLITE_MAX_DAYS``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import subprocess
import sys
from datetime import date, datetime, timedelta, timezone
from functools import partial
from typing import Any

from asr_tasks import retry
from asr_tasks.cli import airflow_shell
from asr_tasks.cli.options import Checked
from asr_tasks.inputs import calendar_day, day_range, within

DAG_ID = "transcribe_daily"
MAX_ACTIVE_RUNS = 1000
SQLITE_MAX_DAYS = 3660  # ten years, whose runs hold Airflow's SQLite database about 30 s (docs/production.md)
LOCKED = "database is locked"  # SQLite's SQLITE_BUSY, which Airflow treats as a lock to retry after
_ERROR_LINE = re.compile(r"^[\w.]*(Error|Exception)\b.*:")
_LISTED_RUN = re.compile(r"^\|\s*\d{4}-\d\d-\d\d[ T]", re.MULTILINE)  # a row of Airflow's dry-run table
# what SQLAlchemy prints after a database's error: the statement, its parameters, a link to its docs
_NOISE = ("(Background on this error at:", "[SQL:", "[parameters:")
log = logging.getLogger("asr.backfill")


class AirflowFailed(Exception):
    """An ``airflow`` command that exited non-zero, with what it printed."""

    def __init__(self, proc: subprocess.CompletedProcess[str]) -> None:
        super().__init__(_said(proc))
        self.proc = proc


def _said(proc: subprocess.CompletedProcess[str]) -> str:
    """Airflow's error: the last exception line it printed, else its last line (never SQLAlchemy's statement dump)."""
    lines = [line.strip() for line in (proc.stderr.strip() or proc.stdout.strip()).splitlines()
             if line.strip() and not line.lstrip().startswith(_NOISE)]
    errors = [line for line in lines if _ERROR_LINE.match(line)]
    return (errors or lines or [f"exit {proc.returncode}"])[-1]


def _locked(exc: BaseException) -> bool:
    return isinstance(exc, AirflowFailed) and LOCKED in exc.proc.stdout + exc.proc.stderr


def _create(args: list[str], attempts: int) -> subprocess.CompletedProcess[str]:
    """``airflow backfill create``, again while SQLite reports another process's write in the way."""

    def once() -> subprocess.CompletedProcess[str]:
        proc = airflow_shell.run(*args, immediate=True)
        if proc.returncode != 0:
            raise AirflowFailed(proc)
        return proc

    policy = retry.policy("airflow backfill create", _locked, retries=attempts - 1, backoff=2.0, max_delay=30.0,
                          reason=str, logger=log)
    return policy(once)


def _on_sqlite() -> bool:
    """Whether Airflow's database is SQLite: its connection as the environment sets it, else as Airflow reads it."""
    url = os.environ.get("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN")
    if url is None:
        proc = airflow_shell.run("config", "get-value", "database", "sql_alchemy_conn")
        url = proc.stdout.strip() if proc.returncode == 0 else ""
    return url.startswith("sqlite")


def _details(stdout: str) -> dict[str, Any]:
    """The DAG's row of ``airflow dags details -o json``, which may follow warnings Airflow prints first."""
    table, _ = json.JSONDecoder().raw_decode(stdout[stdout.index("[{"):])
    return dict(table[0])


def cmd_backfill(args: argparse.Namespace) -> int:
    day_range(args.date_from, args.date_to, "--from", "--to")
    first, last = date.fromisoformat(args.date_from), date.fromisoformat(args.date_to)
    days = (last - first).days + 1
    today = datetime.now(timezone.utc).date()  # Airflow's clock: it refuses a backfill that starts after it
    if first > today:
        print(f"asr: nothing to backfill: --from {first} is after today ({today}, UTC); Airflow makes runs only "
              f"for days that have begun", file=sys.stderr)
        return 2
    fitting = _fitting(first, last, args.backwards) if days > SQLITE_MAX_DAYS and _on_sqlite() else None
    if fitting and not args.dry_run:
        print(f"asr: refused, nothing made: {days} days in one backfill on SQLite, where Airflow's scheduler, DAG "
              f"processor and triggerer would wait while its runs are made (about 30 s for ten years on two "
              f"cores). Backfill at most {SQLITE_MAX_DAYS} days at once ({fitting}), "
              f"the next range once that one is done, or move Airflow's database to PostgreSQL "
              f"(docs/production.md, Backfill).", file=sys.stderr)
        return 2
    details = airflow_shell.run("dags", "details", DAG_ID, "-o", "json")
    if details.returncode != 0:
        print(f"asr: Airflow does not know {DAG_ID} (has the DAG processor parsed dags/ yet?): {_said(details)}",
              file=sys.stderr)
        return 2
    paused = str(_details(details.stdout)["is_paused"]).lower() == "true"  # Airflow's CLI prints "True"
    if paused and not args.dry_run and not args.unpause:
        print(f"asr: {DAG_ID} is paused, so the backfill's runs would stay queued. Unpause it (the toggle in "
              f"the UI, or `airflow dags unpause {DAG_ID}`), or run this again with --unpause.", file=sys.stderr)
        return 2
    create = ["backfill", "create", "--dag-id", DAG_ID, "--from-date", args.date_from, "--to-date", args.date_to,
              "--max-active-runs", str(args.max_active_runs), "--reprocess-behavior", args.reprocess]
    create += ["--run-backwards"] if args.backwards else []
    create += ["--dry-run"] if args.dry_run else []
    if not args.dry_run:
        print(f"making the runs of up to {days} days (about 3 s a year on two cores)...", flush=True)
    try:
        proc = _create(create, attempts=args.attempts)
    except AirflowFailed as failed:
        sys.stdout.write(failed.proc.stdout)
        print(f"asr: airflow backfill create failed: {failed}", file=sys.stderr)
        if "AlreadyRunningBackfill" in str(failed):
            print(f"asr: a DAG runs one backfill at a time: wait for it to end (asr progress), or cancel it (the "
                  f"banner on {DAG_ID}'s page in the Airflow UI, or PUT /api/v2/backfills/ID/cancel)",
                  file=sys.stderr)
        return 1
    if args.dry_run:  # the runs it would make, as Airflow lists them; a real one's log is a line per day, left out
        sys.stdout.write(proc.stdout)
        print(_dry_run_summary(proc.stdout, days, paused, args.unpause, fitting))
        return 0
    if paused:  # only now: a scheduler that had taken up the runs of a half-made backfill
        unpaused = airflow_shell.run("dags", "unpause", DAG_ID)  # would fail on the rows Airflow removes
        if unpaused.returncode != 0:
            print(f"asr: the backfill is created, but airflow dags unpause {DAG_ID} failed: {_said(unpaused)}; "
                  f"unpause it in the UI or with `airflow dags unpause {DAG_ID}`", file=sys.stderr)
            return 1
        print(f"{DAG_ID} unpaused")
    print(f"backfill of {DAG_ID} from {args.date_from} to {args.date_to} created; watch it with\n"
          f"  asr progress --from {args.date_from} --to {args.date_to} --watch")
    return 0


def _fitting(first: date, last: date, backwards: bool) -> str:
    """The longest range SQLite takes at once, from the end the backfill starts at."""
    span = timedelta(days=SQLITE_MAX_DAYS - 1)
    return f"--from {last - span} --to {last}" if backwards else f"--from {first} --to {first + span}"


def _dry_run_summary(listed: str, days: int, paused: bool, unpause: bool, fitting: str | None) -> str:
    """After Airflow's list, what it counts and what the real command would refuse or do, the refusals first."""
    runs = len(_LISTED_RUN.findall(listed))
    said = [f"dry run, nothing made: Airflow would make {runs} runs for the {days} days asked for"
            + (f" (the other {days - runs} have not begun yet or have a run already)" if runs < days else "")]
    if fitting:  # the range SQLite takes at once, where the range asked for is longer
        said.append(f"the real command is refused on SQLite, at most {SQLITE_MAX_DAYS} days at once ({fitting})")
    if paused:
        said.append(f"the real command unpauses {DAG_ID} once its runs are made" if unpause
                    else f"without --unpause the real command is refused: {DAG_ID} is paused")
    return "; ".join(said)


def add_commands(sub: Any) -> None:
    p = sub.add_parser("backfill", help=f"start a backfill of {DAG_ID} (refuses a paused DAG unless --unpause)")
    p.add_argument("--from", dest="date_from", action=Checked, check=calendar_day, required=True,
                   help="YYYY-MM-DD, the first day")
    p.add_argument("--to", dest="date_to", action=Checked, check=calendar_day, required=True,
                   help="YYYY-MM-DD, the last day")
    p.add_argument("--max-active-runs", type=int, default=8, action=Checked,
                   check=partial(within, least=1, most=MAX_ACTIVE_RUNS), help="days in flight at once (default 8)")
    p.add_argument("--backwards", action="store_true", help="newest day first")
    p.add_argument("--reprocess", choices=["none", "failed", "completed"], default="none",
                   help="days that already have a run: skip them (none), redo failed ones, or redo all")
    p.add_argument("--unpause", action="store_true", help=f"unpause {DAG_ID} first if it is paused")
    p.add_argument("--dry-run", action="store_true", help="list the runs it would create, create nothing")
    p.add_argument("--attempts", type=int, default=6, action=Checked, check=partial(within, least=1, most=100),
                   help=f"tries while the Airflow database answers '{LOCKED}' (default 6, about a minute)")
    p.set_defaults(func=cmd_backfill)

