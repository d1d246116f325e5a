"""Imported by the Airflow processes of the Celery test (``[core] hostname_callable``), not by pytest."""

from __future__ import annotations

import os


def hostname() -> str:
    """The name the test gives this process, so two workers on one machine are told apart."""
    return os.environ["CELERY_TEST_HOSTNAME"]
