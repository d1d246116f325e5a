"""MinIO's object locking on single objects: its legal hold and its retain-until date, on every version.

A bucket made with object locking keeps every version of an object; a version
under a legal hold, or retained until a later date, cannot be deleted through
MinIO's API by anyone (governance mode: except with the bypass permission, which
the product's erasure uses; compliance mode: by nobody, root included, until
the date). What is locked, and until when, is decided by ``records/locking.py``.
"""

from __future__ import annotations

from datetime import datetime
from functools import partial
from typing import Literal

from asr_tasks.intake.stores import LocalStore, MinioStore, ObjectStore

Mode = Literal["governance", "compliance"]


class LockError(RuntimeError):
    """Object locking cannot be done as configured; the message names the bucket or object and why."""


class ObjectLocks:
    """Legal holds and retention on the objects of one MinIO."""

    def __init__(self, store: MinioStore, mode: Mode) -> None:
        self.store, self.client, self.mode = store, store.client, mode
        self._lockable: set[str] = set()

    def require(self, bucket: str) -> None:
        """The bucket locks objects, or a ``LockError`` saying how to make one that does."""
        from minio.error import S3Error

        if bucket in self._lockable:
            return
        try:
            config = self.store.call(f"read the object lock of {bucket}", lambda: self.client.get_object_lock_config(bucket))
        except S3Error as exc:
            if exc.code == "NoSuchBucket":
                self.store.call(f"create bucket {bucket}", lambda: self.client.make_bucket(bucket, object_lock=True))
                self._lockable.add(bucket)
                return
            raise LockError(f"bucket {bucket} has no object lock ({exc.code}): object locking is set when a bucket "
                            f"is made (mc mb --with-lock), so make it anew and copy its objects, or set "
                            f"object_lock: false") from exc
        if config is None:
            raise LockError(f"bucket {bucket} has no object lock")
        self._lockable.add(bucket)

    def _version_ids(self, bucket: str, key: str) -> list[str | None]:
        return [obj.version_id for obj in self.store.versions(bucket, key) if not obj.is_delete_marker]

    def hold(self, bucket: str, key: str, on: bool) -> int:
        """MinIO's legal hold set (or cleared) on every version of the object; returns the versions."""
        self.require(bucket)
        change = self.client.enable_object_legal_hold if on else self.client.disable_object_legal_hold
        versions = self._version_ids(bucket, key)
        for version in versions:
            self.store.call(f"{'set' if on else 'clear'} the legal hold of {bucket}/{key}",
                            partial(change, bucket, key, version))
        return len(versions)

    def held(self, bucket: str, key: str) -> bool:
        """Whether any version of the object is under MinIO's legal hold."""
        return any(self.store.call(f"read the legal hold of {bucket}/{key}",
                                   partial(self.client.is_object_legal_hold_enabled, bucket, key, version))
                   for version in self._version_ids(bucket, key))

    def retain(self, bucket: str, key: str, until: datetime) -> int:
        """Every version of the object retained until ``until`` in the configured mode (a later date already set
        stays: a retention is never shortened); returns the versions whose date was set."""
        from minio.retention import Retention

        self.require(bucket)
        changed = 0
        for version in self._version_ids(bucket, key):
            current = self.retained(bucket, key, version)
            if current is not None and current[1] >= until:
                continue
            self.store.call(f"retain {bucket}/{key}", partial(self.client.set_object_retention, bucket, key,
                                                              Retention(self.mode.upper(), until), version))
            changed += 1
        return changed

    def retained(self, bucket: str, key: str, version: str | None = None) -> tuple[str, datetime] | None:
        """A version's retention (its mode and retain-until date), if it has one."""
        from minio.error import S3Error

        try:
            found = self.store.call(f"read the retention of {bucket}/{key}",
                                    lambda: self.client.get_object_retention(bucket, key, version))
        except S3Error as exc:
            if exc.code in {"NoSuchObjectLockConfiguration", "ObjectLockConfigurationNotFoundError"}:
                return None
            raise
        if found is None or found.retain_until_date is None:
            return None
        return str(found.mode).lower(), found.retain_until_date


def object_locks(store: ObjectStore, enabled: bool, mode: Mode) -> ObjectLocks | None:
    """The store's locks where ``object_lock`` is on; a store that cannot lock says so plainly."""
    if not enabled:
        return None
    if isinstance(store, MinioStore):
        return ObjectLocks(store, mode)
    what = "the local folder store" if isinstance(store, LocalStore) else type(store).__name__
    raise LockError(f"object_lock is on, and {what} cannot lock objects: there is no write-once retention or "
                    f"legal hold on a folder; use store_backend: minio with buckets made with object locking")
