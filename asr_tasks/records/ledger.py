"""The ledger: one row per recording version (bucket, key, ETag) and where it stands.

Stages record their transitions here: ``sensed`` -> ``preprocessed`` ->
``transcribed`` -> one final state (``indexed``, ``needs_review`` or
``quarantined`` with a reason). States only move forward, so a retried or
re-run stage that finds its artefact never sets a finished recording back; a
new model or pipeline version, or a new ETag under the same key, starts the
row over (the older version's row becomes ``superseded``), except where a legal
hold covers the row: it stays as it is, and a new ETag waits as ``held``.
``asr status`` reads it. SQLite by default, PostgreSQL in production (``ledger_url``).

The schema is Alembic's (``migrations/``): opening the ledger upgrades its
database to the head revision, with a version table of its own.
"""

from __future__ import annotations

import functools
import logging
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Collection, Iterable, Iterator, Mapping, Sequence, TypeVar

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import (
    Column,
    MetaData,
    String,
    Table,
    bindparam,
    create_engine,
    delete,
    event,
    func,
    inspect,
    select,
    update,
)
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.pool import NullPool

from asr_tasks import PIPELINE_VERSION
from asr_tasks.config import PROJECT_ROOT, LedgerSettings
from asr_tasks.models import Recording
from asr_tasks.records.tables import STAGES, access_log, finding_reviews, recordings, score_overrides
from asr_tasks.states import FINAL_STATES, GONE_STATES, RecordingState
from asr_tasks.wal import write_ahead

log = logging.getLogger(__name__)

ERASED_KEY = "erased/"  # an erased version's key: this and its id, never the key it had


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


T = TypeVar("T")


