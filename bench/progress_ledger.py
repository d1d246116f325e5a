"""How long ``asr progress`` takes over ten years on a PostgreSQL ledger of ten million rows.

Starts a throw-away PostgreSQL server (as the tests do), lets the ledger create
its schema and indexes, fills ``--rows`` rows in the database itself
(``generate_series``: ten years of call dates, mostly indexed, some failed with
a few reasons, some still in flight, lengths and sizes, finishing times over
the last days), runs ANALYZE, then times ``progress()`` by month and by day for
the whole range and ``asr progress --json`` as a user runs it.

    .venv/bin/python bench/progress_ledger.py [--rows 10000000] [--quick] [--json]

``--quick`` fills 20,000 rows over the same ten years. The JSON's keys: ``rows``,
``fill_s``, ``progress_by_month_s``, ``periods_by_month``, ``progress_by_day_s``,
``periods_by_day``, ``asr_progress_cli_s``, ``recordings``, ``failure_groups``,
``eta_hours``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from sqlalchemy import text
from synthetic import parse_args, print_report

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from services import start_postgres  # noqa: E402

from asr_tasks.records.ledger import Ledger  # noqa: E402
from asr_tasks.records.progress import progress  # noqa: E402

QUICK = {"rows": 20_000}
FILL = """
INSERT INTO recording_ledger (recording_id, bucket, key, etag, call_date, state, reason, model, pipeline_version,
                              segments, sensed_at, updated_at, size, audio_seconds, agent_id)
SELECT md5(g::text), 'recordings',
       'calls/' || to_char(day, 'YYYY/MM/DD') || '/call_' || g || '.wav', 'e', to_char(day, 'YYYY-MM-DD'),
       CASE WHEN r < 0.90 THEN 'indexed' WHEN r < 0.94 THEN 'needs_review' WHEN r < 0.96 THEN 'quarantined'
            WHEN r < 0.98 THEN 'preprocessed' ELSE 'sensed' END,
       CASE WHEN r >= 0.90 AND r < 0.94 THEN 'quality gate failed: ' || (ARRAY['speech_rate', 'repetition_loop',
            'confidence_no_speech'])[1 + (g % 3)]
            WHEN r >= 0.94 AND r < 0.96 THEN (ARRAY['not a decodable media file', 'empty file (0 bytes)'])[1 + (g % 2)]
       END,
       'whisper-base-ctranslate2-int8', '2', 40, now() - interval '30 days',
       now() - (g % 864000) * interval '1 second', 100000 + (g % 900) * 16000,
       CASE WHEN r < 0.98 THEN 60 + (g % 900) END, 'AG-' || (g % 500)
FROM (SELECT g, random() AS r, date '2016-01-01' + (g % 3653) AS day FROM generate_series(1, :rows) AS g) AS s
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--json", action="store_true")
    args = parse_args(parser, QUICK)
    server = start_postgres()
    try:
        ledger = Ledger(server.url)
        started = time.perf_counter()
        with ledger.engine.begin() as db:
            db.execute(text(FILL), {"rows": args.rows})
        with ledger.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as db:
            db.execute(text("ANALYZE recording_ledger"))
        fill_s = time.perf_counter() - started
        timings = {}
        for by in ("month", "day"):
            started = time.perf_counter()
            report = progress(ledger, "2016-01-01", "2025-12-31", by)
            timings[f"progress_by_{by}_s"] = round(time.perf_counter() - started, 2)
            timings[f"periods_by_{by}"] = len(report.periods)
        env = {**os.environ, "ASR_LEDGER_URL": server.url}
        started = time.perf_counter()
        subprocess.run([str(Path(sys.executable).parent / "asr"), "progress", "--from", "2016-01-01", "--to",
                        "2025-12-31", "--json"], env=env, check=True, capture_output=True)
        timings["asr_progress_cli_s"] = round(time.perf_counter() - started, 2)
        ledger.engine.dispose()  # PostgreSQL's shutdown waits for open connections, the pool's included
    finally:
        server.stop()
    print_report({"rows": args.rows, "fill_s": round(fill_s, 1), **timings,
                  "recordings": report.recordings, "failure_groups": len(report.failures),
                  "eta_hours": report.eta_hours}, args.json)


if __name__ == "__main__":
    main()
