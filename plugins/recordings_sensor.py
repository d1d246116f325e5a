"""A sensor that holds a day's run until the day's recordings are complete.

What "complete" means is configuration (``ready_check``): a ``_READY`` marker
under the day's prefix (one stat per poke), or a quiet period after the day
ended with no upload under the prefix (one key listing per poke, no per-object
stat or sidecar read). Either costs the same on a day of ten calls or of
100,000. In ``reschedule`` mode the task gives its worker slot back between
pokes, so a backfill waiting on many days holds no workers.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from airflow.sdk import BaseSensorOperator


class RecordingsReadySensor(BaseSensorOperator):
    """Succeeds once the recordings of ``day`` (the logical date by default) are ready to transcribe."""

    template_fields = ("day",)
    ui_color = "#e3f1e6"

    def __init__(self, *, day: str = "{{ ds }}", **kwargs: Any) -> None:
        from asr_tasks.config import get_settings

        settings = get_settings()
        kwargs.setdefault("mode", "reschedule")
        kwargs.setdefault("poke_interval", settings.airflow.sensor_poke_seconds)
        kwargs.setdefault("timeout", settings.airflow.sensor_timeout_seconds)
        super().__init__(**kwargs)
        self.day = day

    def poke(self, context: Any) -> bool:
        from airflow_store import task_store

        from asr_tasks.config import get_settings
        from asr_tasks.intake.days import recordings_ready

        settings = get_settings()
        readiness = recordings_ready(task_store(settings.storage), settings.storage, date.fromisoformat(self.day))
        self.log.info("%s (%s check): %s", self.day, settings.storage.ready_check, readiness.detail)
        return readiness.ready
