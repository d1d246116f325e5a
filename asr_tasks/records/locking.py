"""A recording's objects locked by the store itself: what the ledger's holds and retention rules decide, MinIO
enforces, so that the bucket's keys alone cannot delete a held or retained call.

With ``object_lock`` on, every object of a recording (its source, its sidecar and
the artefacts of every version) is retained until its retention rule ends (from
its call date) and is under MinIO's legal hold while one of the product's holds
covers it: set when the recording is indexed, when a hold is placed, and cleared
when the last hold covering it is released. An erasure (``erasure.py``) deletes
every version; MinIO refuses it under a legal hold and, in compliance mode,
before the retain-until date.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from typing import Any

from asr_tasks.config import StorageSettings
from asr_tasks.intake.days import sidecar_key
from asr_tasks.intake.locks import ObjectLocks, object_locks
from asr_tasks.intake.stores import ObjectStore
from asr_tasks.version import RecordingVersion

log = logging.getLogger(__name__)


def rule_for(bucket: str, key: str, rules: dict[str, int]) -> tuple[str, int] | None:
    """The rule that decides a key's retention: the longest ``bucket/prefix`` it falls under."""
    matching = [(where, days) for where, days in rules.items() if f"{bucket}/{key}".startswith(where)]
    return max(matching, key=lambda rule: len(rule[0])) if matching else None


def retain_until(row: dict[str, Any], rules: dict[str, int]) -> datetime | None:
    """The end of a recording's retention: the start (UTC) of the day retention erases it (a call of the 1st
    kept 3 days is kept to the end of the 3rd); None where no rule covers it or it has no call date."""
    rule = rule_for(row["bucket"], row["key"], rules)
    if rule is None or not row.get("call_date"):
        return None
    last = date.fromisoformat(row["call_date"]) + timedelta(days=rule[1])
    return datetime.combine(last + timedelta(days=1), time(0), timezone.utc)


@dataclass
class RecordLocks:
    """MinIO's locks on the objects of the ledger's recordings."""

    locks: ObjectLocks
    settings: StorageSettings

    def objects(self, row: dict[str, Any], source: bool = True) -> list[tuple[str, str]]:
        """Every object of a recording: its source and sidecar (where there; not without ``source``) and the
        artefacts of every version."""
        found = [(row["bucket"], key) for key in (row["key"], sidecar_key(row["key"]))
                 if source and self.locks.store.versions(row["bucket"], key)]
        bucket = self.settings.artefacts_bucket
        for version in RecordingVersion.every(row["call_date"], row["recording_id"]):
            found.extend((bucket, item.key) for item in self.locks.store.list_keys(bucket, version.folder))
        return found

    def seal(self, row: dict[str, Any], held: bool) -> int:
        """A recording's objects retained until its rule ends, and under legal hold if ``held``; returns the
        objects."""
        until = retain_until(row, self.settings.retention_days)
        objects = self.objects(row)
        for bucket, key in objects:
            if until is not None:
                self.locks.retain(bucket, key, until)
            if held:
                self.locks.hold(bucket, key, True)
        return len(objects)

    def hold(self, rows: Iterable[dict[str, Any]], on: bool, spare: set[tuple[str, str]] | None = None) -> int:
        """MinIO's legal hold set (or cleared) on every object of the recordings, but the source and sidecar of
        the ``spare`` keys (another version of them still held); returns the objects."""
        count = 0
        for row in rows:
            for bucket, key in self.objects(row, source=(row["bucket"], row["key"]) not in (spare or set())):
                self.locks.hold(bucket, key, on)
                count += 1
        log.info("legal hold %s on %d objects", "set" if on else "cleared", count)
        return count

    def hold_key(self, bucket: str, key: str) -> None:
        """MinIO's legal hold on every version of a source and its sidecar: a new upload under a held key."""
        for name in (key, sidecar_key(key)):
            if self.locks.store.versions(bucket, name):
                self.locks.hold(bucket, name, True)

    def kept(self, row: dict[str, Any]) -> str | None:
        """Why MinIO would refuse to erase the recording now (a legal hold set on it through MinIO itself, a
        compliance retention not ended), or None."""
        now = datetime.now(timezone.utc)
        for bucket, key in self.objects(row):
            if self.locks.held(bucket, key):
                return f"{bucket}/{key} is under a legal hold in the store"
            if self.settings.object_lock_mode == "compliance":
                for obj in self.locks.store.versions(bucket, key):
                    found = None if obj.is_delete_marker else self.locks.retained(bucket, key, obj.version_id)
                    if found is not None and found[0] == "compliance" and found[1] > now:
                        return f"kept under compliance retention until {found[1].date().isoformat()}"
        return None

    def anchor(self, bucket: str, key: str) -> None:
        """An anchor of the access log, retained ``anchor_retention_days`` from now."""
        until = datetime.now(timezone.utc) + timedelta(days=self.settings.anchor_retention_days)
        self.locks.retain(bucket, key, until)


def record_locks(store: ObjectStore, settings: StorageSettings) -> RecordLocks | None:
    """The recordings' locks where ``object_lock`` is on, else None."""
    locks = object_locks(store, settings.object_lock, settings.object_lock_mode)
    return None if locks is None else RecordLocks(locks, settings)
