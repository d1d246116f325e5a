"""The ledger on SQLite and on PostgreSQL (a throw-away server started by the tests), its migrations, and
``asr status``."""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from services import throwaway_database
from sqlalchemy import (
    Column,
    DateTime,
    Engine,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    create_engine,
    event,
    insert,
    inspect,
    text,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from asr_tasks.config import PROJECT_ROOT
from asr_tasks.models import Recording, recording_id_for
from asr_tasks.records.access_log import AccessLog
from asr_tasks.records.holds import Holds
from asr_tasks.records.ledger import MIGRATIONS, VERSION_TABLE, Ledger, resolve_url
from asr_tasks.records.tables import metadata

DAY = "2026-11-27"


def rec(name: str, etag: str = "e1", day: str = DAY, bucket: str = "recordings") -> Recording:
    key = f"calls/{day.replace('-', '/')}/{name}"
    return Recording(recording_id_for(bucket, key, etag), bucket, key, etag, 100, name.split(".")[0], day)


@pytest.fixture(scope="module")
def postgres_url(postgres_server: str) -> Iterator[str]:
    """A database of its own on the test server, dropped afterwards."""
    with throwaway_database(postgres_server, "asr_ledger") as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    base = request.getfixturevalue("postgres_url")
    ledger = Ledger(base)
    with ledger.engine.begin() as db:  # the database is shared by this module's tests
        db.exec_driver_sql("DELETE FROM recording_ledger")
    return base


def states(ledger: Ledger) -> dict[str, str]:
    return {row["key"].rsplit("/", 1)[-1]: row["state"] for row in ledger.rows()}


def test_a_recording_walks_through_its_states_with_timings(url: str) -> None:
    ledger = Ledger(url)
    good, bad, quiet = rec("c1.wav"), rec("c2.wav"), rec("c3.wav")
    ledger.sensed([good, bad, quiet], "whisper-base-ctranslate2-int8", "1")
    assert ledger.counts(DAY) == {"sensed": 3}
    assert ledger.advance(good.recording_id, "preprocessed", stage="preprocess", seconds=1.23456)
    assert ledger.advance(bad.recording_id, "quarantined", reason="empty file (0 bytes)", stage="preprocess",
                          seconds=0.01)
    assert ledger.advance(quiet.recording_id, "preprocessed", stage="preprocess", seconds=0.5)
    assert ledger.advance(good.recording_id, "transcribed", stage="transcribe", seconds=4.5)
    assert ledger.advance(quiet.recording_id, "transcribed", stage="transcribe", seconds=0.1)
    assert ledger.advance(good.recording_id, "indexed", stage="index", seconds=0.02, segments=7)
    assert ledger.advance(quiet.recording_id, "needs_review", reason="no speech detected", stage="index",
                          seconds=0.01, segments=0)
    assert ledger.counts(DAY) == {"indexed": 1, "quarantined": 1, "needs_review": 1}
    assert ledger.counts("2026-11-28") == {}
    row = ledger.rows(DAY)[0]
    assert (row["key"], row["etag"], row["state"], row["reason"], row["segments"]) == (good.key, "e1", "indexed",
                                                                                       None, 7)
    assert (row["preprocess_seconds"], row["transcribe_seconds"], row["index_seconds"]) == (1.235, 4.5, 0.02)
    assert (row["model"], row["pipeline_version"]) == ("whisper-base-ctranslate2-int8", "1")
    assert row["updated_at"] >= row["sensed_at"] and row["updated_at"].endswith("+00:00")
    assert [r["reason"] for r in ledger.rows(DAY)] == [None, "empty file (0 bytes)", "no speech detected"]
    json.dumps(ledger.rows())  # what asr status --json prints
    with pytest.raises(ValueError, match="unknown stage"):
        ledger.advance(good.recording_id, "indexed", stage="audit")
    with pytest.raises(ValueError, match="not a step forward"):  # superseding and erasing have their own calls
        ledger.advance(good.recording_id, "superseded")


def test_states_only_move_forward(url: str) -> None:
    ledger = Ledger(url)
    r = rec("c1.wav")
    ledger.sensed([r], "m", "1")
    assert ledger.advance(r.recording_id, "transcribed")
    assert not ledger.advance(r.recording_id, "preprocessed")  # a retried stage that found its artefact
    assert not ledger.advance(r.recording_id, "transcribed")
    assert ledger.advance(r.recording_id, "needs_review", reason="speech detected but no text transcribed")
    assert not ledger.advance(r.recording_id, "sensed")
    assert not ledger.advance(r.recording_id, "needs_review", reason=None)  # same state: the reason stays
    assert ledger.rows()[0]["reason"] == "speech detected but no text transcribed"
    assert ledger.advance(r.recording_id, "indexed", segments=3)  # the index decides how it ended
    assert ledger.state(r.recording_id) == "indexed"
    assert not ledger.advance("not-in-the-ledger", "indexed")
    assert ledger.state("not-in-the-ledger") is None


def test_sensing_again_keeps_states_and_new_versions_start_over(url: str) -> None:
    ledger = Ledger(url)
    done, bad = rec("c1.wav"), rec("c2.wav")
    ledger.sensed([done, bad], "model-a", "1")
    ledger.advance(done.recording_id, "indexed", stage="index", seconds=1.0, segments=4)
    ledger.advance(bad.recording_id, "quarantined", reason="not a decodable media file")
    ledger.sensed([done, bad], "model-a", "1")  # a re-run of the day
    assert states(ledger) == {"c1.wav": "indexed", "c2.wav": "quarantined"}

    ledger.sensed([done, bad], "model-b", "1")  # a new model redoes transcripts; a bad file stays bad
    assert states(ledger) == {"c1.wav": "sensed", "c2.wav": "quarantined"}
    row = ledger.rows()[0]
    assert (row["model"], row["segments"], row["index_seconds"], row["reason"]) == ("model-b", None, None, None)

    ledger.sensed([done, bad], "model-b", "2")  # a new pipeline version redoes everything
    assert states(ledger) == {"c1.wav": "sensed", "c2.wav": "sensed"}
    assert len(ledger.rows()) == 2


def test_a_new_etag_supersedes_the_old_version(url: str) -> None:
    ledger = Ledger(url)
    first, second = rec("c1.wav", etag="e1"), rec("c1.wav", etag="e2")
    ledger.sensed([first], "m", "1")
    ledger.advance(first.recording_id, "quarantined", reason="truncated upload")
    ledger.sensed([second], "m", "1")
    rows = {r["etag"]: r for r in ledger.rows()}
    assert (rows["e1"]["state"], rows["e1"]["reason"]) == ("superseded", "replaced by a newer version (ETag e2)")
    assert rows["e2"]["state"] == "sensed" and ledger.counts() == {"superseded": 1, "sensed": 1}
    ledger.sensed([first], "m", "1")  # the old bytes uploaded again: that version is current once more
    assert {r["etag"]: r["state"] for r in ledger.rows()} == {"e1": "sensed", "e2": "superseded"}


def test_a_new_version_of_a_held_key_waits_until_the_hold_is_released(url: str) -> None:
    ledger = Ledger(url)
    access = AccessLog(ledger)
    holds = Holds(ledger, access)
    held, free = rec("c1.wav", etag="e1"), rec("c2.wav", etag="e1")
    ledger.sensed([held, free], "m", "1")
    ledger.advance(held.recording_id, "indexed", stage="index", seconds=1.0, segments=4)
    hold = holds.place("key", "litigation 17", "officer", value=held.key)
    new, other = rec("c1.wav", etag="e2"), rec("c2.wav", etag="e2")
    assert holds.sense([new, other], "m", "1") == {new.recording_id}  # the stages leave the waiting one alone
    rows = {(r["key"].rsplit("/", 1)[-1], r["etag"]): r for r in ledger.rows()}
    assert {name: row["state"] for name, row in rows.items()} == {
        ("c1.wav", "e1"): "indexed", ("c1.wav", "e2"): "held", ("c2.wav", "e1"): "superseded", ("c2.wav", "e2"): "sensed"}
    assert (rows["c1.wav", "e1"]["segments"], rows["c1.wav", "e1"]["reason"]) == (4, None)
    why = rows["c1.wav", "e2"]["reason"]
    assert why == f"waits behind legal hold {hold.id}: the held version (ETag e1) stays current"
    assert "litigation" not in why and held.key not in why  # the hold's register is the records officer's to read
    logged = access.entries(user="pipeline")
    assert [(e.action, e.recording_id) for e in logged] == [("hold", new.recording_id), ("hold", held.recording_id)]
    assert all(f"legal hold {hold.id}" in str(e.detail) and held.key not in str(e.detail) for e in logged)

    assert holds.sense([new], "m", "2") == {new.recording_id}  # sensed again, under a new pipeline too: it waits
    assert ledger.state(new.recording_id) == "held" and ledger.state(held.recording_id) == "indexed"
    assert len(access.entries(user="pipeline")) == 2  # logged when it was kept apart, not on every sensing
    assert not ledger.advance(new.recording_id, "preprocessed")  # no stage moves it
    with pytest.raises(ValueError, match="not a step forward"):
        ledger.advance(new.recording_id, "held")

    holds.release(hold.id, "settled", "officer")
    assert holds.sense([new], "m", "1") == set()  # the next sensing after the release starts it
    rows = {r["etag"]: r for r in ledger.rows() if r["key"] == held.key}
    assert (rows["e2"]["state"], rows["e2"]["reason"]) == ("sensed", None)
    assert (rows["e1"]["state"], rows["e1"]["reason"]) == ("superseded", "replaced by a newer version (ETag e2)")


def test_a_held_version_is_not_started_over_by_a_new_model_or_pipeline(url: str) -> None:
    ledger = Ledger(url)
    holds = Holds(ledger, AccessLog(ledger))
    held, free = dataclasses.replace(rec("c1.wav"), customer_id="CU-7"), rec("c2.wav")
    holds.sense([held, free], "m", "1")
    for r in (held, free):
        ledger.advance(r.recording_id, "indexed", stage="index", seconds=1.0, segments=4)
    hold = holds.place("customer", "complaint 9", "officer", value="CU-7")

    def kept() -> tuple[str, str, str, int, float]:
        row = next(r for r in ledger.rows() if r["recording_id"] == held.recording_id)
        return row["state"], row["model"], row["pipeline_version"], row["segments"], row["index_seconds"]

    assert holds.sense([held, free], "m", "2") == {held.recording_id}  # the stages would make it again
    assert kept() == ("indexed", "m", "1", 4, 1.0) and ledger.state(free.recording_id) == "sensed"
    assert holds.sense([held, free], "model-b", "2") == {held.recording_id}
    assert kept() == ("indexed", "m", "1", 4, 1.0)
    assert holds.sense([held], "m", "1") == set()  # under the versions that made it, a rerun finds it done
    holds.release(hold.id, "closed", "officer")
    assert holds.sense([held], "m", "2") == set()
    assert kept()[:3] == ("sensed", "m", "2")


def _walk(url: str, names: list[str]) -> None:
    ledger = Ledger(url)
    for name in names:
        r = rec(name)
        ledger.sensed([r], "m", "1")
        for state in ("preprocessed", "transcribed", "indexed"):
            assert ledger.advance(r.recording_id, state, stage="index" if state == "indexed" else None)


def test_many_processes_write_at_once(url: str) -> None:
    """Parallel Airflow tasks share one ledger; SQLite waits for its lock instead of failing."""
    Ledger(url)
    batches = [[f"p{p}-{i:03d}.wav" for i in range(25)] for p in range(4)]
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_walk, args=(url, batch)) for batch in batches]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(120)
    assert [proc.exitcode for proc in procs] == [0, 0, 0, 0]
    assert Ledger(url).counts(DAY) == {"indexed": 100}


