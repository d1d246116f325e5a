"""Who searched, played, exported, erased, held or released what, and when.

Rows are appended to ``access_log`` in the ledger's database and never changed:
this module has no path that updates or deletes one, and the database refuses
both (triggers; on PostgreSQL the pipeline's role also lacks the privileges).
Each row is chained to the one before it by its hash (``chain.py``), so what a
database owner changes behind the triggers' back shows in ``verify``.

What a person typed (``query``, ``filters``) is masked by the PII policy and then
sealed: encrypted (AES-GCM) under a key of the row's own, kept in
``access_log_seal`` beside the log, and linked to the recordings the row concerns
(``access_log_subject``: its own, a search's hits). The chain hashes the sealed
text as stored, so an erasure that destroys the key (``forget``) makes the words
unreadable and leaves every hash as it was. Rows logged before sealing keep their
masked text readable.
"""

from __future__ import annotations

import base64
import json
import os
import pwd
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterable

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from sqlalchemy import delete, func, insert, select, update

from asr_tasks.config import Settings
from asr_tasks.records.ledger import Ledger, as_utc, batches, open_ledger
from asr_tasks.records.chain import GENESIS, Break, Gap, first_break, row_hash
from asr_tasks.records.tables import access_log, access_log_head, access_log_seal, access_log_subject
from asr_tasks.text.masking import configured_policy
from asr_tasks.text.pii import mask_text
from asr_tasks.text.pii_policy import Policy

# "list": a page of many recordings or rows (a day's keys, the holds, the access log itself)
NOTHING = 1 << 62  # an id past any row: a range with no row in it
ACTIONS = ("search", "play", "export", "erase", "hold", "release", "read", "list", "review", "score")
SEALED = "sealed:v1:"  # what sealed text starts with: base64 of the nonce and AES-GCM's output follow
ERASED = "(sealed: the call was erased)"  # what a row shows of its typed text once its key is destroyed
UNOPENED = "(sealed: the key kept does not open it)"  # a key or text changed behind the log's back
NONCE_BYTES = 12


def os_account() -> str:
    """The operating-system account this process runs as, from the kernel's user id: what the command line and
    ``asr ui`` log, and whose erasure tokens they sign. ``getpass.getuser`` would read ``LOGNAME``/``USER``, which
    any caller sets to another name."""
    return pwd.getpwuid(os.geteuid()).pw_name


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


def _seal(text: str | None, key: bytes, column: str) -> str | None:
    """Text encrypted under the row's key, bound to its column (a query's bytes never open as filters)."""
    if text is None:
        return None
    nonce = os.urandom(NONCE_BYTES)
    return SEALED + base64.b64encode(nonce + AESGCM(key).encrypt(nonce, text.encode(), column.encode())).decode()


def _unseal(text: str, key: bytes, column: str) -> str:
    data = base64.b64decode(text[len(SEALED):])
    return AESGCM(key).decrypt(data[:NONCE_BYTES], data[NONCE_BYTES:], column.encode()).decode()


