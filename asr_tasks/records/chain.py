"""The access log's hash chain: each row carries the SHA-256 of its content and of the row before it, so a row
changed, removed or put in behind the database's back shows, whoever owns the database.

The triggers stop the pipeline's own role; they do not stop a database owner, who
can drop them. A row's hash covers what it says (when, who, what, to which call,
with which query and filters, what came of it) and the previous row's hash: an
edited row no longer matches its own hash, a removed one breaks the link of the
row after it. Ids are given in turn from 1, so a row removed and the chain
computed anew after it still leaves a gap. What the chain cannot show alone,
the last rows cut off or every hash rewritten, the signed anchors show: the hash
of the last row at a moment, kept outside the database (the nightly QA report
and an object of its own, ``anchors.py``).

A row's typed text (``query``, ``filters``) is hashed as stored: sealed
(``access_log.py``), so that destroying its key leaves the chain as it was.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from asr_tasks.records.ledger import as_utc

GENESIS = "0" * 64  # what the first row is chained to


def _utc_text(at: datetime | str) -> str:
    """A row's time as its hash reads it: UTC to the microsecond, whatever the database gave back."""
    when = datetime.fromisoformat(at) if isinstance(at, str) else at
    return as_utc(when).isoformat(timespec="microseconds")


def row_hash(prev_hash: str, at: datetime | str, user: str, action: str, recording_id: str | None,
             query: str | None, filters: str | None, hits: int | None, detail: str | None) -> str:
    """The SHA-256 of a row's content and the hash of the row before it, over one canonical JSON text."""
    content = [prev_hash, _utc_text(at), user, action, recording_id, query, filters, hits, detail]
    return hashlib.sha256(json.dumps(content, ensure_ascii=False, separators=(",", ":")).encode()).hexdigest()


def hash_of(row: Any, prev_hash: str) -> str:
    """The hash a stored ``access_log`` row should carry after ``prev_hash``."""
    return row_hash(prev_hash, row.at, row.user, row.action, row.recording_id, row.query, row.filters, row.hits,
                    row.detail)


@dataclass(frozen=True)
class Break:
    """The first row that does not match: its id, its time as stored, and what does not match."""

    id: int
    at: str
    why: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Gap:
    """Ids missing between two rows (or before the first): rows removed, whatever the chain says after them."""

    after: int | None  # the row before the gap; None: the start of the log
    next: int  # the first row after it
    at: str  # that row's time as stored

    @property
    def missing(self) -> tuple[int, int]:
        return (self.after or 0) + 1, self.next - 1

    def describe(self) -> str:
        low, high = self.missing
        rows = f"row {low} is" if low == high else f"rows {low} to {high} are"
        before = f"row {self.after}" if self.after is not None else "the start of the log"
        return f"{rows} missing between {before} and row {self.next} ({self.at}): removed"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "missing": list(self.missing)}


@dataclass
class Walk:
    """What a walk over rows found: the first break (or None), the rows checked, the last row's id and hash,
    and the gaps in the ids up to the break."""

    broken: Break | None
    checked: int
    last_id: int | None
    last_hash: str
    gaps: list[Gap]


def first_break(rows: Any, prev: str, prev_id: int | None) -> Walk:
    """Walk rows in id order from the hash and id of the row before them (the start of the log: GENESIS and
    None, the first id being 1); stops at the first break."""
    walk = Walk(None, 0, prev_id, prev, [])
    for row in rows:
        if row.id != (prev_id or 0) + 1:
            walk.gaps.append(Gap(prev_id, row.id, _utc_text(row.at)))
        if row.prev_hash != prev:
            before = f"row {prev_id}" if prev_id is not None else "the start of the log"
            walk.broken = Break(row.id, _utc_text(row.at), f"not chained to {before}: a row between them was "
                                                           f"removed or {before} was altered and its hash rewritten")
            return walk
        if hash_of(row, prev) != row.row_hash:
            walk.broken = Break(row.id, _utc_text(row.at), "its content does not match its hash: the row was altered")
            return walk
        prev, prev_id = row.row_hash, row.id
        walk.checked, walk.last_id, walk.last_hash = walk.checked + 1, prev_id, prev
    return walk
