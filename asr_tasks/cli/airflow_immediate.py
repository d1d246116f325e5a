"""``python -m asr_tasks.cli.airflow_immediate ARGS``: Airflow's CLI with every SQLite transaction begun IMMEDIATE.

Airflow writes SQLite in WAL mode, and pysqlite begins a transaction with a
plain (deferred) ``BEGIN``: the transaction reads first, and its first write
fails at once with "database is locked" when another process (the scheduler,
the DAG processor) committed in between, since a busy timeout cannot help a
reader whose snapshot is stale. ``airflow backfill create`` makes each day's
run in such a transaction, so a year's backfill met the scheduler's commits
within a few hundred days, every time. Begun IMMEDIATE, a transaction takes the
write lock before it reads and waits for it within the database's busy timeout.
This is SQLAlchemy's documented way to own pysqlite's transactions; other
databases and drivers are left as they are. Airflow itself is run as its console
script is, in this process, after the listeners are in place.
"""

from __future__ import annotations

import runpy
import sqlite3
import sys
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

from asr_tasks.cli import airflow_shell


def _driver_leaves_transactions_alone(dbapi_connection: Any, _record: Any) -> None:
    if isinstance(dbapi_connection, sqlite3.Connection):
        dbapi_connection.isolation_level = None  # no implicit BEGIN of pysqlite's own


def _begin_immediate(connection: Connection) -> None:
    if connection.dialect.name == "sqlite" and connection.dialect.driver == "pysqlite":
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def main() -> None:
    event.listen(Engine, "connect", _driver_leaves_transactions_alone)
    event.listen(Engine, "begin", _begin_immediate)
    script = airflow_shell.command()
    sys.argv = [script, *sys.argv[1:]]
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
