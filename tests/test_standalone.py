"""`make standalone` for real: Airflow's standalone on a free port runs a two-day backfill of the daily DAG,
started with `asr backfill` (which refuses a DAG Airflow does not know yet, and a paused one)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from asr_tasks.config import PROJECT_ROOT

BIN = Path(sys.executable).parent
DAYS = ("2026-11-20", "2026-11-21")


def test_make_standalone_puts_the_venvs_commands_on_path() -> None:
    dry = subprocess.run(["make", "-n", "standalone"], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=60)
    assert dry.returncode == 0, dry.stderr
    assert f'PATH="{PROJECT_ROOT}/.venv/bin:$PATH" .venv/bin/airflow standalone' in dry.stdout


@pytest.mark.e2e
def test_standalone_runs_a_backfill_of_two_days(tmp_path: Path, model_dir: Path, jfk: Path) -> None:
    from services import free_port
    from test_dag import airflow_env

    port = free_port()
    env = {**airflow_env(tmp_path),
           "PATH": f"{BIN}:/usr/bin:/bin",  # what `make standalone` does: its parts are started as `airflow ...`
           "AIRFLOW__API__PORT": str(port), "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://localhost:{port}/execution/"}
    for day in DAYS:
        folder = tmp_path / "store" / "recordings" / "calls" / day.replace("-", "/")
        folder.mkdir(parents=True)
        shutil.copy(jfk, folder / f"call_{day[-2:]}.flac")
    for step in (["airflow", "db", "migrate"], ["asr", "pools", "--apply"]):
        proc = subprocess.run(step, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert proc.returncode == 0, f"{step}: {proc.stderr[-2000:]}"
    backfill = ["asr", "backfill", "--from", DAYS[0], "--to", DAYS[-1], "--max-active-runs", "2"]

    def asr_backfill(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(backfill + list(extra), env=env, capture_output=True, text=True, timeout=300,
                              cwd=tmp_path)

    proc = asr_backfill()
    assert proc.returncode == 2 and "Airflow does not know transcribe_daily" in proc.stderr, proc
    log = (tmp_path / "standalone.log").open("w")
    server = subprocess.Popen(["airflow", "standalone"], env=env, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT,
                              start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v2/monitor/health", timeout=5) as answer:
                    health = json.load(answer)
                if health["scheduler"]["status"] == "healthy" and health["dag_processor"]["status"] == "healthy":
                    break
            except (OSError, KeyError):
                pass
            assert time.monotonic() < deadline and server.poll() is None, (tmp_path / "standalone.log").read_text()[-3000:]
            time.sleep(1)
        proc = subprocess.run(["airflow", "dags", "reserialize"], env=env, capture_output=True, text=True,
                              timeout=300, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-2000:]
        proc = asr_backfill()
        assert proc.returncode == 2 and "transcribe_daily is paused" in proc.stderr and "--unpause" in proc.stderr
        proc = asr_backfill("--dry-run")
        assert proc.returncode == 0 and all(day in proc.stdout for day in DAYS), proc
        proc = asr_backfill("--unpause")
        assert proc.returncode == 0, f"{proc.stdout[-2000:]}{proc.stderr[-2000:]}"
        assert "transcribe_daily unpaused" in proc.stdout and f"asr progress --from {DAYS[0]}" in proc.stdout
        deadline = time.monotonic() + 480
        states: dict[str, str] = {}
        while time.monotonic() < deadline:
            if (tmp_path / "ledger.sqlite").exists():
                with sqlite3.connect(tmp_path / "ledger.sqlite") as conn:
                    states = dict(conn.execute("SELECT call_date, state FROM recording_ledger").fetchall())
            if sorted(states) == list(DAYS) and set(states.values()) == {"indexed"}:
                break
            time.sleep(2)
        assert states == dict.fromkeys(DAYS, "indexed"), (states, (tmp_path / "standalone.log").read_text()[-4000:])
        report = json.loads(subprocess.run(["asr", "progress", "--from", DAYS[0], "--to", DAYS[-1], "--by", "day",
                                            "--json"], env=env, capture_output=True, text=True, timeout=120,
                                           check=True).stdout)
        assert [(p["period"], p["states"]) for p in report["periods"]] == [(d, {"indexed": 1}) for d in DAYS]
        assert report["audio_hours_done"] == pytest.approx(2 * 11.0 / 3600, abs=1e-3)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
        log.close()
