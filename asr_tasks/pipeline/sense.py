"""The day's recordings, entered in the ledger, and the shards the day's tasks take them in.

Between tasks a recording travels as its id (XCom is readable by every Airflow
user who may see the DAG): the ledger says where the object is and the
sidecar is read again where it is needed (``recordings_of``).
"""

from __future__ import annotations

import logging
from datetime import date, timedelta

from asr_tasks import PIPELINE_VERSION
from asr_tasks.config import AirflowSettings, Settings
from asr_tasks.intake.days import list_recordings, recording_again
from asr_tasks.intake.stores import ObjectStore
from asr_tasks.models import Recording
from asr_tasks.records.access_log import open_access_log
from asr_tasks.records.holds import Holds
from asr_tasks.records.locking import record_locks
from asr_tasks.records.ledger import open_ledger
from asr_tasks.version import model_tag

log = logging.getLogger(__name__)


def sense(store: ObjectStore, settings: Settings, day: date) -> list[Recording]:
    """The day's recordings, and those that arrived late for the ``resense_days`` before it (versions the
    ledger has not seen), each entered in the ledger (a new ETag or model version starts its row over); those
    the ledger keeps from the stages (erased, or kept as they are by a legal hold) are left out."""
    ledger = open_ledger(settings.ledger)
    recordings = list_recordings(store, settings.storage, day)
    late: list[Recording] = []
    for back in range(1, settings.storage.resense_days + 1):
        earlier = list_recordings(store, settings.storage, day - timedelta(days=back))
        seen = ledger.known(r.recording_id for r in earlier)
        if seen:  # that day's own run has sensed it; a day not yet run (a backfill's gap) is left to its run
            late += [r for r in earlier if r.recording_id not in seen]
    holds = Holds(ledger, open_access_log(settings), record_locks(store, settings.storage))
    untouched = holds.sense(recordings + late, model_tag(settings.asr), PIPELINE_VERSION)
    log.info("%s: %d recordings under %s, %d late for earlier days, %d left alone (erased or under a legal hold)",
             day, len(recordings), settings.storage.recordings_prefix, len(late), len(untouched))
    return [r for r in recordings + late if r.recording_id not in untouched]


def plan_shards(recordings: list[Recording], settings: AirflowSettings) -> list[list[Recording]]:
    """The day's recordings in shards of at most ``shard_max_recordings`` and ``shard_max_bytes``, in key order.

    A shard is one preprocessing task (CPU workers) followed by one transcription
    task (GPU pool). Shards are planned from the listing, before any decoding, so
    the GPU starts on the first shard while the CPU workers preprocess the next,
    and a day of thousands of calls is a few dozen task instances, not thousands.
    """
    shards: list[list[Recording]] = []
    size = 0
    for rec in sorted(recordings, key=lambda r: r.key):
        full = bool(shards) and (len(shards[-1]) >= settings.shard_max_recordings
                                 or size + rec.size > settings.shard_max_bytes)
        if not shards or full:
            shards.append([])
            size = 0
        shards[-1].append(rec)
        size += rec.size
    return shards


def recordings_of(recording_ids: list[str], store: ObjectStore, settings: Settings) -> list[Recording]:
    """The recordings these ids name, in their order, as the listing found them (their sidecars read again)."""
    return [recording_again(store, row, settings.storage) for row in open_ledger(settings.ledger).versions(recording_ids)]


def plan_ids(recording_ids: list[str], settings: Settings) -> list[list[str]]:
    """``plan_shards`` by id: the ledger's keys and sizes are all planning needs (no sidecar is read)."""
    rows = open_ledger(settings.ledger).versions(recording_ids)
    listed = [Recording(r["recording_id"], r["bucket"], r["key"], r["etag"], int(r["size"] or 0), "",
                        r["call_date"]) for r in rows]
    return [[rec.recording_id for rec in shard] for shard in plan_shards(listed, settings.airflow)]