def test_ledger_urls() -> None:
    relative = make_url(resolve_url("sqlite:///var/ledger.sqlite"))
    assert Path(relative.database) == PROJECT_ROOT / "var" / "ledger.sqlite"
    assert resolve_url("sqlite:////abs/l.sqlite") == "sqlite:////abs/l.sqlite"
    assert make_url(resolve_url("postgresql://asr:pw@db/asr")).drivername == "postgresql+psycopg2"
    with pytest.raises(ValueError, match="ledger_url 'mysql://x@y/z': unsupported database 'mysql'"):
        Ledger("mysql://x@y/z")


def test_asr_status_prints_counts_and_failures(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    ledger = Ledger(url)
    good, silent, broken, old = rec("c1.wav"), rec("c2.wav"), rec("c3.wav", etag="e2"), rec("c3.wav", etag="e1")
    ledger.sensed([good, silent, old], "m", "1")
    ledger.sensed([broken], "m", "1")
    ledger.advance(good.recording_id, "indexed", segments=5)
    ledger.advance(silent.recording_id, "needs_review", reason="no speech detected", segments=0)
    ledger.advance(broken.recording_id, "quarantined", reason="not a decodable media file: Invalid data")
    ledger.sensed([rec("c9.wav", day="2026-11-28")], "m", "1")

    env = {k: v for k, v in os.environ.items() if not k.startswith("ASR_")} | {"ASR_LEDGER_URL": url}
    asr = [str(Path(sys.executable).parent / "asr"), "status"]
    text = subprocess.run([*asr, "--date", DAY], env=env, capture_output=True, text=True, timeout=60)
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines() == [
        f"{DAY}: indexed 1, needs_review 1, quarantined 1, superseded 1",
        "  needs_review  calls/2026/11/27/c2.wav: no speech detected",
        "   quarantined  calls/2026/11/27/c3.wav: not a decodable media file: Invalid data",
    ]
    shown = json.loads(subprocess.run([*asr, "--date", DAY, "--json"], env=env, capture_output=True, text=True,
                                      timeout=60).stdout)
    assert shown["counts"] == {"indexed": 1, "needs_review": 1, "quarantined": 1, "superseded": 1}
    assert {(r["key"].rsplit("/", 1)[-1], r["etag"], r["state"], r["segments"]) for r in shown["recordings"]} == {
        ("c1.wav", "e1", "indexed", 5), ("c2.wav", "e1", "needs_review", 0),
        ("c3.wav", "e2", "quarantined", None), ("c3.wav", "e1", "superseded", None),
    }
    every = json.loads(subprocess.run([*asr, "--json"], env=env, capture_output=True, text=True, timeout=60).stdout)
    assert every["counts"]["sensed"] == 1 and len(every["recordings"]) == 5
    bad = subprocess.run([*asr, "--date", "27.11.2026"], env=env, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "not a calendar date (YYYY-MM-DD)" in bad.stderr


# -- migrations ---------------------------------------------------------------------------------------------------

# The ledger as its first release created it (CreateTable and CreateIndex of these), before any migration existed.
first_release = MetaData()
first_ledger = Table(
    "recording_ledger",
    first_release,
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
    *(Column(f"{stage}_seconds", Float) for stage in ("preprocess", "transcribe", "index")),
    Column("sensed_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("bucket", "key", "etag", name="recording_ledger_version"),
)
Index("recording_ledger_date_state", first_ledger.c.call_date, first_ledger.c.state)
Index("recording_ledger_key", first_ledger.c.bucket, first_ledger.c.key)
HEAD = "0011"
LATER = ("agent_id", "customer_id", "erased_by", "erased_at", "size", "audio_seconds")  # revisions 0002 and 0003


def old_rows() -> list[dict[str, object]]:
    when = datetime(2026, 11, 27, 22, 0, tzinfo=timezone.utc)
    done, bad, old = rec("c1.wav"), rec("c2.wav"), rec("c3.wav", etag="e0")
    common = {"call_date": DAY, "model": "m", "pipeline_version": "1", "sensed_at": when, "updated_at": when}
    return [
        {**common, "recording_id": done.recording_id, "bucket": done.bucket, "key": done.key, "etag": done.etag,
         "state": "indexed", "reason": None, "segments": 7, "preprocess_seconds": 1.5, "transcribe_seconds": 4.0,
         "index_seconds": 0.5},
        {**common, "recording_id": bad.recording_id, "bucket": bad.bucket, "key": bad.key, "etag": bad.etag,
         "state": "quarantined", "reason": "not a decodable media file", "segments": None,
         "preprocess_seconds": 0.1, "transcribe_seconds": None, "index_seconds": None},
        {**common, "recording_id": old.recording_id, "bucket": old.bucket, "key": old.key, "etag": old.etag,
         "state": "superseded", "reason": "replaced by a newer version (ETag e1)", "segments": None,
         "preprocess_seconds": None, "transcribe_seconds": None, "index_seconds": None},
    ]


def engine_for(url: str) -> Engine:
    return create_engine(resolve_url(url))


def at_head(ledger: Ledger) -> None:
    """The database is at the head revision and has exactly the schema the Table definitions describe."""
    with ledger.engine.connect() as db:
        assert db.execute(text("SELECT version_num FROM asr_ledger_version")).scalars().all() == [HEAD]
        context = MigrationContext.configure(db, opts={"version_table": VERSION_TABLE})
        assert compare_metadata(context, metadata) == []


def append_only(ledger: Ledger) -> None:
    AccessLog(ledger).append("auditor", "play", recording_id="r1")
    with pytest.raises(DBAPIError, match="append-only"), ledger.engine.begin() as db:
        db.execute(text("DELETE FROM access_log"))


def test_a_ledger_of_the_first_release_is_upgraded_keeping_every_row(fresh_url: str) -> None:
    """No version table, the first release's tables and rows: opening the ledger stamps and upgrades it."""
    engine = engine_for(fresh_url)
    first_release.create_all(engine)
    with engine.begin() as db:
        db.execute(insert(first_ledger), old_rows())
    engine.dispose()

    ledger = Ledger(fresh_url)
    at_head(ledger)
    rows = {row["recording_id"]: row for row in ledger.rows()}
    for old in old_rows():
        row = rows.pop(str(old["recording_id"]))
        assert {name: row[name] for name in old if not name.endswith("_at")} == {
            name: value for name, value in old.items() if not name.endswith("_at")}
        assert (row["sensed_at"], row["updated_at"]) == ("2026-11-27T22:00:00+00:00",) * 2
        assert {name: row[name] for name in LATER} == dict.fromkeys(LATER)
    assert rows == {}
    new = Recording(recording_id_for("recordings", "calls/2026/11/27/c4.wav", "e1"), "recordings",
                    "calls/2026/11/27/c4.wav", "e1", 2048, "c4", DAY, agent_id="AG-1", customer_id="CU-1")
    ledger.sensed([new], "m", "1")
    assert ledger.advance(new.recording_id, "preprocessed", audio_seconds=61.25)
    row = next(r for r in ledger.rows() if r["recording_id"] == new.recording_id)
    assert (row["agent_id"], row["customer_id"], row["size"], row["audio_seconds"]) == ("AG-1", "CU-1", 2048, 61.25)
    append_only(ledger)
    ledger.engine.dispose()


def _migrated_to(url: str, revision: str) -> None:
    """What the release that ended at ``revision`` made: its tables, without a version table."""
    engine = engine_for(url)
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as db:
        config.attributes["connection"] = db
        command.upgrade(config, revision)
        db.execute(text("DROP TABLE asr_ledger_version"))
        db.execute(insert(first_ledger), old_rows())
    engine.dispose()


@pytest.mark.parametrize("revision", ["0001", "0002", "0003", "0004"])
def test_a_ledger_from_before_the_migrations_is_recognised_at_its_revision(fresh_url: str, revision: str) -> None:
    """Each release before the migrations left one schema; the ledger stamps the one it finds and upgrades from
    there (stamping an earlier one would add a column or table twice and fail)."""
    _migrated_to(fresh_url, revision)
    ledger = Ledger(fresh_url)
    at_head(ledger)
    assert sorted(row["recording_id"] for row in ledger.rows()) == sorted(
        str(row["recording_id"]) for row in old_rows())
    append_only(ledger)  # revision 0002's triggers: made by the old release or by the upgrade, never twice
    ledger.engine.dispose()


def test_opening_again_at_head_only_reads_the_version(fresh_url: str) -> None:
    Ledger(fresh_url).engine.dispose()
    statements: list[str] = []

    def seen(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        statements.append(statement)

    event.listen(Engine, "before_cursor_execute", seen)
    try:
        ledger = Ledger(fresh_url)
    finally:
        event.remove(Engine, "before_cursor_execute", seen)
    assert statements and all(s.lstrip().upper().startswith(("SELECT", "PRAGMA")) for s in statements), statements
    assert not any("advisory" in s for s in statements)
    at_head(ledger)
    ledger.engine.dispose()


def test_the_version_table_is_the_ledgers_own(fresh_url: str) -> None:
    """The ledger may share a PostgreSQL database with Airflow, whose own Alembic history it leaves alone."""
    engine = engine_for(fresh_url)
    with engine.begin() as db:
        db.execute(text("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL PRIMARY KEY)"))
        db.execute(text("INSERT INTO alembic_version VALUES ('airflow-head')"))
    ledger = Ledger(fresh_url)
    with engine.connect() as db:
        assert db.execute(text("SELECT version_num FROM alembic_version")).scalars().all() == ["airflow-head"]
        assert {"recording_ledger", "access_log", "legal_hold", VERSION_TABLE} <= set(inspect(db).get_table_names())
    with ledger.engine.connect() as db:
        assert db.execute(text("SELECT version_num FROM asr_ledger_version")).scalars().all() == [HEAD]
    engine.dispose()
    ledger.engine.dispose()


def test_a_failed_upgrade_leaves_nothing_behind(fresh_url: str) -> None:
    """The whole upgrade is one transaction: a revision that fails takes the ones before it back with it."""
    engine = engine_for(fresh_url)
    with engine.begin() as db:
        db.execute(text("CREATE TABLE legal_hold (id INTEGER PRIMARY KEY)"))  # in revision 0002's way
    with pytest.raises(DBAPIError, match="legal_hold"):
        Ledger(fresh_url)
    with engine.connect() as db:
        assert inspect(db).get_table_names() == ["legal_hold"]
    engine.dispose()


def _open_and_sense(url: str, name: str) -> None:
    Ledger(url).sensed([rec(name)], "m", "1")


def test_many_processes_create_a_new_ledger_at_once(fresh_url: str) -> None:
    """Workers that start together upgrade one at a time; the others find the schema made."""
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_open_and_sense, args=(fresh_url, f"c{n}.wav")) for n in range(4)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(120)
    assert [proc.exitcode for proc in procs] == [0, 0, 0, 0]
    ledger = Ledger(fresh_url)
    assert ledger.counts(DAY) == {"sensed": 4}
    at_head(ledger)
    ledger.engine.dispose()


def test_rows_logged_before_the_chain_are_chained_by_the_upgrade(fresh_url: str) -> None:
    """A ledger at revision 0008 with access rows: the upgrade hashes them in order, triggers and privileges as
    before, and rows appended later continue the chain."""
    engine = engine_for(fresh_url)
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as db:
        config.attributes["connection"] = db
        command.upgrade(config, "0008")
        for n in range(3):
            db.execute(text("INSERT INTO access_log (at, \"user\", action, recording_id, detail) "
                            "VALUES (:at, 'auditor', 'play', :rid, 'redacted from 0.0 s')"),
                       {"at": datetime(2026, 11, 27, 9, n, tzinfo=timezone.utc), "rid": f"r{n}"})
    engine.dispose()
    ledger = Ledger(fresh_url)
    at_head(ledger)
    log = AccessLog(ledger)
    log.append("auditor", "search", query="收益", hits=2)
    check = log.verify()
    assert check.intact and check.checked == 4
    append_only(ledger)
    ledger.engine.dispose()
