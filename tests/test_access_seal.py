"""What people typed, sealed in the access log: readable while the calls it concerns stand, unreadable once one
of them is erased (its key destroyed), the hash chain and the signed anchors unchanged; never in the database's
bytes as typed; and the seal table the one part of the log the pipeline may delete from."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from asr_tasks.config import PROJECT_ROOT, Settings
from asr_tasks.index.sqlite import SqliteIndex
from asr_tasks.intake.stores import LocalStore, put_json
from asr_tasks.models import Recording, Segment, Transcript, recording_id_for
from asr_tasks.records.access_log import ERASED, SEALED, AccessLog
from asr_tasks.records.anchors import new_anchor_key, write_anchor
from asr_tasks.records.chain import GENESIS, row_hash
from asr_tasks.records.erasure import Eraser
from asr_tasks.records.ledger import MIGRATIONS, Ledger, open_ledger, resolve_url
from asr_tasks.records.tables import access_log, access_log_seal, access_log_subject
from asr_tasks.version import RecordingVersion

TYPED = "Jane Roe card 4111 1111 1111 1111"  # what an auditor typed: a customer's name and a card number
DAY = "2026-11-27"


def raw_rows(ledger: Ledger) -> list[tuple[str | None, str | None]]:
    with ledger.engine.connect() as db:
        return [(r.query, r.filters) for r in db.execute(select(access_log.c.query, access_log.c.filters)
                                                         .order_by(access_log.c.id))]


def cli(url: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"ASR_LEDGER_URL": url, "ASR_STORE_ROOT": str(tmp_path / "store"),
           "ASR_ANCHOR_KEY_FILE": str(tmp_path / "keys" / "anchor.pem"), "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-m", "asr_tasks.cli", "access-log", *args], capture_output=True,
                          text=True, cwd=PROJECT_ROOT, timeout=120, env=env)


def test_a_search_reads_until_a_call_it_found_is_erased_and_the_log_still_verifies(fresh_url: str,
                                                                                   tmp_path: Path) -> None:
    ledger = Ledger(fresh_url)
    log = AccessLog(ledger)
    log.append("auditor", "search", query=TYPED, filters={"agent": "AG-1"}, hits=2, subjects=["r1", "r2"])
    log.append("auditor", "read", recording_id="r1", query="Jane Roe", detail="call page")
    log.append("auditor", "search", query="refund", hits=1, subjects=["r3"])
    log.append("auditor", "play", recording_id="r1", detail="redacted from 0.0 s")
    assert [(e.query, e.filters) for e in log.entries()] == [
        (TYPED, {"agent": "AG-1"}), ("Jane Roe", None), ("refund", None), (None, None)]
    stored = raw_rows(ledger)
    assert all(q.startswith(SEALED) for q, _ in stored[:3]) and stored[0][1].startswith(SEALED)  # type: ignore[union-attr]
    assert "Jane" not in json.dumps(stored) and stored[3] == (None, None)
    key = new_anchor_key(tmp_path / "keys" / "anchor.pem")
    write_anchor(log, LocalStore(tmp_path / "store"), Settings().storage.artefacts_bucket, None, key)

    assert log.forget(["r1"]) == 2  # the search that found it and the page opened from it
    assert [(e.query, e.filters) for e in log.entries()] == [
        (ERASED, None), (ERASED, None), ("refund", None), (None, None)]
    assert raw_rows(ledger) == stored  # not a byte of the log changed
    with ledger.engine.connect() as db:
        links = db.execute(select(access_log_subject.c.recording_id).order_by(access_log_subject.c.recording_id))
        assert links.scalars().all() == ["r2", "r3"]
    assert log.forget(["r1"]) == 0 and log.verify().intact
    verify = cli(fresh_url, tmp_path, "--verify")
    assert verify.returncode == 0 and "1 signed by the key" in verify.stdout, verify.stdout
    shown = cli(fresh_url, tmp_path)
    assert shown.returncode == 0 and ERASED in shown.stdout and "'refund'" in shown.stdout
    assert "Jane" not in shown.stdout and "4111" not in shown.stdout


def test_the_ledger_file_never_holds_the_words_typed_and_an_erasure_leaves_no_key(tmp_path: Path) -> None:
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    log = AccessLog(ledger)
    log.append("auditor", "search", query=TYPED, filters={"customer": "Jane Roe"}, hits=1, subjects=["r1"])

    def stored() -> bytes:
        return b"".join(p.read_bytes() for p in tmp_path.glob("ledger.sqlite*"))  # free pages and the WAL too

    for word in ("Jane", "Roe", "4111"):
        assert word.encode() not in stored()
    with ledger.engine.connect() as db:
        key = db.execute(select(access_log_seal.c.key)).scalar_one()
    assert key in stored()
    log.forget(["r1"])
    assert key not in stored()


def test_rows_logged_before_sealing_still_read_and_verify_and_new_ones_are_sealed(fresh_url: str) -> None:
    """A ledger at revision 0010 with a search in it: the upgrade keeps its text as it was (masked, not sealed),
    the chain holds across it, and rows logged from then on are sealed."""
    engine = create_engine(resolve_url(fresh_url))
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    at = datetime(2026, 11, 27, 9, 0, tzinfo=timezone.utc)
    mine = row_hash(GENESIS, at, "auditor", "search", None, "refund", None, 2, None)
    with engine.begin() as db:
        config.attributes["connection"] = db
        command.upgrade(config, "0010")
        db.execute(text("INSERT INTO access_log (at, \"user\", action, query, hits, prev_hash, row_hash) "
                        "VALUES (:at, 'auditor', 'search', 'refund', 2, :prev, :mine)"),
                   {"at": at, "prev": GENESIS, "mine": mine})
    engine.dispose()
    ledger = Ledger(fresh_url)
    log = AccessLog(ledger)
    log.append("auditor", "search", query="Jane Roe", hits=1, subjects=["r1"])
    assert [e.query for e in log.entries()] == ["refund", "Jane Roe"]
    assert [q[:len(SEALED)] for q, _ in raw_rows(ledger)] == ["refund", SEALED]
    check = log.verify()
    assert check.intact and check.checked == 2
    ledger.engine.dispose()


def test_erasing_a_call_seals_the_searches_that_found_it(settings: Settings) -> None:
    store = LocalStore(settings.storage.path("store_root"))
    index = SqliteIndex(settings.index.path("index_path"))
    ledger = open_ledger(settings.ledger)
    recs = [Recording(recording_id_for("recordings", f"calls/2026/11/27/{name}.flac", "e1"), "recordings",
                      f"calls/2026/11/27/{name}.flac", "e1", 10, name, DAY, customer_id=customer)
            for name, customer in (("a", "CU-1"), ("b", "CU-2"))]
    ledger.sensed(recs, "m", "2")
    for n, rec in enumerate(recs):
        store.put_bytes("recordings", rec.key, b"audio")
        transcript = Transcript(rec, 11.0, [Segment(rec.recording_id, 0, "agent", 1.0, 3.0, f"words {n}")],
                                "en", "m", "2")
        put_json(store, settings.storage.artefacts_bucket, RecordingVersion.of(rec).gated("m"), transcript.to_dict())
        index.replace_recording(transcript)
    access = AccessLog(ledger)
    access.append("auditor", "search", query="Jane Roe", hits=2, subjects=[r.recording_id for r in recs])
    access.append("auditor", "search", query="refund", hits=1, subjects=[recs[0].recording_id])
    erased = recs[1]
    keys = {(row["bucket"], row["key"]): [row] for row in ledger.rows() if row["recording_id"] == erased.recording_id}
    assert Eraser(settings, ledger, store, index, access).erase(keys, "customer-request", "officer").erased == [
        erased.key]
    searches = access.entries(actions=("search",))
    assert [e.query for e in searches] == [ERASED, "refund"]
    assert access.verify().intact


def test_on_postgresql_the_pipeline_role_may_destroy_a_seal_and_change_nothing(postgres_server: str) -> None:
    """The role that owns the ledger's database gives up UPDATE and TRUNCATE on the seal tables at the upgrade
    and keeps DELETE, which ``forget`` needs; on ``access_log`` it still may only INSERT and SELECT."""
    import psycopg2

    name = f"asr_pipeline_{secrets.token_hex(4)}"
    admin = psycopg2.connect(postgres_server)
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f"CREATE ROLE \"{name}\" LOGIN PASSWORD 'pw'")
        cur.execute(f'CREATE DATABASE "{name}" OWNER "{name}"')
    try:
        url = make_url(postgres_server).set(username=name, password="pw", database=name)
        ledger = Ledger(url.render_as_string(hide_password=False))
        log = AccessLog(ledger)
        log.append("auditor", "search", query="Jane Roe", hits=1, subjects=["r1"])
        for sql in ("UPDATE access_log_seal SET key = key", "TRUNCATE access_log_seal",
                    "UPDATE access_log_subject SET recording_id = 'r2'", "DELETE FROM access_log"):
            with pytest.raises(DBAPIError, match="permission denied"), ledger.engine.begin() as db:
                db.execute(text(sql))
        assert log.forget(["r1"]) == 1
        assert [e.query for e in log.entries()] == [ERASED] and log.verify().intact
        ledger.engine.dispose()
    finally:
        with admin.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            cur.execute(f'DROP ROLE IF EXISTS "{name}"')
        admin.close()


def test_on_sqlite_a_seal_is_never_changed(tmp_path: Path) -> None:
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    AccessLog(ledger).append("auditor", "search", query="Jane Roe", hits=1, subjects=["r1"])
    for sql in ("UPDATE access_log_seal SET key = key", "UPDATE access_log_subject SET recording_id = 'r2'"):
        with pytest.raises(DBAPIError, match="never changed"), ledger.engine.begin() as db:
            db.execute(text(sql))