def _opened(query: str | None, filters: str | None, key: bytes | None) -> tuple[str | None, dict[str, Any] | None]:
    """A row's typed text as it can be read: sealed text opened where its key is kept, the ``ERASED`` marker
    where it is not; a row from before sealing as it was stored."""
    if not any(text is not None and text.startswith(SEALED) for text in (query, filters)):
        return query, json.loads(filters) if filters else None
    if key is None:
        return ERASED, None
    try:
        query = None if query is None else _unseal(query, key, "query")
        filters = None if filters is None else _unseal(filters, key, "filters")
    except (InvalidTag, ValueError):
        return UNOPENED, None
    return query, json.loads(filters) if filters else None


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
    the first break, if any, and the gaps in the ids before it (rows removed and the chain computed anew)."""

    first_id: int | None
    checked: int
    last_id: int | None
    last_hash: str
    broken: Break | None
    gaps: list[Gap] = field(default_factory=list)

    @property
    def intact(self) -> bool:
        return self.broken is None and not self.gaps

    def to_dict(self) -> dict[str, Any]:
        return {"first_id": self.first_id, "checked": self.checked, "last_id": self.last_id, "last_hash": self.last_hash,
                "intact": self.intact, "broken": self.broken.to_dict() if self.broken else None,
                "gaps": [gap.to_dict() for gap in self.gaps]}


class AccessLog:
    """The access log of one ledger database; with a PII policy, what people typed is kept masked (a card number
    in the search box or a filter is personal data too). What people type goes in ``query`` and ``filters``
    only: ``detail`` is what the app says of the request (bytes sent, a page's number), never masked, so that
    a byte range is never taken for a card number. What people type is also sealed (see the module)."""

    def __init__(self, ledger: Ledger, policy: Policy | None = None) -> None:
        self.engine = ledger.engine
        self.policy = policy

    def append(self, user: str, action: str, *, recording_id: str | None = None, query: str | None = None,
               filters: dict[str, Any] | None = None, hits: int | None = None, detail: str | None = None,
               subjects: Iterable[str] = ()) -> None:
        """Log one access. A row with typed text has it sealed under a new key and is linked to the recordings
        it concerns: ``recording_id`` and ``subjects`` (a search's hits), so that erasing any of them destroys
        the key. Ids are given in turn from 1, under the head row's lock: a gap is a row removed."""
        if action not in ACTIONS:
            raise ValueError(f"unknown access action {action!r} (actions: {', '.join(ACTIONS)})")
        kept = {k: v for k, v in (filters or {}).items() if v is not False and v not in (None, "", ())}  # set ones
        if self.policy is not None:  # what a person typed: the query and the filters (the detail is the app's own)
            query = mask_text(query, self.policy) if query else query
            kept = {k: _masked(v, self.policy) for k, v in kept.items()}
        query, detail = _storable(query), _storable(detail)
        hits = None if hits is None else int(hits)
        filters_text = _storable(json.dumps(kept, ensure_ascii=False, sort_keys=True)) if kept else None
        key = AESGCM.generate_key(bit_length=256) if query is not None or filters_text is not None else None
        if key is not None:
            query, filters_text = _seal(query, key, "query"), _seal(filters_text, key, "filters")
        links = sorted({r for r in (*subjects, recording_id) if r}) if key is not None else []
        with self.engine.begin() as db:
            # the head row first: it locks out other appenders until this row is in, chained to the last one
            db.execute(update(access_log_head).where(access_log_head.c.id == 1)
                       .values(appended=access_log_head.c.appended + 1))
            last = db.execute(select(access_log.c.id, access_log.c.row_hash)
                              .order_by(access_log.c.id.desc()).limit(1)).first()
            prev, row_id = (last.row_hash, last.id + 1) if last is not None else (GENESIS, 1)
            at = datetime.now(timezone.utc)
            db.execute(insert(access_log).values(
                id=row_id, at=at, user=user, action=action, recording_id=recording_id, query=query,
                filters=filters_text, hits=hits, detail=detail, prev_hash=prev,
                row_hash=row_hash(prev, at, user, action, recording_id, query, filters_text, hits, detail)))
            if key is not None:
                db.execute(insert(access_log_seal).values(row_id=row_id, key=key))
            if links:
                db.execute(insert(access_log_subject), [{"row_id": row_id, "recording_id": r} for r in links])

    def forget(self, recording_ids: Iterable[str]) -> int:
        """Destroy the keys of every row that concerns these recordings (its own recording, or a link to them) and
        the links: their typed text can no longer be read, their hashes and the chain stay as they were. Returns
        the keys destroyed. SQLite overwrites the freed bytes and empties its write-ahead log."""
        ids = sorted(set(recording_ids))
        rows: set[int] = set()
        destroyed = 0
        with self.engine.begin() as db:
            for batch in batches(ids):
                rows.update(db.execute(select(access_log.c.id).where(access_log.c.recording_id.in_(batch))).scalars())
                rows.update(db.execute(select(access_log_subject.c.row_id)
                                       .where(access_log_subject.c.recording_id.in_(batch))).scalars())
            for row_batch in batches(sorted(rows)):
                destroyed += db.execute(delete(access_log_seal).where(access_log_seal.c.row_id.in_(row_batch))).rowcount
            for batch in batches(ids):
                db.execute(delete(access_log_subject).where(access_log_subject.c.recording_id.in_(batch)))
        if self.engine.dialect.name == "sqlite":
            with self.engine.connect() as db:
                db.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        return destroyed

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
            walk = first_break(stream, before.row_hash if before is not None else GENESIS,
                               before.id if before is not None else None)
        return ChainCheck(first, walk.checked, walk.last_id, walk.last_hash, walk.broken, walk.gaps)

    def cut_off(self) -> str | None:
        """What the head row says of rows cut off the log's end: it counts every row appended since it was made, so
        a last id below that count means rows were removed after it (a tripwire: an owner may rewrite it too)."""
        with self.engine.connect() as db:
            appended = db.execute(select(access_log_head.c.appended).where(access_log_head.c.id == 1)).scalar() or 0
            last = db.execute(select(func.max(access_log.c.id))).scalar() or 0
        if appended <= last:
            return None
        return (f"{appended} rows were appended and the last row is row {last}: {appended - last} rows were cut off "
                f"the log's end")

    def count_after(self, row_id: int | None) -> int:
        """The rows after ``row_id`` (None: every row): what no anchor protects yet, when it is the last one's."""
        with self.engine.connect() as db:
            query = select(func.count()).select_from(access_log)
            if row_id is not None:
                query = query.where(access_log.c.id > row_id)
            return int(db.execute(query).scalar() or 0)

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
        seal = access_log_seal
        query = select(t, seal.c.key.label("seal_key")).outerjoin(seal, seal.c.row_id == t.c.id).order_by(*order)
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
                            recording_id=r.recording_id, query=query, filters=filters, hits=r.hits, detail=r.detail,
                            id=r.id, row_hash=r.row_hash)
                for r in rows for query, filters in [_opened(r.query, r.filters, r.seal_key)]]


def open_access_log(settings: Settings) -> AccessLog:
    """The access log as the page and the CLI write it: queries masked by the configured PII policy."""
    return AccessLog(open_ledger(settings.ledger), configured_policy(settings))

