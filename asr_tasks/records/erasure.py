"""Erasing recordings: a customer's request, an expired retention period, a mistaken upload.

An erasure takes an object key with every version of it: the ledger rows become
tombstones first (state ``erasing``, who, when, the reason's code), then the index documents,
every artefact (transcripts, PCM, renditions), the day's reports and, where
``erase_source`` is on, the recording and its sidecar are removed, and the
tombstones become ``erased``. Every step may run twice, so a crash halfway and a
rerun leave nothing behind; a key under a legal hold is left alone and the hold
is named. The ledger keeps no content of an erased recording: a final tombstone holds the
version's id, who, when and a reason code (``REASONS``), not the key, parties or day, and
the access log's row names the id and the code (``reasons.py``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select

from asr_tasks.audit.reports import run_audit
from asr_tasks.audit.rules import load_rule_set
from asr_tasks.config import Settings
from asr_tasks.gate.reports import drop_from_reports
from asr_tasks.index.base import TranscriptIndex
from asr_tasks.intake.artefacts import Artefacts
from asr_tasks.intake.days import sidecar_key
from asr_tasks.intake.stores import ObjectStore
from asr_tasks.records.access_log import AccessLog
from asr_tasks.records.holds import Hold, Holds
from asr_tasks.records.ledger import Ledger
from asr_tasks.records.locking import record_locks
from asr_tasks.records.tables import recordings
from asr_tasks.records.reasons import REASONS
from asr_tasks.states import NOT_CURRENT_STATES, RecordingState
from asr_tasks.version import DayReports, RecordingVersion

log = logging.getLogger(__name__)


@dataclass
class ErasureResult:
    """What an erasure did: keys erased now, keys a crash had left half-erased and finished now, keys left alone
    under a hold, and the days whose reports were rewritten."""

    erased: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)
    held: list[tuple[str, str]] = field(default_factory=list)  # (key, the hold that keeps it)
    days: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"erased": self.erased, "finished": self.finished,
                "held": [{"key": k, "hold": h} for k, h in self.held], "days": self.days}


def select_keys(ledger: Ledger, *, key: str | None = None, recording_id: str | None = None,
                customer: str | None = None, before: str | None = None) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Every version (current, superseded, half-erased) of the keys chosen, by bucket and key, not yet erased.

    ``key``: an object key; ``recording_id``: the key of that version; ``customer``: the
    keys of the customer's calls; ``before``: the keys of calls before that date.
    """
    t = recordings
    chosen = select(t.c.bucket, t.c.key).where(t.c.state != RecordingState.ERASED)
    if key:
        chosen = chosen.where(t.c.key == key)
    if recording_id:
        chosen = chosen.where(t.c.recording_id == recording_id)
    if customer:
        chosen = chosen.where(t.c.customer_id == customer)
    if before:
        chosen = chosen.where(t.c.call_date < before)
    if not (key or recording_id or customer or before):
        raise ValueError("an erasure names what it erases: a key, a recording, a customer or a date")
    return versions_of(ledger, chosen.distinct())


def versions_of(ledger: Ledger, keys_query: Any) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """The not yet erased versions of the keys a (bucket, key) query selects, grouped by key."""
    t = recordings
    keys = keys_query.subquery()
    query = (select(t).join(keys, (t.c.bucket == keys.c.bucket) & (t.c.key == keys.c.key))
             .where(t.c.state != RecordingState.ERASED).order_by(t.c.bucket, t.c.key, t.c.sensed_at))
    grouped: dict[tuple[str, str], list[dict[str, Any]]] = {}
    with ledger.engine.connect() as db:
        for row in db.execute(query):
            grouped.setdefault((row.bucket, row.key), []).append(dict(row._mapping))
    return grouped


