"""A real Airflow scheduler for the benchmarks: what `make standalone` runs, in a throw-away home.

``Standalone`` migrates the metadata database (SQLite), applies the pools, starts
``include/airflow/standalone.py`` (scheduler, DAG processor, triggerer, API
server; LocalExecutor with one worker per core) on free loopback ports, and stops
it whole on exit. ``backfill`` asks it for days through ``asr backfill``, as an
operator would; ``runs`` and ``task_instances`` read what Airflow recorded of
them (its own start, end and queue times).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from asr_tasks.config import PROJECT_ROOT

BIN = Path(sys.executable).parent
SCRIPT = PROJECT_ROOT / "include" / "airflow" / "standalone.py"
DAG_ID = "transcribe_daily"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def airflow_env(tmp: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """Embedded defaults with every file under ``tmp``, an Airflow of its own on free ports, ``extra`` on top."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "ASR_"))}
    env.update({
        "PATH": f"{BIN}:{env.get('PATH', '/usr/bin:/bin')}",
        "AIRFLOW_HOME": str(tmp / "airflow"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(PROJECT_ROOT / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(PROJECT_ROOT / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{tmp / 'airflow' / 'airflow.db'}?timeout=60",
        "AIRFLOW__API__PORT": str(free_port()),
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
        "ASR_STORE_ROOT": str(tmp / "store"),
        "ASR_LEDGER_URL": f"sqlite:///{tmp / 'ledger.sqlite'}",
        "ASR_INDEX_PATH": str(tmp / "index.sqlite"),
        "ASR_WORK_DIR": str(tmp / "work"),
        "ASR_DEVICE_LOCK_DIR": str(tmp / "locks"),
        "ASR_TASK_RETRIES": "0",  # a failure ends the run at once
        "HF_HUB_OFFLINE": "1",
        "PYTHONWARNINGS": "ignore",
        **(extra or {}),
    })
    return env


@dataclass(frozen=True)
class TaskInstance:
    """One task instance as Airflow recorded it; times in seconds from the first run's start."""

    day: str
    task: str
    map_index: int
    state: str
    queued: float
    start: float
    end: float

    @property
    def seconds(self) -> float:
        return self.end - self.start


def by_task(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Task instances summed per task: how many, their seconds, and the highest ``peak_rss_mib`` where measured."""
    tasks: dict[str, dict[str, Any]] = defaultdict(lambda: {"instances": 0, "seconds": 0.0})
    for row in rows:
        entry = tasks[row["task"]]
        entry["instances"] += 1
        entry["seconds"] = round(entry["seconds"] + row["seconds"], 2)
        if "peak_rss_mib" in row:
            entry["peak_rss_mib"] = max(entry.get("peak_rss_mib", 0.0), row["peak_rss_mib"])
    return dict(tasks)


class Standalone:
    """The project's standalone Airflow under ``tmp``, started on entry and stopped whole on exit."""

    def __init__(self, tmp: Path, extra_env: dict[str, str] | None = None) -> None:
        (tmp / "airflow").mkdir(parents=True, exist_ok=True)
        self.tmp = tmp
        self.env = airflow_env(tmp, extra_env)
        self.db = tmp / "airflow" / "airflow.db"
        self.log = tmp / "standalone.log"
        self.server: subprocess.Popen[bytes] | None = None

    def run(self, *args: str, timeout: float = 600) -> str:
        proc = subprocess.run(list(args), env=self.env, cwd=self.tmp, capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(args)} failed:\n{proc.stdout[-2000:]}{proc.stderr[-3000:]}")
        return proc.stdout

    def __enter__(self) -> Standalone:
        self.run(str(BIN / "airflow"), "db", "migrate")
        self.run(str(BIN / "asr"), "pools", "--apply")
        with self.log.open("w") as out:
            self.server = subprocess.Popen([sys.executable, str(SCRIPT)], env=self.env, cwd=self.tmp, stdout=out,
                                           stderr=subprocess.STDOUT, start_new_session=True)
        self._wait_until_healthy()
        self.run(str(BIN / "airflow"), "dags", "reserialize")
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if self.server is None:
            return
        self.server.send_signal(signal.SIGTERM)  # the script stops every part it started
        try:
            self.server.wait(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(self.server.pid, signal.SIGKILL)
            self.server.wait()

    def _wait_until_healthy(self) -> None:
        url = f"http://127.0.0.1:{self.env['AIRFLOW__API__PORT']}/api/v2/monitor/health"
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(url, timeout=5) as answer:
                    health = json.load(answer)
                if all(health[part]["status"] == "healthy" for part in ("scheduler", "dag_processor", "triggerer")):
                    return
            except (OSError, KeyError, ValueError):
                pass
            if self.server is not None and self.server.poll() is not None:
                break
            time.sleep(1)
        raise SystemExit(f"the standalone Airflow did not become healthy:\n{self.log.read_text()[-3000:]}")

    def backfill(self, first: date, last: date, max_active_runs: int) -> float:
        """``asr backfill`` of the days, unpausing the DAG; returns when every run has ended, its wall seconds."""
        started = time.perf_counter()
        self.run(str(BIN / "asr"), "backfill", "--from", first.isoformat(), "--to", last.isoformat(),
                 "--max-active-runs", str(max_active_runs), "--unpause")
        days = (last - first).days + 1
        if (made := len(self.runs(first, last))) != days:  # a day after today gets none
            raise SystemExit(f"asr backfill made {made} runs for the {days} days from {first} to {last}")
        while True:
            states = [state for _, state in self.runs(first, last)]
            if len(states) == days and all(state in ("success", "failed") for state in states) and self._completed():
                break
            if self.server is not None and self.server.poll() is not None:
                raise SystemExit(f"the standalone Airflow stopped:\n{self.log.read_text()[-3000:]}")
            time.sleep(2)
        wall = time.perf_counter() - started
        if failed := [day for day, state in self.runs(first, last) if state != "success"]:
            raise SystemExit(f"{DAG_ID} failed for {', '.join(failed)}: see {self.tmp / 'airflow' / 'logs'}")
        return wall

    def _completed(self) -> bool:
        """Whether the scheduler has closed every backfill (another may start only then)."""
        with sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=60) as conn:
            open_ones = conn.execute("SELECT count(*) FROM backfill WHERE dag_id = ? AND completed_at IS NULL",
                                     (DAG_ID,)).fetchone()[0]
        return int(open_ones) == 0

    def runs(self, first: date, last: date) -> list[tuple[str, str]]:
        """Each backfill run of the DAG from ``first`` to ``last``: its day and state (the scheduler's own run of
        today, once the DAG is unpaused, waits for recordings that never come, and is no part of it)."""
        with sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=60) as conn:
            rows = conn.execute("SELECT logical_date, state FROM dag_run WHERE dag_id = ? AND run_type = 'backfill' "
                                "ORDER BY logical_date", (DAG_ID,)).fetchall()
        days = [(str(day)[:10], str(state)) for day, state in rows]
        return [(day, state) for day, state in days if first.isoformat() <= day <= last.isoformat()]

    def task_instances(self) -> list[TaskInstance]:
        """Every task instance of the DAG's runs, timed from the earliest queue time."""
        with sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=60) as conn:
            rows = conn.execute(
                "SELECT r.logical_date, t.task_id, t.map_index, t.state, t.queued_dttm, t.start_date, t.end_date "
                "FROM task_instance t JOIN dag_run r ON r.run_id = t.run_id AND r.dag_id = t.dag_id "
                "WHERE t.dag_id = ? AND r.run_type = 'backfill'", (DAG_ID,)).fetchall()
        stamps = [_when(q or s) for _, _, _, _, q, s, _ in rows if q or s]
        zero = min(stamps) if stamps else 0.0
        return [TaskInstance(str(day)[:10], task, index, state, _when(queued or start) - zero,
                             _when(start) - zero, _when(end) - zero)
                for day, task, index, state, queued, start, end in rows if start and end]


def _when(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()
