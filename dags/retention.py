"""Daily retention: erase the recordings whose retention period (``retention_days``) ended, except those on hold.

One task: it first finishes any erasure a crash cut short, then erases in
bounded batches (``retention_batch`` keys), each batch done before the next is
chosen, so a retry after a crash goes on where the last one stopped. Heavy
libraries load inside the task, never when the scheduler parses this file.
"""

from __future__ import annotations

import sys
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any

from airflow.sdk import dag, task

from asr_tasks.config import get_settings

PLUGINS = str(Path(__file__).resolve().parent.parent / "plugins")
if PLUGINS not in sys.path:
    sys.path.append(PLUGINS)  # Airflow puts its plugins folder on the path; plain Python (tests, scripts) does not
from airflow_store import task_store  # noqa: E402
from task_defaults import default_args  # noqa: E402

settings = get_settings()


@dag(
    dag_id="retention",
    schedule="@daily",
    start_date=datetime.fromisoformat(settings.airflow.dag_start_date),
    catchup=False,
    max_active_runs=1,
    tags=["asr", "retention"],
    default_args=default_args(settings.airflow),
    doc_md=__doc__,
)
def retention() -> None:
    @task
    def erase_expired(ds: str | None = None) -> dict[str, Any]:
        """Erase what expired by the logical date, never by a later day than today: whoever may trigger a run
        with a date in the future may not erase early. Returns how many were erased, held and finished."""
        from asr_tasks.records.access_log import AccessLog
        from asr_tasks.index.backends import open_index
        from asr_tasks.records.ledger import open_ledger
        from asr_tasks.records.retention import run_retention

        ledger = open_ledger(settings.ledger)
        today = min(date.fromisoformat(str(ds)), datetime.now(timezone.utc).date())
        return run_retention(settings, today, ledger, task_store(settings.storage),
                             open_index(settings.index), AccessLog(ledger)).to_dict()

    erase_expired()


retention()
