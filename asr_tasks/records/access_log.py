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

from asr_tasks.config import Settings
from asr_tasks.records.ledger import Ledger, as_utc, open_ledger
from asr_tasks.records.tables import access_log
from asr_tasks.text.masking import configured_policy
from asr_tasks.text.pii import mask_text
from asr_tasks.text.pii_policy import Policy

# "list": a page of many recordings or rows (a day's keys, the holds, the access log itself)
ACTIONS = ("search", "play", "export", "erase", "hold", "release", "read", "list", "review", "score")


def _masked(value: Any, policy: Policy) -> Any:
    """A filter's value as the policy masks it: text, and each text of a list (the tags asked for)."""
    if isinstance(value, str):
        return mask_text(value, policy)
    if isinstance(value, (list, tuple)):
        return [_masked(v, policy) for v in value]
    return value


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
        with self.engine.begin() as db:
            db.execute(insert(access_log).values(
                at=datetime.now(timezone.utc), user=user, action=action, recording_id=recording_id, query=query,
                filters=json.dumps(kept, ensure_ascii=False, sort_keys=True) if kept else None, hits=hits,
                detail=detail))

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
                            filters=json.loads(r.filters) if r.filters else None, hits=r.hits, detail=r.detail)
                for r in rows]


def open_access_log(settings: Settings) -> AccessLog:
    """The access log as the page and the CLI write it: queries masked by the configured PII policy."""
    return AccessLog(open_ledger(settings.ledger), configured_policy(settings))

