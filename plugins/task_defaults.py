"""What every task of the project's DAGs shares: its queue, retries with back-off, and a time limit."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from asr_tasks.config import AirflowSettings


def default_args(settings: AirflowSettings) -> dict[str, Any]:
    """A DAG's ``default_args``: a failed task is retried with exponential back-off, a hung one times out."""
    return {
        "queue": settings.default_queue,
        "retries": settings.task_retries,
        "retry_delay": timedelta(seconds=settings.retry_delay_seconds),
        "retry_exponential_backoff": True,
        "max_retry_delay": timedelta(seconds=settings.max_retry_delay_seconds),
        "execution_timeout": timedelta(seconds=settings.task_timeout_seconds),
    }
