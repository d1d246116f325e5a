"""Who searched, played, exported, erased, held or released what, and when.

Rows are appended to ``access_log`` in the ledger's database and never changed:
this module has no path that updates or deletes one, and the database refuses
both (triggers; on PostgreSQL the pipeline's role also lacks the privileges).
Each row is chained to the one before it by its hash (``chain.py``), so what a
database owner changes behind the triggers' back shows in ``verify``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import insert, select, update

from asr_tasks.config import Settings
from asr_tasks.records.ledger import Ledger, as_utc, open_ledger
from asr_tasks.records.chain import GENESIS, Break, first_break, row_hash
from asr_tasks.records.tables import access_log, access_log_head
from asr_tasks.text.masking import configured_policy
from asr_tasks.text.pii import mask_text
from asr_tasks.text.pii_policy import Policy

# "list": a page of many recordings or rows (a day's keys, the holds, the access log itself)
NOTHING = 1 << 62  # an id past any row: a range with no row in it
ACTIONS = ("search", "play", "export", "erase", "hold", "release", "read", "list", "review", "score")


def _masked(value: Any, policy: Policy) -> Any:
    """A filter's value as the policy masks it: text, and each text of a list (the tags asked for)."""
    if isinstance(value, str):
        return mask_text(value, policy)
    if isinstance(value, (list, tuple)):
        return [_masked(v, policy) for v in value]
    return value


def _storable(text: str | None) -> str | None:
    """Text as the database stores and the chain hashes it: what UTF-8 cannot hold (a lone surrogate from a
    mangled command line) as U+FFFD."""
    return None if text is None else text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


@dataclass(frozen=True)
class AccessEntry:
    """One access: who, when, what they did, to which recording or with which query, and what came of it."""

    at: str
    user: str
    action: str
    recording_id: str | None = None
    query: str | None = None
    filters: dict[str, Any] | None = None
    hits: int | None = None
    detail: str | None = None
    id: int | None = None  # the row's place in the chain
    row_hash: str | None = None  # its SHA-256, chained to the row before it

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ChainCheck:
    """What ``verify`` found: the rows checked (from ``first_id``; None: the first), the last row's id and hash,
    and the first break, if any."""

    first_id: int | None
    checked: int
    last_id: int | None
    last_hash: str
    broken: Break | None

    @property
    def intact(self) -> bool:
        return self.broken is None

    def to_dict(self) -> dict[str, Any]:
        return {"first_id": self.first_id, "checked": self.checked, "last_id": self.last_id, "last_hash": self.last_hash,
                "intact": self.intact, "broken": self.broken.to_dict() if self.broken else None}


