"""What the access log's hash chain costs per logged request, on SQLite and PostgreSQL.

For each backend: ``--rows`` appends through ``AccessLog.append`` (a page's
"play" row with its detail: the head row taken, the last hash read, the row
hashed and inserted), the same rows inserted as they were before the chain (one
INSERT) into a database of their own, the difference per row, four processes
appending at once (rows per second together, and the chain still whole), and
``verify`` over the rows (rows per second). PostgreSQL is a throw-away server,
as the tests start one.

    .venv/bin/python bench/access_log.py [--rows 5000] [--quick] [--json]

``--quick`` appends 200 rows. The JSON's keys: ``rows``, ``sqlite``, ``postgresql``; each backend has
``chained_ms_per_append``, ``plain_ms_per_append``, ``chain_ms_per_append``, ``four_processes_rows_per_s``,
``verify_rows_per_s``, ``intact``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sqlalchemy import insert
from synthetic import parse_args, print_report

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from services import start_postgres, throwaway_database  # noqa: E402

from asr_tasks.records.access_log import AccessLog  # noqa: E402
from asr_tasks.records.ledger import Ledger  # noqa: E402
from asr_tasks.records.tables import access_log  # noqa: E402

QUICK = {"rows": 200}
PROCESSES = 4


def chained(url: str, rows: int, who: str = "auditor") -> float:
    """Seconds for ``rows`` appends through the access log."""
    log = AccessLog(Ledger(url))
    started = time.perf_counter()
    for n in range(rows):
        log.append(who, "play", recording_id=f"{n:032x}", detail=f"redacted rendition, bytes {n}-{n + 65535}")
    return time.perf_counter() - started


def plain(url: str, rows: int) -> float:
    """Seconds for the same rows as one INSERT each, as the log wrote them before the chain."""
    ledger = Ledger(url)
    started = time.perf_counter()
    for n in range(rows):
        with ledger.engine.begin() as db:
            db.execute(insert(access_log).values(at=datetime.now(timezone.utc), user="auditor", action="play",
                                                 recording_id=f"{n:032x}",
                                                 detail=f"redacted rendition, bytes {n}-{n + 65535}"))
    return time.perf_counter() - started


def measure(urls: list[str], rows: int) -> dict[str, Any]:
    """One backend: chained, plain (in a database of its own), four at once, and the check."""
    one, other, shared = urls
    chained_s, plain_s = chained(one, rows), plain(other, rows)
    Ledger(shared)
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=chained, args=(shared, rows // PROCESSES, f"user{p}")) for p in range(PROCESSES)]
    started = time.perf_counter()
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
    together_s = time.perf_counter() - started
    log = AccessLog(Ledger(shared))
    started = time.perf_counter()
    check = log.verify()
    verify_s = time.perf_counter() - started
    return {"chained_ms_per_append": round(1000 * chained_s / rows, 3),
            "plain_ms_per_append": round(1000 * plain_s / rows, 3),
            "chain_ms_per_append": round(1000 * (chained_s - plain_s) / rows, 3),
            "four_processes_rows_per_s": round(check.checked / together_s),
            "verify_rows_per_s": round(check.checked / verify_s), "intact": check.intact}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--json", action="store_true")
    args = parse_args(parser, QUICK)
    report: dict[str, Any] = {"rows": args.rows}
    with tempfile.TemporaryDirectory(prefix="access-log-bench-") as tmp:
        report["sqlite"] = measure([f"sqlite:///{tmp}/{name}.sqlite" for name in ("one", "other", "shared")],
                                   args.rows)
    server = start_postgres()
    try:
        with throwaway_database(server.url, "one") as one, throwaway_database(server.url, "other") as other, \
                throwaway_database(server.url, "shared") as shared:
            report["postgresql"] = measure([one, other, shared], args.rows)
    finally:
        server.stop()
    print_report(report, args.json)


if __name__ == "__main__":
    main()