def batches(items: Sequence[T], size: int = 500) -> Iterator[Sequence[T]]:
    """Ids or keys in batches small enough for one ``IN``."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


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
        upgrade_schema(self.engine)

    def sensed(self, recs: Iterable[Recording], model: str, pipeline_version: str,
               waiting: Mapping[str, str] | None = None, held: Collection[str] = ()) -> set[str]:
        """Record a day's listing: new versions start as ``sensed``; earlier versions of their keys are superseded.
        Returns the erased ones, which the day's stages must leave alone.

        A row whose model or pipeline version differs from the current ones starts over
        (a quarantine stands across models: it depends on the file, not on the model).
        An erased version stays erased: its source object, where it was kept, is never
        processed again. What legal holds keep (``Holds.sense``, which calls this) is
        ``waiting`` (a new version's id -> why it waits as ``held``, its key's current
        version kept) and ``held`` (held versions, not started over).
        """
        recs = list(recs)
        if not recs:
            return set()
        waiting = waiting or {}
        now = _now()
        t = recordings
        gone = self.known((r.recording_id for r in recs), GONE_STATES)  # a tombstone no longer has its key
        rows = [{"recording_id": r.recording_id, "bucket": r.bucket, "key": r.key, "etag": r.etag,
                 "call_date": r.call_date or None, "state": RecordingState.SENSED, "reason": None, "model": model,
                 "pipeline_version": pipeline_version, "sensed_at": now, "updated_at": now,
                 "agent_id": r.agent_id, "customer_id": r.customer_id, "size": r.size} for r in recs]
        for rec, row in zip(recs, rows):
            if rec.recording_id in waiting:
                row.update(state=RecordingState.HELD, reason=waiting[rec.recording_id])
        restart = (
            update(t)
            .where(t.c.recording_id == bindparam("rid"), t.c.state != RecordingState.ERASING, t.c.state != RecordingState.ERASED)
            .where((t.c.state == RecordingState.SUPERSEDED) | (t.c.state == RecordingState.HELD)
                   | (t.c.pipeline_version != pipeline_version)
                   | ((t.c.model != model) & (t.c.state != RecordingState.QUARANTINED)))
            .values(state=RecordingState.SENSED, reason=None, model=model, pipeline_version=pipeline_version, segments=None,
                    sensed_at=now, updated_at=now, **{f"{s}_seconds": None for s in STAGES})
        )
        supersede = (
            update(t)
            .where(t.c.bucket == bindparam("b"), t.c.key == bindparam("k"), t.c.recording_id != bindparam("rid"),
                   t.c.state != RecordingState.SUPERSEDED, t.c.state != RecordingState.ERASING, t.c.state != RecordingState.ERASED)
            .values(state=RecordingState.SUPERSEDED, reason=bindparam("why"), updated_at=now)
        )
        wait = (update(t).where(t.c.recording_id == bindparam("rid"), t.c.state.not_in(GONE_STATES))
                .values(state=RecordingState.HELD, reason=bindparam("why"), updated_at=now))
        current = [r for r in recs if r.recording_id not in waiting]
        restarted = [{"rid": r.recording_id} for r in current if r.recording_id not in held]
        moved = [{"rid": rid, "why": why} for rid, why in waiting.items()]
        with self.engine.begin() as db:
            db.execute(self._insert_missing(), rows)
            if restarted:
                db.execute(restart, restarted)
            if current:
                db.execute(supersede, [{"b": r.bucket, "k": r.key, "rid": r.recording_id,
                                        "why": f"replaced by a newer version (ETag {r.etag})"} for r in current])
            if moved:
                db.execute(wait, moved)
        return gone

    def _insert_missing(self) -> Any:
        from sqlalchemy.dialects import postgresql, sqlite

        dialect = postgresql if self.engine.dialect.name == "postgresql" else sqlite
        return dialect.insert(recordings).on_conflict_do_nothing(index_elements=["recording_id"])

    def advance(
        self,
        recording_id: str,
        state: RecordingState | str,
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
        target = RecordingState(state)
        if target.rank is None:
            raise ValueError(f"{target} is not a step forward of a recording (superseded, held and erasure have their own)")
        before = [s for s in RecordingState
                  if s.rank is not None and (s.rank < target.rank or (s.final and target.final and s != target))]
        values: dict[str, Any] = {"state": target, "reason": reason, "updated_at": _now()}
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

    def erasing(self, recording_ids: list[str], user: str, reason: str) -> None:
        """Begin erasing these versions: the tombstone (who, when, the reason's code) comes first, so a crash
        leaves a row that says the erasure is unfinished, with the key that finishing it needs."""
        with self.engine.begin() as db:
            db.execute(update(recordings).where(recordings.c.recording_id.in_(recording_ids),
                                                recordings.c.state.not_in(GONE_STATES))  # a rerun keeps the first
                       .values(state=RecordingState.ERASING, reason=reason, erased_by=user, erased_at=_now(),
                               updated_at=_now(), segments=None))

    def forget_reviews(self, recording_ids: list[str]) -> None:
        """The reviews of these versions' findings and the answers reviewers gave on their scorecards: gone with
        the findings and scores when they are erased."""
        with self.engine.begin() as db:
            db.execute(delete(finding_reviews).where(finding_reviews.c.recording_id.in_(recording_ids)))
            db.execute(delete(score_overrides).where(score_overrides.c.recording_id.in_(recording_ids)))

    def erased(self, recording_ids: list[str]) -> None:
        """Everything these versions left behind is gone: the tombstones are final, and keep the version's id,
        who, when and the reason's code only. The key, the parties and the call's day go (a key names a
        customer's call); the id still tells a listing of the same object, where the source is kept, that it was
        erased. SQLite overwrites the old row's bytes and empties its write-ahead log."""
        t = recordings
        with self.engine.begin() as db:
            db.execute(update(t).where(t.c.recording_id.in_(recording_ids), t.c.state == RecordingState.ERASING)
                       .values(state=RecordingState.ERASED, key=ERASED_KEY + t.c.recording_id, etag=t.c.recording_id,
                               call_date=None, agent_id=None, customer_id=None, size=None, audio_seconds=None,
                               model=None, pipeline_version=None, **{f"{s}_seconds": None for s in STAGES},
                               updated_at=_now()))
        if self.engine.dialect.name == "sqlite":
            with self.engine.connect() as db:
                db.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")

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

    def known(self, recording_ids: Iterable[str], states: Iterable[str] = ()) -> set[str]:
        """Which of these recording versions the ledger has already seen (in one of ``states``, if given)."""
        ids = list(recording_ids)
        wanted = list(states)
        found: set[str] = set()
        with self.engine.connect() as db:
            for batch in batches(ids):
                query = select(recordings.c.recording_id).where(recordings.c.recording_id.in_(batch))
                if wanted:
                    query = query.where(recordings.c.state.in_(wanted))
                found.update(db.execute(query).scalars())
        return found

    def versions(self, recording_ids: list[str]) -> list[dict[str, Any]]:
        """These recording versions' rows (where each object is: bucket, key, ETag, size, call date), in the
        order asked; ids the ledger does not have are left out."""
        found: dict[str, dict[str, Any]] = {}
        t = recordings
        with self.engine.connect() as db:
            for batch in batches(recording_ids):
                query = select(t.c.recording_id, t.c.bucket, t.c.key, t.c.etag, t.c.size, t.c.call_date,
                               t.c.agent_id, t.c.customer_id).where(
                    t.c.recording_id.in_(batch))
                found.update({row.recording_id: dict(row._mapping) for row in db.execute(query)})
        return [found[rid] for rid in recording_ids if rid in found]

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

    def final_rows(self, call_date: str, model: str, pipeline_version: str = PIPELINE_VERSION) -> list[dict[str, Any]]:
        """A day's recordings that reached a final state with this model and pipeline version, in key order."""
        return [row for row in self.rows(call_date) if row["state"] in FINAL_STATES
                and row["pipeline_version"] == pipeline_version and row["model"] == model]

    def counts(self, call_date: str | None = None) -> dict[str, int]:
        query = select(recordings.c.state, func.count()).group_by(recordings.c.state)
        if call_date:
            query = query.where(recordings.c.call_date == call_date)
        with self.engine.connect() as db:
            return {state: int(n) for state, n in db.execute(query)}


MIGRATIONS = Path(__file__).with_name("migrations")
# Not Airflow's ``alembic_version``: the ledger may share a PostgreSQL database with Airflow's metadata.
VERSION_TABLE = "asr_ledger_version"
_PG_LOCK = 0x6173725F6C656467  # "asr_ledg": the advisory lock key that lets one process at a time upgrade


def _alembic_config(db: Connection | None = None) -> Config:
    """Alembic's settings without an ini file; ``env.py`` migrates ``db``, the ledger's own connection."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS).replace("%", "%%"))
    config.attributes["connection"] = db
    return config


@functools.cache
def _scripts() -> ScriptDirectory:
    """The revisions, read once per process: every open compares the database with their head."""
    return ScriptDirectory.from_config(_alembic_config())


# Alembic's version table, read here directly: its MigrationContext logs two lines each time, on every open.
_version = Table(VERSION_TABLE, MetaData(), Column("version_num", String(32), primary_key=True))


def _revision(db: Connection) -> str | None:
    if not inspect(db).has_table(VERSION_TABLE):
        return None
    return db.execute(select(_version.c.version_num)).scalar()


def _revision_before_alembic(db: Connection) -> str | None:
    """The revision a database the ledger made before it had migrations (tables, no version table) is at.

    Those releases created the tables and added what was missing on every open, so such a database matches one
    revision exactly; each revision is told by what it added. None for a database without the ledger's tables.
    """
    schema = inspect(db)
    if not schema.has_table(recordings.name):
        return None
    if "recording_ledger_updated" in {index["name"] for index in schema.get_indexes(recordings.name)}:
        return "0004"
    if "audio_seconds" in {column["name"] for column in schema.get_columns(recordings.name)}:
        return "0003"
    if schema.has_table(access_log.name):
        return "0002"
    return "0001"


def upgrade_schema(engine: Engine) -> None:
    """Bring the ledger's database to the head revision; at head, only a look at the version table.

    Many workers open the ledger at once: an upgrade runs in one transaction under a lock (an advisory lock on
    PostgreSQL, the write lock on SQLite), so the second one in finds it done, and a failed one leaves nothing
    half-made. A database from before the migrations is stamped with the revision it matches, then upgraded.
    """
    head = _scripts().get_current_head()
    with engine.connect() as db:
        if _revision(db) == head:
            return
    with engine.begin() as db:
        if db.dialect.name == "postgresql":
            db.execute(select(func.pg_advisory_xact_lock(_PG_LOCK)))
        else:
            db.exec_driver_sql("BEGIN IMMEDIATE")  # the write lock now; pysqlite alone would run DDL outside one
        current = _revision(db)
        if current == head:
            return
        if current is None and (found := _revision_before_alembic(db)) is not None:
            log.info("ledger at %s: tables from before its migrations match revision %s", engine.url, found)
            MigrationContext.configure(db, opts={"version_table": VERSION_TABLE}).stamp(_scripts(), found)
        command.upgrade(_alembic_config(db), "head")


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    write_ahead(dbapi_connection, "ledger")  # readers (asr status) never block the stages
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA busy_timeout=60000")
    cursor.execute("PRAGMA secure_delete=ON")  # a tombstone's old key and parties are overwritten, not left free
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

