"""The ledger: one row per recording version (bucket, key, ETag) and where it stands.

Stages record their transitions here: ``sensed`` -> ``preprocessed`` ->
``transcribed`` -> one final state (``indexed``, ``needs_review`` or
``quarantined`` with a reason). States only move forward, so a retried or
re-run stage that finds its artefact never sets a finished recording back; a
new model or pipeline version, or a new ETag under the same key, starts the
row over (the older version's row becomes ``superseded``). ``asr status``
reads it. SQLite by default, PostgreSQL in production (``ledger_url``).
"""

from __future__ import annotations

import logging
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    bindparam,
    create_engine,
    event,
    func,
    inspect,
    select,
    text,
    update,
)
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import NullPool
from sqlalchemy.schema import CreateIndex, CreateTable

from asr_tasks.config import PROJECT_ROOT, LedgerSettings
from asr_tasks.models import INDEXED, NEEDS_REVIEW, QUARANTINED, Recording

log = logging.getLogger(__name__)

SENSED = "sensed"
PREPROCESSED = "preprocessed"
TRANSCRIBED = "transcribed"
SUPERSEDED = "superseded"
ERASING = "erasing"  # an erasure began: what the recording left behind is being removed
ERASED = "erased"  # a tombstone: who erased it, when and why; nothing of its content
FINAL_STATES = (INDEXED, NEEDS_REVIEW, QUARANTINED)
GONE_STATES = (ERASING, ERASED)
_RANK = {SENSED: 0, PREPROCESSED: 1, TRANSCRIBED: 2, INDEXED: 3, NEEDS_REVIEW: 3, QUARANTINED: 3}
STAGES = ("preprocess", "transcribe", "index")

