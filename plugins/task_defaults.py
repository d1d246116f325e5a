"""What every task of the project's DAGs shares: its queue, retries with back-off, a time limit, its priority."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from asr_tasks.config import AirflowSettings

# The priority weight strategy of plugins/run_priority.py by its import path (Airflow imports plugins by file
# name); named, not imported, so that parsing a DAG does not load the scheduler's side of Airflow.
WEIGHT_RULE = "run_priority.NightlyRunsFirst"


def default_args(settings: AirflowSettings) -> dict[str, Any]:
    """A DAG's ``default_args``: a failed task is retried with exponential back-off, a hung one times out,
    and nightly runs go ahead of backfills."""
    return {
        "queue": settings.default_queue,
        "retries": settings.task_retries,
        "retry_delay": timedelta(seconds=settings.retry_delay_seconds),
        "retry_exponential_backoff": True,
        "max_retry_delay": timedelta(seconds=settings.max_retry_delay_seconds),
        "execution_timeout": timedelta(seconds=settings.task_timeout_seconds),
        "weight_rule": WEIGHT_RULE,
    }
