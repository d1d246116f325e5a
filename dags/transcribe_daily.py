"""Nightly transcription of one day's call recordings.

Thin wiring only: every task calls a function of ``asr_tasks.pipeline``, and
heavy libraries load inside the tasks, never when the scheduler parses this file.
XCom carries recording ids, keys and states; audio and transcripts stay in the
artefact bucket.
"""

from __future__ import annotations

import sys
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any, Sequence

from airflow.sdk import Asset, dag, task

from asr_tasks.config import TRANSCRIPTS_ASSET_URI, get_settings

PLUGINS = str(Path(__file__).resolve().parent.parent / "plugins")
if PLUGINS not in sys.path:
    sys.path.append(PLUGINS)  # Airflow puts its plugins folder on the path; plain Python (tests, scripts) does not
from recordings_sensor import RecordingsReadySensor  # noqa: E402

settings = get_settings()
TRANSCRIPTS = Asset(TRANSCRIPTS_ASSET_URI)


def _pull_all(lazy: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Materialise a mapped task's results by index (iteration probes one past the end)."""
    return [lazy[i] for i in range(len(lazy))]


@dag(
    dag_id="transcribe_daily",
    schedule="@daily",
    start_date=datetime.fromisoformat(settings.dag_start_date),
    catchup=settings.dag_catchup,
    max_active_runs=settings.dag_max_active_runs,
    tags=["asr"],
    default_args={
        "retries": settings.task_retries,
        "retry_delay": timedelta(seconds=settings.retry_delay_seconds),
        "retry_exponential_backoff": True,
        "max_retry_delay": timedelta(seconds=settings.max_retry_delay_seconds),
        "queue": settings.default_queue,
    },
    doc_md=__doc__,
)
def transcribe_daily() -> None:
    @task
    def sense(ds: str | None = None) -> list[dict[str, Any]]:
        """The logical date's recordings, each with its version-specific id."""
        from asr_tasks.pipeline import sense as sense_day
        from asr_tasks.storage import open_store

        return [r.to_dict() for r in sense_day(open_store(settings), settings, date.fromisoformat(ds))]

    @task(map_index_template="{{ task.op_kwargs['recording']['key'] }}")
    def preprocess(recording: dict[str, Any]) -> dict[str, Any]:
        """Probe, decode per channel, VAD-cut; bad input is quarantined, not raised."""
        from asr_tasks.models import Recording
        from asr_tasks.pipeline import preprocess as run, to_xcom
        from asr_tasks.storage import open_store

        return to_xcom([run(Recording.from_dict(recording), open_store(settings), settings)])[0]

    @task
    def plan_shards(results: list[dict[str, Any]]) -> list[list[str]]:
        """Shards of about shard_audio_seconds of speech, so each GPU task amortises one model load."""
        from asr_tasks.pipeline import from_xcom, plan_shards as plan

        return plan(from_xcom(_pull_all(results)), settings.shard_audio_seconds)

    @task(pool=settings.gpu_pool, queue=settings.gpu_queue)
    def transcribe(shard: list[str]) -> dict[str, float]:
        from asr_tasks.pipeline import transcribe_shard
        from asr_tasks.storage import open_store

        return transcribe_shard(shard, open_store(settings), settings)

    @task(trigger_rule="none_failed", outlets=[TRANSCRIPTS])
    def index(results: list[dict[str, Any]], ds: str | None = None, outlet_events: Any = None) -> dict[str, int]:
        """Index transcripts and record quarantines; every sensed recording ends in one state.

        The Asset event names the call date, so the QA audit knows which day is ready.
        """
        from asr_tasks.index import open_index
        from asr_tasks.pipeline import from_xcom, index_results
        from asr_tasks.storage import open_store

        counts = index_results(from_xcom(_pull_all(results)), open_store(settings), open_index(settings), settings)
        outlet_events[TRANSCRIPTS].extra = {"call_date": ds, **counts}
        return counts

    sensed = sense()
    RecordingsReadySensor(task_id="wait_for_recordings") >> sensed
    results = preprocess.expand(recording=sensed)
    transcribed = transcribe.expand(shard=plan_shards(results))
    transcribed >> index(results)


transcribe_daily()
