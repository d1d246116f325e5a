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

from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import select

from asr_tasks.intake.stores import ObjectStore, get_json, put_json
from asr_tasks.records.access_log import AccessLog
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


def stored_anchors(store: ObjectStore, bucket: str) -> list[Anchor]:
    """Every anchor kept in the artefact bucket, oldest first."""
    return [Anchor(**get_json(store, bucket, item.key)) for item in store.list_keys(bucket, PREFIX)]


def unmatched(access: AccessLog, anchors: list[Anchor]) -> list[str]:
    """What of each anchor the log no longer holds: its row gone, or its row's hash not the anchored one."""
    hashes: dict[int, str | None] = {}
    with access.engine.connect() as db:
        ids = sorted({a.id for a in anchors})
        for start in range(0, len(ids), 500):
            query = select(access_log.c.id, access_log.c.row_hash).where(access_log.c.id.in_(ids[start:start + 500]))
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
