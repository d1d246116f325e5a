"""Airflow's own CLI, as the ``asr`` commands that act on Airflow call it (``asr_tasks`` never imports Airflow)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def command() -> str:
    """The Airflow CLI of this environment (beside this Python), else the one on PATH."""
    airflow = Path(sys.executable).with_name("airflow")
    return str(airflow) if airflow.exists() else "airflow"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    """``airflow ARGS...``, its output captured."""
    return subprocess.run([command(), *args], capture_output=True, text=True)

