"""Who searched, played, exported, erased, held or released what, and when.

Rows are appended to ``access_log`` in the ledger's database and never changed:
this module has no path that updates or deletes one, and the database refuses
both (triggers; on PostgreSQL the pipeline's role also lacks the privileges).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import insert, select

from asr_tasks.config import LedgerSettings
from asr_tasks.records.ledger import Ledger, access_log, as_utc, open_ledger

ACTIONS = ("search", "play", "export", "erase", "hold", "release", "read")


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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class AccessLog:
    """The access log of one ledger database."""

    def __init__(self, ledger: Ledger) -> None:
        self.engine = ledger.engine

    def append(self, user: str, action: str, *, recording_id: str | None = None, query: str | None = None,
               filters: dict[str, Any] | None = None, hits: int | None = None, detail: str | None = None) -> None:
        if action not in ACTIONS:
            raise ValueError(f"unknown access action {action!r} (actions: {', '.join(ACTIONS)})")
        kept = {k: v for k, v in (filters or {}).items() if v not in (None, "")}
        with self.engine.begin() as db:
            db.execute(insert(access_log).values(
                at=datetime.now(timezone.utc), user=user, action=action, recording_id=recording_id, query=query,
                filters=json.dumps(kept, ensure_ascii=False, sort_keys=True) if kept else None, hits=hits,
                detail=detail))

    def entries(self, since: datetime | None = None, until: datetime | None = None, user: str | None = None,
                recording_id: str | None = None, actions: tuple[str, ...] = (),
                limit: int | None = None) -> list[AccessEntry]:
        """Entries in the order they happened, filtered."""
        t = access_log
        query = select(t).order_by(t.c.at, t.c.id)
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
        with self.engine.connect() as db:
            rows = db.execute(query).all()
        return [AccessEntry(at=as_utc(r.at).isoformat(timespec="seconds"), user=r.user, action=r.action,
                            recording_id=r.recording_id, query=r.query,
                            filters=json.loads(r.filters) if r.filters else None, hits=r.hits, detail=r.detail)
                for r in rows]


def open_access_log(settings: LedgerSettings) -> AccessLog:
    return AccessLog(open_ledger(settings))

