"""Archive scale: a day of thousands of calls and a year of days under a real scheduler, and the archive's index.

Three parts, each with its own flag (an empty value leaves a part out):

- ``--day-sizes 1000,10000``: a day of that many short calls for each size, each
  day one run of ``transcribe_daily`` under the scheduler `make standalone` runs
  (LocalExecutor, one worker per core, the DAG's own shard mapping). Every
  ``--spoken-every``-th call is a copy of one of a few spoken calls (2-15 s of
  espeak-ng, 8 kHz), the others copies of a few calls of dead air (a line's
  faint hiss), so that every call passes every stage (sensing, planning,
  preprocessing, transcription, the gate, the index) while the engine's share
  stays small. Per size: the run's wall seconds, each task's seconds (Airflow's
  own records), the engine's own seconds (the ledger's, per recording), the
  preprocessing tasks' seconds (``preprocess_work_s``: the ledger's per call,
  which overlap: a task preprocesses ``preprocess_workers`` calls at a time),
  and ``orchestration_ms_per_recording``: every task's seconds less the
  preprocessing tasks' and the engine's, per call (sensing, planning, XCom, task
  start-up, the model's load, chunk reads, ledger and artefact writes, the gate,
  the index).
  ``growth``: that figure at the largest size over the smallest.
- ``--year-days 365``: that many days of ``--year-calls`` spoken calls each,
  backfilled with ``asr backfill --max-active-runs 4``: the backfill's wall
  seconds, per day, the tasks' and the pipeline's own seconds per day, and what
  ten years of such days take.
- ``--archive-segments 10000000``: ``bench/search.py`` on Elasticsearch at that
  many segments (one node, ``--es-heap``), and on SQLite at
  ``--sqlite-segments``, the size the docs give the embedded default: indexing
  rate, index size per hour of audio (a segment stands for 4 s), and each search's
  p50/p95.

    .venv/bin/python bench/scale.py [--json] [--quick] [--day-sizes 1000,10000] [--spoken-every 20]
                                    [--year-days 365] [--year-calls 2] [--archive-segments 10000000]
                                    [--sqlite-segments 1000000] [--es-heap 2g]

``--quick`` runs days of 4 and 12 calls, a year of 2 days and an SQLite archive
of 5,000 segments (no Elasticsearch). The JSON's keys: ``machine``, ``day``
(per size), ``growth``, ``year``, ``archive``.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import wave
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from scheduler import Standalone, by_task
from synthetic import parse_args, print_report, synthesise

from asr_tasks.config import PROJECT_ROOT

QUICK = {"day_sizes": "4,12", "spoken_every": 4, "year_days": 2, "archive_segments": 0,
         "sqlite_segments": 5_000}
FIRST_DAY = date(2025, 1, 1)  # the sized days, one after another; the year's days end the day before
# (all in the past: Airflow creates no backfill run for a day after today)
SPOKEN_FILES = 6
DEAD_AIR_FILES = 4
RATE = 8000
SEGMENT_SECONDS = 4.0  # what bench/search.py's synthetic segments stand for


def dead_air(folder: Path, count: int) -> list[Path]:
    """Calls where nobody speaks: 3-8 s of ±1 LSB hiss, under BS.1770's absolute gate (no gain) and the VAD's."""
    rng = np.random.default_rng(3)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for n in range(count):
        samples = rng.integers(-1, 2, int(rng.uniform(3.0, 8.0) * RATE)).astype("<i2")
        path = folder / f"air{n}.wav"
        with wave.open(str(path), "wb") as out:
            out.setnchannels(1)
            out.setsampwidth(2)
            out.setframerate(RATE)
            out.writeframes(samples.tobytes())
        paths.append(path)
    return paths


def put_day(store_root: Path, day: date, calls: int, spoken: list[Path], air: list[Path], every: int) -> None:
    """The day's calls in the local store, as a recorder leaves them."""
    from asr_tasks.config import get_settings
    from asr_tasks.intake.days import day_prefix
    from asr_tasks.intake.stores import LocalStore

    settings = get_settings()
    store = LocalStore(store_root)
    prefix = day_prefix(settings.storage, day)
    for n in range(calls):
        source = spoken[(n // every) % len(spoken)] if n % every == 0 else air[n % len(air)]
        store.put_file(settings.storage.recordings_bucket, f"{prefix}call_{n:05d}.wav", source)


def ledger_seconds(ledger: Path, day: date) -> dict[str, float]:
    """The recordings of a day in the ledger, and the seconds each stage's own work took over all of them."""
    with sqlite3.connect(ledger) as conn:
        count, pre, asr, index = conn.execute(
            "SELECT count(*), sum(preprocess_seconds), sum(transcribe_seconds), sum(index_seconds) "
            "FROM recording_ledger WHERE call_date = ?", (day.isoformat(),)).fetchone()
    return {"recordings": count, "preprocess_s": pre or 0.0, "engine_s": asr or 0.0, "index_s": index or 0.0}


def one_day(airflow: Standalone, day: date, calls: int, spoken: list[Path], air: list[Path],
            every: int) -> dict[str, Any]:
    put_day(airflow.tmp / "store", day, calls, spoken, air, every)
    wall = airflow.backfill(day, day, max_active_runs=1)
    instances = [ti for ti in airflow.task_instances() if ti.day == day.isoformat()]
    own = ledger_seconds(airflow.tmp / "ledger.sqlite", day)
    if own["recordings"] != calls:
        raise SystemExit(f"{day}: {calls} calls put, {own['recordings']} in the ledger")
    task_s = sum(ti.seconds for ti in instances)
    preprocess_s = sum(ti.seconds for ti in instances if ti.task == "shard.preprocess")
    orchestration = task_s - preprocess_s - own["engine_s"]
    return {"calls": calls, "spoken": len(range(0, calls, every)), "wall_s": round(wall, 1),
            "task_s": round(task_s, 1), "tasks": by_task({"task": ti.task, "seconds": ti.seconds} for ti in instances), "engine_s": round(own["engine_s"], 1),
            "preprocess_s": round(preprocess_s, 1), "preprocess_ms_per_recording": round(1000 * preprocess_s / calls, 1),
            "preprocess_work_s": round(own["preprocess_s"], 1), "orchestration_s": round(orchestration, 1),
            "orchestration_ms_per_recording": round(1000 * orchestration / calls, 2)}


def year(airflow: Standalone, days: int, calls: int, spoken: list[Path], air: list[Path]) -> dict[str, Any]:
    last = FIRST_DAY - timedelta(days=1)
    first = last - timedelta(days=days - 1)
    for n in range(days):
        put_day(airflow.tmp / "store", first + timedelta(days=n), calls, spoken[n % len(spoken):], air, 1)
    wall = airflow.backfill(first, last, max_active_runs=4)
    instances = [ti for ti in airflow.task_instances() if first.isoformat() <= ti.day <= last.isoformat()]
    own = [ledger_seconds(airflow.tmp / "ledger.sqlite", first + timedelta(days=n)) for n in range(days)]
    work = sum(o["preprocess_s"] + o["engine_s"] + o["index_s"] for o in own)
    task_s = sum(ti.seconds for ti in instances)
    return {"days": days, "calls_per_day": calls, "max_active_runs": 4, "wall_s": round(wall, 1),
            "wall_s_per_day": round(wall / days, 2), "task_instances_per_day": round(len(instances) / days, 1),
            "task_s_per_day": round(task_s / days, 2), "pipeline_work_s_per_day": round(work / days, 2),
            "ten_years_wall_h": round(wall / days * 3652 / 3600, 1)}


def archive(backend: str, segments: int, es_heap: str, tmp: Path) -> dict[str, Any]:
    """bench/search.py at that size, and the index's size per hour of audio."""
    args = [sys.executable, str(PROJECT_ROOT / "bench" / "search.py"), "--backend", backend, "--segments",
            str(segments), "--json"]
    if backend == "sqlite":
        args += ["--index", str(tmp / f"archive-{segments}.sqlite"), "--runs", "20"]
    else:
        args += ["--es-heap", es_heap, "--runs", "20"]
    proc = subprocess.run(args, capture_output=True, text=True, cwd=PROJECT_ROOT)
    if proc.returncode != 0:
        raise SystemExit(f"bench/search.py on {backend} failed:\n{proc.stderr[-3000:]}")
    report: dict[str, Any] = json.loads(proc.stdout[proc.stdout.find("{"):])
    hours = segments * SEGMENT_SECONDS / 3600
    report["audio_hours"] = round(hours, 1)
    report["index_mb_per_audio_hour"] = round(report["index_mb"] / hours, 3)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--day-sizes", default="1000,10000", help="calls in each sized day")
    parser.add_argument("--spoken-every", type=int, default=20, help="every N-th call of a sized day is spoken")
    parser.add_argument("--year-days", type=int, default=365, help="days backfilled (0: none)")
    parser.add_argument("--year-calls", type=int, default=2, help="spoken calls in each of those days")
    parser.add_argument("--archive-segments", type=int, default=10_000_000, help="Elasticsearch's (0: none)")
    parser.add_argument("--sqlite-segments", type=int, default=1_000_000, help="SQLite's (0: none)")
    parser.add_argument("--es-heap", default="2g")
    args = parse_args(parser, QUICK)

    report: dict[str, Any] = {"machine": {"cpus": os.cpu_count(), "load_average_before": os.getloadavg()}}
    sizes = [int(x) for x in args.day_sizes.split(",") if x]
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp_name:
        tmp = Path(tmp_name)
        if sizes or args.year_days:
            (tmp / "spoken").mkdir()
            spoken = [call.path for call in synthesise(tmp / "spoken", minutes=1e9, count=SPOKEN_FILES)]
            air = dead_air(tmp / "air", DEAD_AIR_FILES)
            with Standalone(tmp / "airflow-run") as airflow:
                os.environ.update(airflow.env)  # this process reads the same store and ledger
                days = [one_day(airflow, FIRST_DAY + timedelta(days=n), size, spoken, air, args.spoken_every)
                        for n, size in enumerate(sizes)]
                report["day"] = {str(d["calls"]): d for d in days}
                if len(days) > 1:
                    report["growth"] = round(days[-1]["orchestration_ms_per_recording"]
                                             / days[0]["orchestration_ms_per_recording"], 3)
                if args.year_days:
                    report["year"] = year(airflow, args.year_days, args.year_calls, spoken, air)
        report["archive"] = {}
        if args.archive_segments:
            report["archive"]["elasticsearch"] = archive("elasticsearch", args.archive_segments, args.es_heap, tmp)
        if args.sqlite_segments:
            report["archive"]["sqlite"] = archive("sqlite", args.sqlite_segments, args.es_heap, tmp)
    print_report(report, args.json)


if __name__ == "__main__":
    main()
