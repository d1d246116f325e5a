"""Airflow's own CLI, as the ``asr`` commands that act on Airflow call it (``asr_tasks`` never imports Airflow)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from asr_tasks.config import ConfigError


def command() -> str:
    """The Airflow CLI of this environment (beside this Python), else the one on PATH."""
    airflow = Path(sys.executable).with_name("airflow")
    return str(airflow) if airflow.exists() else "airflow"


def run(*args: str, immediate: bool = False) -> subprocess.CompletedProcess[str]:
    """``airflow ARGS...``, its output captured; refused without an ``AIRFLOW_HOME``, where Airflow would make and
    read a home of its own in ``~/airflow`` and know none of the project's DAGs. ``immediate``: through
    ``airflow_immediate``, for a command that writes many rows while Airflow's other processes write SQLite."""
    if not os.environ.get("AIRFLOW_HOME"):
        raise ConfigError("AIRFLOW_HOME is not set, so Airflow would use ~/airflow instead of this project's "
                          "Airflow: set the environment that `make standalone` uses (README, \"Five minutes as an "
                          "operator\") and run it again")
    program = [sys.executable, "-m", "asr_tasks.cli.airflow_immediate"] if immediate else [command()]
    return subprocess.run([*program, *args], capture_output=True, text=True)