metadata = MetaData()
recordings = Table(
    "recording_ledger",
    metadata,
    Column("recording_id", String(64), primary_key=True),
    Column("bucket", String(255), nullable=False),
    Column("key", String(1024), nullable=False),
    Column("etag", String(128), nullable=False),
    Column("call_date", String(10)),
    Column("state", String(20), nullable=False),
    Column("reason", Text),
    Column("model", String(255)),
    Column("pipeline_version", String(32)),
    Column("segments", Integer),
    *(Column(f"{stage}_seconds", Float) for stage in STAGES),
    Column("sensed_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    # added later (``_add_missing_columns``): the sidecar's parties, an erasure's who and when, the audio's size
    Column("agent_id", String(255)),
    Column("customer_id", String(255)),
    Column("erased_by", String(255)),
    Column("erased_at", DateTime(timezone=True)),
    Column("size", BigInteger),  # bytes of the object, from the listing: what is left, before it is decoded
    Column("audio_seconds", Float),  # the recording's length, once preprocessing decoded it
    UniqueConstraint("bucket", "key", "etag", name="recording_ledger_version"),
)
Index("recording_ledger_date_state", recordings.c.call_date, recordings.c.state)
Index("recording_ledger_key", recordings.c.bucket, recordings.c.key)
Index("recording_ledger_customer", recordings.c.customer_id)
Index("recording_ledger_updated", recordings.c.updated_at)  # throughput: what finished in the last hour or day
LATER_COLUMNS = ("agent_id", "customer_id", "erased_by", "erased_at", "size", "audio_seconds")

# Who searched, played, exported, erased, held or released what: appended, never changed (access_log.py).
access_log = Table(
    "access_log",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", DateTime(timezone=True), nullable=False),
    Column("user", String(255), nullable=False),
    Column("action", String(20), nullable=False),
    Column("recording_id", String(64)),
    Column("query", Text),
    Column("filters", Text),
    Column("hits", Integer),
    Column("detail", Text),
)
Index("access_log_at", access_log.c.at)
Index("access_log_user_at", access_log.c.user, access_log.c.at)
Index("access_log_recording", access_log.c.recording_id)

# Legal holds: what no erasure may touch while the hold stands (holds.py).
legal_holds = Table(
    "legal_hold",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("scope", String(20), nullable=False),  # key, agent, customer or dates
    Column("value", String(1024)),
    Column("date_from", String(10)),
    Column("date_to", String(10)),
    Column("why", Text, nullable=False),
    Column("held_by", String(255), nullable=False),
    Column("held_at", DateTime(timezone=True), nullable=False),
    Column("released_by", String(255)),
    Column("released_at", DateTime(timezone=True)),
    Column("release_why", Text),
)


def _now() -> datetime:
    return datetime.now(timezone.utc)


def resolve_url(url: str) -> str:
    """A relative SQLite path is relative to the project root; plain ``postgresql://`` uses psycopg2 (pinned)."""
    parsed = make_url(url)
    if parsed.drivername == "postgresql":
        return parsed.set(drivername="postgresql+psycopg2").render_as_string(hide_password=False)
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
        return url
    path = Path(parsed.database)
    if not path.is_absolute():
        path = PROJECT_ROOT / path
    path.parent.mkdir(parents=True, exist_ok=True)
    return parsed.set(database=str(path)).render_as_string(hide_password=False)


class Ledger:
    """The ledger table in one database; safe to open from many processes at once."""

    def __init__(self, url: str) -> None:
        self.url = resolve_url(url)
        dialect = make_url(self.url).get_backend_name()
        if dialect not in {"sqlite", "postgresql"}:
            raise ValueError(f"ledger_url {url!r}: unsupported database {dialect!r} (supported: sqlite, postgresql)")
        if dialect == "sqlite":
            self.engine: Engine = create_engine(self.url, poolclass=NullPool, connect_args={"timeout": 60})
            event.listen(self.engine, "connect", _sqlite_pragmas)
        else:
            self.engine = create_engine(self.url, pool_pre_ping=True)
        self._create_schema()

    def _create_schema(self) -> None:
        try:
            with self.engine.begin() as db:
                new_log = not inspect(db).has_table(access_log.name)
                for table in metadata.sorted_tables:
                    db.execute(CreateTable(table, if_not_exists=True))
                self._add_missing_columns(db)
                for table in metadata.sorted_tables:
                    for index in table.indexes:
                        db.execute(CreateIndex(index, if_not_exists=True))
                if new_log:
                    self._append_only(db)
        except DBAPIError:
            if not inspect(self.engine).has_table(access_log.name):
                raise  # a race with another process creating it is fine; anything else is not

    @staticmethod
    def _add_missing_columns(db: Any) -> None:
        """Columns added to the ledger table since it was first created, added to a ledger that lacks them."""
        present = {c["name"] for c in inspect(db).get_columns(recordings.name)}
        for name in LATER_COLUMNS:
            if name not in present:
                column = recordings.c[name]
                db.execute(text(f"ALTER TABLE {recordings.name} ADD COLUMN {name} "
                                f"{column.type.compile(dialect=db.dialect)}"))

    def _append_only(self, db: Any) -> None:
        """The access log refuses UPDATE and DELETE (and, on PostgreSQL, TRUNCATE), whoever sends them.

        On PostgreSQL the creating role also gives up its own UPDATE, DELETE and
        TRUNCATE privileges, so the pipeline's role may only INSERT and SELECT.
        """
        message = "the access log is append-only"
        if db.dialect.name == "sqlite":
            for event_name in ("UPDATE", "DELETE"):
                db.execute(text(f"CREATE TRIGGER IF NOT EXISTS access_log_no_{event_name.lower()} BEFORE "
                                f"{event_name} ON access_log BEGIN SELECT RAISE(ABORT, '{message}'); END"))
            return
        db.execute(text("CREATE OR REPLACE FUNCTION access_log_refuse() RETURNS trigger LANGUAGE plpgsql AS "
                        f"$$ BEGIN RAISE EXCEPTION '{message}'; END $$"))
        db.execute(text("CREATE TRIGGER access_log_no_change BEFORE UPDATE OR DELETE ON access_log "
                        "FOR EACH ROW EXECUTE FUNCTION access_log_refuse()"))
        db.execute(text("CREATE TRIGGER access_log_no_truncate BEFORE TRUNCATE ON access_log "
                        "FOR EACH STATEMENT EXECUTE FUNCTION access_log_refuse()"))
        db.execute(text("REVOKE UPDATE, DELETE, TRUNCATE ON access_log FROM CURRENT_USER"))

    def sensed(self, recs: Iterable[Recording], model: str, pipeline_version: str) -> None:
        """Record a day's listing: new versions start as ``sensed``; earlier versions of their keys are superseded.

        A row whose model or pipeline version differs from the current ones starts over
        (a quarantine stands across models: it depends on the file, not on the model).
        An erased version stays erased: its source object, where it was kept, is never
        processed again.
        """
        recs = list(recs)
        if not recs:
            return
        now = _now()
        t = recordings
        rows = [{"recording_id": r.recording_id, "bucket": r.bucket, "key": r.key, "etag": r.etag,
                 "call_date": r.call_date or None, "state": SENSED, "model": model,
                 "pipeline_version": pipeline_version, "sensed_at": now, "updated_at": now,
                 "agent_id": r.agent_id, "customer_id": r.customer_id, "size": r.size} for r in recs]
        restart = (
            update(t)
            .where(t.c.recording_id == bindparam("rid"), t.c.state != ERASING, t.c.state != ERASED)
            .where((t.c.state == SUPERSEDED) | (t.c.pipeline_version != pipeline_version)
                   | ((t.c.model != model) & (t.c.state != QUARANTINED)))
            .values(state=SENSED, reason=None, model=model, pipeline_version=pipeline_version, segments=None,
                    sensed_at=now, updated_at=now, **{f"{s}_seconds": None for s in STAGES})
        )
        supersede = (
            update(t)
            .where(t.c.bucket == bindparam("b"), t.c.key == bindparam("k"), t.c.recording_id != bindparam("rid"),
                   t.c.state != SUPERSEDED, t.c.state != ERASING, t.c.state != ERASED)
            .values(state=SUPERSEDED, reason=bindparam("why"), updated_at=now)
        )
        with self.engine.begin() as db:
            db.execute(self._insert_missing(), rows)
            db.execute(restart, [{"rid": r.recording_id} for r in recs])
            db.execute(supersede, [{"b": r.bucket, "k": r.key, "rid": r.recording_id,
                                    "why": f"replaced by a newer version (ETag {r.etag})"} for r in recs])

    def _insert_missing(self) -> Any:
        from sqlalchemy.dialects import postgresql, sqlite

        dialect = postgresql if self.engine.dialect.name == "postgresql" else sqlite
        return dialect.insert(recordings).on_conflict_do_nothing(index_elements=["recording_id"])

    def advance(
        self,
        recording_id: str,
        state: str,
        *,
        reason: str | None = None,
        stage: str | None = None,
        seconds: float | None = None,
        segments: int | None = None,
        audio_seconds: float | None = None,
    ) -> bool:
        """Move a recording forward to ``state``; False when it is already there or further (or not in the ledger).

        A final state may replace another final state: the index stage records the
        gate's outcome over the one preprocessing gave.
        """
        rank = _RANK[state]
        before = [s for s, r in _RANK.items() if r < rank or (r == rank == 3 and s != state)]
        values: dict[str, Any] = {"state": state, "reason": reason, "updated_at": _now()}
        if stage is not None:
            if stage not in STAGES:
                raise ValueError(f"unknown stage {stage!r} (stages: {', '.join(STAGES)})")
            values[f"{stage}_seconds"] = None if seconds is None else round(seconds, 3)
        if segments is not None:
            values["segments"] = segments
        if audio_seconds is not None:
            values["audio_seconds"] = round(audio_seconds, 3)
        t = recordings
        with self.engine.begin() as db:
            done = db.execute(
                update(t).where(t.c.recording_id == recording_id, t.c.state.in_(before)).values(**values)
            ).rowcount
        return bool(done)

    def erasing(self, recording_ids: list[str], user: str, why: str) -> None:
        """Begin erasing these versions: the tombstone (who, when, why) comes first, so a crash leaves a row that
        says the erasure is unfinished; their content columns are cleared."""
        with self.engine.begin() as db:
            db.execute(update(recordings).where(recordings.c.recording_id.in_(recording_ids),
                                                recordings.c.state.not_in(GONE_STATES))  # a rerun keeps the first
                       .values(state=ERASING, reason=why, erased_by=user, erased_at=_now(), updated_at=_now(),
                               segments=None))

    def erased(self, recording_ids: list[str]) -> None:
        """Everything these versions left behind is gone: the tombstones are final."""
        with self.engine.begin() as db:
            db.execute(update(recordings).where(recordings.c.recording_id.in_(recording_ids),
                                                recordings.c.state == ERASING)
                       .values(state=ERASED, updated_at=_now()))

    def state(self, recording_id: str) -> str | None:
        with self.engine.connect() as db:
            return db.execute(select(recordings.c.state).where(recordings.c.recording_id == recording_id)).scalar()

    def timed(self, recording_id: str, stage: str, seconds: float) -> None:
        """Record a stage's seconds for a recording whose state the stage did not change (a quarantine indexed)."""
        if stage not in STAGES:
            raise ValueError(f"unknown stage {stage!r} (stages: {', '.join(STAGES)})")
        with self.engine.begin() as db:
            db.execute(update(recordings).where(recordings.c.recording_id == recording_id)
                       .values(**{f"{stage}_seconds": round(seconds, 3), "updated_at": _now()}))

    def finished(self, recording_id: str) -> bool:
        """Whether the recording reached a final state and the index stage wrote it into the index view."""
        query = select(recordings.c.state, recordings.c.index_seconds).where(recordings.c.recording_id == recording_id)
        with self.engine.connect() as db:
            row = db.execute(query).first()
        return row is not None and row.state in FINAL_STATES and row.index_seconds is not None

    def known(self, recording_ids: Iterable[str]) -> set[str]:
        """Which of these recording versions the ledger has already seen."""
        ids = list(recording_ids)
        found: set[str] = set()
        with self.engine.connect() as db:
            for start in range(0, len(ids), 500):
                batch = ids[start : start + 500]
                found.update(db.execute(select(recordings.c.recording_id)
                                        .where(recordings.c.recording_id.in_(batch))).scalars())
        return found

    def rows(self, call_date: str | None = None) -> list[dict[str, Any]]:
        """Every recording version (of one day), in key order; times as ISO 8601 text."""
        query = select(recordings).order_by(recordings.c.key, recordings.c.sensed_at)
        if call_date:
            query = query.where(recordings.c.call_date == call_date)
        with self.engine.connect() as db:
            result = [dict(row._mapping) for row in db.execute(query)]
        for row in result:
            for name in ("sensed_at", "updated_at", "erased_at"):
                if row[name] is not None:
                    row[name] = as_utc(row[name]).isoformat(timespec="seconds")
        return result

    def counts(self, call_date: str | None = None) -> dict[str, int]:
        query = select(recordings.c.state, func.count()).group_by(recordings.c.state)
        if call_date:
            query = query.where(recordings.c.call_date == call_date)
        with self.engine.connect() as db:
            return {state: int(n) for state, n in db.execute(query)}


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")  # readers (asr status) never block the stages
    cursor.execute("PRAGMA busy_timeout=60000")
    cursor.close()


def as_utc(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)  # SQLite returns naive UTC


_open: dict[tuple[str, int], Ledger] = {}


def open_ledger(settings: LedgerSettings) -> Ledger:
    """The configured ledger, opened once per process (a forked worker opens its own)."""
    key = (settings.ledger_url, os.getpid())
    if key not in _open:
        _open[key] = Ledger(settings.ledger_url)
    return _open[key]
