"""Anchors of the access log: the hash of its last row at a moment, kept outside the database, so that rows cut
off its end, or a chain rewritten from some row on, show.

The chain (``chain.py``) shows a row changed or removed in the middle; a database
owner who removes the last rows, or rewrites every hash after an edit, leaves a
chain that holds. An anchor written before that does not: the nightly audit
writes one to the day's QA report and to an object of its own under
``anchors/access-log/`` (retained by MinIO's object lock where it is on), and
``asr access-log --verify`` checks every stored anchor against the rows.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from functools import partial
from typing import Any

from sqlalchemy import select

from asr_tasks.intake.stores import MinioStore, ObjectStore, put_json
from asr_tasks.records.access_log import AccessLog, ChainCheck
from asr_tasks.records.ledger import batches
from asr_tasks.records.locking import RecordLocks
from asr_tasks.records.tables import access_log

PREFIX = "anchors/access-log/"


@dataclass(frozen=True)
class Anchor:
    """The access log's last row when anchored: its id, its time and its hash."""

    id: int
    at: str
    hash: str
    anchored_at: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def write_anchor(access: AccessLog, store: ObjectStore, bucket: str, locks: RecordLocks | None) -> Anchor | None:
    """Anchor the log as it stands (None while it is empty): one object per last row, retained where locking is
    on, and the anchor returned for the day's report."""
    last = access.last()
    if last is None or last.id is None or last.row_hash is None:
        return None
    anchor = Anchor(last.id, last.at, last.row_hash, datetime.now(timezone.utc).isoformat(timespec="seconds"))
    key = f"{PREFIX}{anchor.id:012d}.json"
    put_json(store, bucket, key, anchor.to_dict())
    if locks is not None:
        locks.anchor(bucket, key)
    return anchor


@dataclass
class Kept:
    """The anchors a store holds, every version of each where it keeps versions, and what is wrong with them:
    one that is no anchor, deleted (a delete marker over a retained version) or written over with another."""

    anchors: list[Anchor]
    problems: list[str]


def stored_anchors(store: ObjectStore, bucket: str) -> Kept:
    """Every anchor kept in the artefact bucket, oldest first; on MinIO every version of each, so that a plain
    delete or an overwrite (which a retention does not stop) hides none."""
    if isinstance(store, MinioStore):
        return _versioned(store, bucket)
    kept = Kept([], [])
    for item in store.list_keys(bucket, PREFIX):
        _read(store.get_bytes(bucket, item.key), item.key, kept)
    return kept


def _versioned(store: MinioStore, bucket: str) -> Kept:
    kept = Kept([], [])
    by_key: dict[str, list[Any]] = {}
    for obj in store.versions(bucket, PREFIX, under=True):
        by_key.setdefault(obj.object_name, []).append(obj)
    for key, versions in sorted(by_key.items()):
        if any(v.is_delete_marker for v in versions):
            kept.problems.append(f"anchor {key} was deleted (a delete marker hides it); its versions are read")
        found = {_read(store.call(f"read {bucket}/{key}", partial(_version_bytes, store, bucket, key, v.version_id)),
                       key, kept) for v in versions if not v.is_delete_marker}
        if len(found - {None}) > 1:
            kept.problems.append(f"anchor {key} was written over: its versions name {len(found - {None})} hashes")
    return kept


def _version_bytes(store: MinioStore, bucket: str, key: str, version_id: str | None) -> bytes:
    answer = store.client.get_object(bucket, key, version_id=version_id)
    try:
        return bytes(answer.read())
    finally:
        answer.close()
        answer.release_conn()


def _read(data: bytes, key: str, kept: Kept) -> str | None:
    """One stored anchor into ``kept`` (or a problem naming it); its hash."""
    try:
        anchor = Anchor(**json.loads(data))
        if not isinstance(anchor.id, int) or not isinstance(anchor.hash, str):
            raise TypeError("id or hash of the wrong type")
    except (ValueError, TypeError) as exc:
        kept.problems.append(f"anchor {key} is not an anchor ({exc})")
        return None
    kept.anchors.append(anchor)
    return anchor.hash


def unmatched(access: AccessLog, anchors: list[Anchor]) -> list[str]:
    """What of each anchor the log no longer holds: its row gone, or its row's hash not the anchored one."""
    hashes: dict[int, str | None] = {}
    with access.engine.connect() as db:
        for batch in batches(sorted({a.id for a in anchors})):
            query = select(access_log.c.id, access_log.c.row_hash).where(access_log.c.id.in_(batch))
            hashes.update({row.id: row.row_hash for row in db.execute(query)})
    problems = []
    for a in anchors:
        if a.id not in hashes:
            problems.append(f"row {a.id}, anchored {a.anchored_at} with hash {a.hash[:16]}…, is not in the log: "
                            f"rows were removed from its end")
        elif hashes[a.id] != a.hash:
            problems.append(f"row {a.id} does not carry the hash anchored {a.anchored_at} ({a.hash[:16]}…): the "
                            f"chain was rewritten")
    return problems


@dataclass(frozen=True)
class LogCheck:
    """The chain over the rows checked, the anchors checked with it, and what does not match."""

    chain: ChainCheck
    anchors: int
    problems: list[str]

    @property
    def intact(self) -> bool:
        return self.chain.intact and not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {**self.chain.to_dict(), "anchors": self.anchors, "anchor_problems": self.problems,
                "intact": self.intact}


def check_log(access: AccessLog, kept: Kept, since: datetime | None, until: datetime | None) -> LogCheck:
    """The chain over the days asked, widened to the anchors around them (back to the last anchor at or before
    their first row, on to the first at or after their last; the log's start and end where there is none), so
    that a row of the days removed or rewritten with every hash after it shows; and those anchors checked."""
    first, last = access.span(since, until)
    ids = sorted({a.id for a in kept.anchors})
    start = end = None
    if since is not None:
        start = max((i for i in ids if first is None or i <= first), default=None)
    if until is not None:
        end = min((i for i in ids if i >= (last or 0)), default=None)
    chain = access.verify_ids(start, end)
    checked = [a for a in kept.anchors if (start is None or a.id >= start) and (end is None or a.id <= end)]
    return LogCheck(chain, len(checked), kept.problems + unmatched(access, checked))