class Eraser:
    """Erases keys with everything they left behind, and rewrites the reports of the days it touched."""

    def __init__(self, settings: Settings, ledger: Ledger, store: ObjectStore, index: TranscriptIndex,
                 access: AccessLog) -> None:
        self.settings, self.ledger, self.store, self.index, self.access = settings, ledger, store, index, access
        self.locks = record_locks(store, settings.storage)
        self.holds = Holds(ledger, access, self.locks)

    def erase(self, keys: dict[tuple[str, str], list[dict[str, Any]]], reason: str, user: str) -> ErasureResult:
        """Erase the keys for ``reason`` (a code of ``REASONS``), and first finish every erasure a crash cut
        short (whatever it was asked for).

        The tombstones become ``erased`` only once the days' reports are rewritten,
        so a crash at any point leaves ``erasing`` rows that the next erasure finishes.
        """
        if reason not in REASONS:
            raise ValueError(f"an erasure's reason is one of {', '.join(REASONS)}, not {reason!r}")
        result = ErasureResult()
        pending = unfinished(self.ledger)
        active = self.holds.listed()
        gone: list[dict[str, Any]] = []
        for (bucket, key), versions in {**pending, **keys}.items():
            resumed = (bucket, key) in pending
            hold = None if resumed else self._hold(versions, active)  # begun before a hold: finished
            if hold is not None:
                why = hold if isinstance(hold, str) else hold.describe()
                result.held.append((key, why))
                log.info("recording %s: not erased: %s", versions[-1]["recording_id"], why)
                continue
            if not resumed:
                self.ledger.erasing([row["recording_id"] for row in versions], user, reason)
                current = next((r["recording_id"] for r in reversed(versions) if r["state"] not in NOT_CURRENT_STATES),
                               versions[-1]["recording_id"])
                self.access.append(user, "erase", recording_id=current,
                                   detail=f"every version of its key ({len(versions)}): {reason}")
            self._remove(bucket, key, versions)
            (result.finished if resumed else result.erased).append(key)
            gone.extend(versions)
        if gone:
            self.index.purge_deleted()
            self.holds.forget({row["key"] for row in gone}, {row["customer_id"] for row in gone if row["customer_id"]})
        touched: dict[str, set[str]] = {}
        for row in gone:
            touched.setdefault(row["call_date"] or "undated", set()).add(row["recording_id"])
        for day, ids in sorted(touched.items()):
            self._rewrite_reports(day, ids)
            result.days.append(day)
        self.ledger.erased([row["recording_id"] for row in gone])
        return result

    def _hold(self, versions: list[dict[str, Any]], active: list[Hold]) -> Hold | str | None:
        """The hold that keeps the key, or why the store would refuse to erase it (object locking)."""
        hold = next((h for row in versions if (h := self.holds.holding(row, active)) is not None), None)
        if hold is None and self.locks is not None:
            return next((why for row in versions if (why := self.locks.kept(row)) is not None), None)
        return hold

    def _remove(self, bucket: str, key: str, versions: list[dict[str, Any]]) -> None:
        """The key's index documents, the reviews of its findings, every version's artefacts and, with
        ``erase_source``, the recording itself."""
        self.index.delete_recording(bucket, key)
        self.ledger.forget_reviews([row["recording_id"] for row in versions])
        artefacts = self.settings.storage.artefacts_bucket
        for row in versions:
            for version in RecordingVersion.every(row["call_date"], row["recording_id"]):
                for item in list(self.store.list_keys(artefacts, version.folder)):
                    self.store.delete(artefacts, item.key)
        if self.settings.storage.erase_source:
            self.store.delete(bucket, key)
            self.store.delete(bucket, sidecar_key(key))

    def _rewrite_reports(self, day: str, recording_ids: set[str]) -> None:
        """The day's quality reports without the erased recordings, and its QA audit run again without them."""
        artefacts = Artefacts.of(self.store, self.settings)
        drop_from_reports(recording_ids, day, artefacts, self.settings.quality)
        if artefacts.exists(DayReports(day).audit("json")):
            run_audit(day, load_rule_set(self.settings.audit.path("qa_rules_dir")), self.index, self.store,
                      self.settings)


def unfinished(ledger: Ledger) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Keys whose erasure began and did not end (a crash): a rerun finishes them."""
    t = recordings
    return versions_of(ledger, select(t.c.bucket, t.c.key).where(t.c.state == RecordingState.ERASING).distinct())

