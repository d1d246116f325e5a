"""SQLite files (the embedded index and ledger) in write-ahead-log mode, so readers never block the stages.

Switching a file's journal mode takes its exclusive lock without waiting on the
busy handler: when several processes open a new file at once (the workers of
one day, a task and its retry), the others are told "database is locked" at
once, however long their busy timeout, or the switch quietly does not happen
while another process reads the file (the pragma then answers the old mode).
Both are retried here until the file answers "wal".
"""

from __future__ import annotations

import logging
import sqlite3

from asr_tasks.retry import policy

log = logging.getLogger(__name__)


class NotSwitched(sqlite3.OperationalError):
    """The file kept its old journal mode: another connection held it."""


def _locked(exc: BaseException) -> bool:
    return isinstance(exc, NotSwitched) or isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)


def write_ahead(db: sqlite3.Connection, what: str) -> None:
    """Put the file of ``db`` in WAL mode (a no-op once it is), retrying while another process holds it."""
    for attempt in policy(f"{what}: journal mode WAL", _locked, retries=30, backoff=0.02, max_delay=1.0, logger=log):
        with attempt:
            [mode] = db.execute("PRAGMA journal_mode=WAL").fetchone()
            if mode.lower() != "wal":
                raise NotSwitched(f"the file stayed in journal mode {mode}")