class AccessLog:
    """The access log of one ledger database; with a PII policy, what people typed is kept masked (a card number
    in the search box or a filter is personal data too). What people type goes in ``query`` and ``filters``
    only: ``detail`` is what the app says of the request (bytes sent, a page's number), never masked, so that
    a byte range is never taken for a card number."""

    def __init__(self, ledger: Ledger, policy: Policy | None = None) -> None:
        self.engine = ledger.engine
        self.policy = policy

    def append(self, user: str, action: str, *, recording_id: str | None = None, query: str | None = None,
               filters: dict[str, Any] | None = None, hits: int | None = None, detail: str | None = None) -> None:
        if action not in ACTIONS:
            raise ValueError(f"unknown access action {action!r} (actions: {', '.join(ACTIONS)})")
        kept = {k: v for k, v in (filters or {}).items() if v is not False and v not in (None, "", ())}  # set ones
        if self.policy is not None:  # what a person typed: the query and the filters (the detail is the app's own)
            query = mask_text(query, self.policy) if query else query
            kept = {k: _masked(v, self.policy) for k, v in kept.items()}
        query, detail = _storable(query), _storable(detail)
        hits = None if hits is None else int(hits)
        filters_text = _storable(json.dumps(kept, ensure_ascii=False, sort_keys=True)) if kept else None
        with self.engine.begin() as db:
            # the head row first: it locks out other appenders until this row is in, chained to the last one
            db.execute(update(access_log_head).where(access_log_head.c.id == 1)
                       .values(appended=access_log_head.c.appended + 1))
            prev = db.execute(select(access_log.c.row_hash).order_by(access_log.c.id.desc()).limit(1)).scalar()
            prev = prev or GENESIS
            at = datetime.now(timezone.utc)
            db.execute(insert(access_log).values(
                at=at, user=user, action=action, recording_id=recording_id, query=query, filters=filters_text,
                hits=hits, detail=detail, prev_hash=prev,
                row_hash=row_hash(prev, at, user, action, recording_id, query, filters_text, hits, detail)))

    def span(self, since: datetime | None, until: datetime | None) -> tuple[int | None, int | None]:
        """The ids of the first row logged from ``since`` and of the last before ``until`` (None: unbounded, or
        no such row)."""
        t = access_log
        first = last = None
        with self.engine.connect() as db:
            if since is not None:
                first = db.execute(select(t.c.id).where(t.c.at >= since).order_by(t.c.id).limit(1)).scalar()
            if until is not None:
                last = db.execute(select(t.c.id).where(t.c.at < until).order_by(t.c.id.desc()).limit(1)).scalar()
        return first, last

    def verify(self, since: datetime | None = None, until: datetime | None = None) -> ChainCheck:
        """Recompute the chain over the rows logged from ``since`` to before ``until`` (all by default)."""
        first, last = self.span(since, until)
        return self.verify_ids(NOTHING if since is not None and first is None else first,
                               -1 if until is not None and last is None else last)

    def verify_ids(self, first: int | None, last: int | None) -> ChainCheck:
        """Recompute the chain over the rows ``first`` to ``last`` (None: from the start, to the end), from the
        stored hash of the row before the first; names the first row that does not match."""
        t = access_log
        with self.engine.connect() as db:
            before = None
            if first is not None:
                before = db.execute(select(t.c.id, t.c.row_hash).where(t.c.id < first).order_by(t.c.id.desc())
                                    .limit(1)).first()
            rows = select(t).order_by(t.c.id)
            if first is not None:
                rows = rows.where(t.c.id >= first)
            if last is not None:
                rows = rows.where(t.c.id <= last)
            stream = db.execution_options(yield_per=5000).execute(rows)
            broken, checked, last_id, last_hash = first_break(
                stream, before.row_hash if before is not None else GENESIS, before.id if before is not None else None)
        return ChainCheck(first, checked, last_id, last_hash, broken)

    def last(self) -> AccessEntry | None:
        """The newest row: what an anchor keeps of the log as it stands."""
        with self.engine.connect() as db:
            row = db.execute(select(access_log.c.id, access_log.c.at, access_log.c.row_hash)
                             .order_by(access_log.c.id.desc()).limit(1)).first()
        return None if row is None else AccessEntry(at=as_utc(row.at).isoformat(timespec="microseconds"), user="",
                                                    action="", id=row.id, row_hash=row.row_hash)

    def entries(self, since: datetime | None = None, until: datetime | None = None, user: str | None = None,
                recording_id: str | None = None, actions: tuple[str, ...] = (),
                limit: int | None = None, newest_first: bool = False, skip: int = 0) -> list[AccessEntry]:
        """Entries in the order they happened (or newest first), filtered; ``limit`` after ``skip`` of them."""
        t = access_log
        order = (t.c.at.desc(), t.c.id.desc()) if newest_first else (t.c.at, t.c.id)
        query = select(t).order_by(*order)
        if since is not None:
            query = query.where(t.c.at >= since)
        if until is not None:
            query = query.where(t.c.at < until)
        if user:
            query = query.where(t.c.user == user)
        if recording_id:
            query = query.where(t.c.recording_id == recording_id)
        if actions:
            query = query.where(t.c.action.in_(actions))
        if limit:
            query = query.limit(limit)
        if skip:
            query = query.offset(skip)
        with self.engine.connect() as db:
            rows = db.execute(query).all()
        return [AccessEntry(at=as_utc(r.at).isoformat(timespec="seconds"), user=r.user, action=r.action,
                            recording_id=r.recording_id, query=r.query,
                            filters=json.loads(r.filters) if r.filters else None, hits=r.hits, detail=r.detail,
                            id=r.id, row_hash=r.row_hash)
                for r in rows]


def open_access_log(settings: Settings) -> AccessLog:
    """The access log as the page and the CLI write it: queries masked by the configured PII policy."""
    return AccessLog(open_ledger(settings.ledger), configured_policy(settings))

