"""Nightly transcription of one day's call recordings.

Thin wiring only: every task calls a function of ``asr_tasks.pipeline``, and
heavy libraries load inside the tasks, never when the scheduler parses this file.
XCom carries recording ids, states and counts, never a key or a sidecar's
field (any Airflow user who may see the DAG can read XCom): each task reads what
it needs from the ledger and the store. Audio and transcripts stay in the
artefact bucket.
"""

from __future__ import annotations

import sys
from datetime import date, datetime
from pathlib import Path
from typing import Any, Sequence

from airflow.sdk import Asset, dag, task, task_group

from asr_tasks.config import TRANSCRIPTS_ASSET_URI, get_settings

PLUGINS = str(Path(__file__).resolve().parent.parent / "plugins")
if PLUGINS not in sys.path:
    sys.path.append(PLUGINS)  # Airflow puts its plugins folder on the path; plain Python (tests, scripts) does not
from airflow_store import task_store  # noqa: E402
from task_defaults import default_args  # noqa: E402
from recordings_sensor import RecordingsReadySensor  # noqa: E402

settings = get_settings()
TRANSCRIPTS = Asset(TRANSCRIPTS_ASSET_URI)


def _pull_all(lazy: Sequence[Any]) -> list[Any]:
    """Materialise a mapped task's results by index (iteration probes one past the end)."""
    return [lazy[i] for i in range(len(lazy))]


def _shard_values(shards: Any) -> list[dict[str, Any]]:
    """What the mapped shard group returned: Airflow hands over no shard as None, one as it is, several lazily."""
    if shards is None:
        return []
    return [shards] if isinstance(shards, dict) else _pull_all(shards)


def _name_shard(ids: list[str]) -> None:
    """Names a shard's task instances in the UI by its first recording's id and its size."""
    from airflow.sdk import get_current_context

    first = ids[0] if ids else "empty"
    get_current_context()["shard_name"] = f"{first} (+{len(ids) - 1})"  # type: ignore[literal-required]


@dag(
    dag_id="transcribe_daily",
    schedule="@daily",
    start_date=datetime.fromisoformat(settings.airflow.dag_start_date),
    catchup=settings.airflow.dag_catchup,
    max_active_runs=settings.airflow.dag_max_active_runs,
    tags=["asr"],
    default_args=default_args(settings.airflow),
    doc_md=__doc__,
)
def transcribe_daily() -> None:
    @task
    def sense(ds: str | None = None) -> list[str]:
        """The ids of the logical date's recordings (each id names one version of one object)."""
        from asr_tasks.pipeline.sense import sense as sense_day

        return [r.recording_id for r in sense_day(task_store(settings.storage), settings, date.fromisoformat(ds))]

    @task
    def plan_shards(recording_ids: list[str]) -> list[list[str]]:
        """Shards of recordings (by count and bytes): each is one preprocessing and one transcription task."""
        from asr_tasks.pipeline.sense import plan_ids

        return plan_ids(recording_ids, settings)

    @task(map_index_template="{{ shard_name }}")
    def preprocess(shard: list[str]) -> list[dict[str, Any]]:
        """Probe, decode per channel, VAD-cut the shard's recordings; bad input is quarantined, not raised."""
        from asr_tasks.pipeline.preprocess import preprocess_shard
        from asr_tasks.pipeline.results import to_xcom
        from asr_tasks.pipeline.sense import recordings_of

        _name_shard(shard)
        store = task_store(settings.storage)
        return to_xcom(preprocess_shard(recordings_of(shard, store, settings), store, settings))

    @task(pool=settings.airflow.gpu_pool, queue=settings.airflow.gpu_queue, map_index_template="{{ shard_name }}")
    def transcribe(results: list[dict[str, Any]]) -> dict[str, float]:
        """One loaded model over the whole shard: a raw transcript per recording."""
        from asr_tasks.pipeline.results import from_xcom, preprocessed
        from asr_tasks.pipeline.transcribe import transcribe_shard

        _name_shard([r["recording_id"] for r in results])
        return transcribe_shard(preprocessed(from_xcom(results)), task_store(settings.storage), settings)

    @task(map_index_template="{{ shard_name }}")
    def gate(results: list[dict[str, Any]]) -> dict[str, Any]:
        """The quality gate over the shard's raw transcripts: a gated transcript per recording, for the index."""
        from asr_tasks.pipeline.gate import gate_shard
        from asr_tasks.pipeline.results import from_xcom

        _name_shard([r["recording_id"] for r in results])
        return {"results": results, "gated": gate_shard(from_xcom(results), task_store(settings.storage), settings)}

    @task_group
    def shard(recordings: list[str]) -> Any:
        """The GPU takes a shard as soon as it is preprocessed, while CPU workers preprocess the next."""
        preprocessed = preprocess(recordings)
        gated = gate(preprocessed)
        transcribe(preprocessed) >> gated
        return gated

    @task(trigger_rule="none_failed", outlets=[TRANSCRIPTS])
    def index(shards: Any, ds: str | None = None, outlet_events: Any = None) -> dict[str, int]:
        """Index transcripts and record quarantines; every sensed recording ends in one state.

        The Asset event names the call date, so the QA audit knows which day is ready.
        """
        from asr_tasks.index.backends import open_index
        from asr_tasks.pipeline.index import index_results
        from asr_tasks.pipeline.results import from_xcom

        rows = [row for shard in _shard_values(shards) for row in shard["results"]]
        counts = index_results(from_xcom(rows), task_store(settings.storage), open_index(settings.index), settings)
        outlet_events[TRANSCRIPTS].extra = {"call_date": ds, **counts}
        return counts

    sensed = sense()
    RecordingsReadySensor(task_id="wait_for_recordings") >> sensed
    index(shard.expand(recordings=plan_shards(sensed)))


transcribe_daily()
