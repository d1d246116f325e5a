"""The access log's hash chain and its signed anchors: a row changed, removed or cut off behind the triggers' back,
as a database owner can, is found by ``verify`` and by ``asr access-log --verify``, on SQLite and PostgreSQL; so
are rows removed with the chain computed anew (a gap) and anchors rewritten without the anchor key, wherever
verify finds them (the anchor objects and the nightly QA report); what no anchor covers yet is counted."""

from __future__ import annotations

import base64
import json
import multiprocessing
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import select, text

from asr_tasks.audit.reports import run_audit
from asr_tasks.audit.rules import load_rule_set
from asr_tasks.config import PROJECT_ROOT, Settings
from asr_tasks.index.sqlite import SqliteIndex
from asr_tasks.intake.stores import LocalStore, put_json
from asr_tasks.records.access_log import AccessLog
from asr_tasks.records.anchors import (
    PREFIX,
    Anchor,
    check_log,
    found_anchors,
    new_anchor_key,
    stored_anchors,
    unmatched,
    write_anchor,
)
from asr_tasks.records.chain import GENESIS, hash_of
from asr_tasks.records.tables import access_log
from asr_tasks.records.ledger import Ledger, open_ledger
from asr_tasks.version import DayReports

BUCKET = Settings().storage.artefacts_bucket
DAY = "2026-11-27"


@pytest.fixture
def url(fresh_url: str) -> str:
    return fresh_url


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    """The anchor key of the test's own (the deployment's secret), its public key beside it."""
    path = tmp_path / "keys" / "anchor.pem"
    new_anchor_key(path)
    return path


@pytest.fixture
def key(key_file: Path) -> Ed25519PrivateKey:
    return new_anchor_key(key_file)


def asr_verify(url: str, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """``asr access-log --verify`` as an operator runs it: the ledger, the artefact store, the anchor key's file."""
    env = {"ASR_LEDGER_URL": url, "ASR_STORE_ROOT": str(tmp_path / "store"),
           "ASR_ANCHOR_KEY_FILE": str(tmp_path / "keys" / "anchor.pem"), "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-m", "asr_tasks.cli", "access-log", "--verify", *extra],
                          capture_output=True, text=True, cwd=PROJECT_ROOT, timeout=120, env=env)


def behind_the_triggers(ledger: Ledger, *statements: str) -> None:
    """What a database owner can do: lift the guard, change the rows, put the guard back."""
    sqlite = ledger.engine.dialect.name == "sqlite"
    with ledger.engine.begin() as db:
        if sqlite:
            db.execute(text("DROP TRIGGER IF EXISTS access_log_no_update"))
            db.execute(text("DROP TRIGGER IF EXISTS access_log_no_delete"))
        else:
            db.execute(text("ALTER TABLE access_log DISABLE TRIGGER access_log_no_change"))
        for sql in statements:
            db.execute(text(sql))
        if not sqlite:
            db.execute(text("ALTER TABLE access_log ENABLE TRIGGER access_log_no_change"))


def filled(url: str) -> tuple[Ledger, AccessLog]:
    ledger = Ledger(url)
    log = AccessLog(ledger)
    log.append("auditor", "search", query="保证收益", filters={"agent": "AG-1", "tags": ["card"]}, hits=3)
    for n in range(5):
        log.append("auditor", "play", recording_id=f"r{n}", detail=f"redacted from {n}.0 s")
    log.append("officer", "erase", recording_id="r4", detail="every version of its key (1): customer-request")
    return ledger, log


def test_an_intact_log_verifies_and_each_row_is_chained_to_the_one_before(url: str) -> None:
    ledger, log = filled(url)
    check = log.verify()
    assert check.intact and check.checked == 7 and check.first_id is None
    rows = log.entries()
    assert rows[-1].row_hash == check.last_hash and rows[-1].id == check.last_id
    with ledger.engine.connect() as db:
        links = db.execute(text("SELECT prev_hash, row_hash FROM access_log ORDER BY id")).all()
    assert links[0].prev_hash == GENESIS
    assert all(later.prev_hash == earlier.row_hash for earlier, later in zip(links, links[1:]))
    assert len({row.row_hash for row in links}) == 7


def test_a_row_edited_behind_the_triggers_back_is_named(url: str) -> None:
    ledger, log = filled(url)
    third = log.entries()[2].id
    behind_the_triggers(ledger, f"UPDATE access_log SET \"user\" = 'someone else' WHERE id = {third}")
    check = log.verify()
    assert not check.intact and check.broken is not None
    assert check.broken.id == third and "altered" in check.broken.why and check.checked == 2


def test_a_row_rewritten_with_a_fresh_hash_breaks_the_link_of_the_row_after(url: str) -> None:
    ledger, log = filled(url)
    second = log.entries()[1].id
    with ledger.engine.connect() as db:
        row = db.execute(select(access_log).where(access_log.c.id == second)).one()
    forged = hash_of(SimpleNamespace(**{**row._asdict(), "recording_id": "r-other"}), row.prev_hash)
    behind_the_triggers(ledger, f"UPDATE access_log SET recording_id = 'r-other', row_hash = '{forged}' "
                                f"WHERE id = {second}")
    check = log.verify()
    assert check.broken is not None and check.broken.id == log.entries()[2].id
    assert f"row {second}" in check.broken.why and check.checked == 2


def test_a_removed_row_breaks_the_link_of_the_row_after(url: str) -> None:
    ledger, log = filled(url)
    ids = [e.id for e in log.entries()]
    behind_the_triggers(ledger, f"DELETE FROM access_log WHERE id = {ids[3]}")
    check = log.verify()
    assert check.broken is not None and check.broken.id == ids[4] and "removed" in check.broken.why


def test_a_range_is_checked_from_the_row_before_it(url: str) -> None:
    ledger = Ledger(url)
    log = AccessLog(ledger)
    log.append("auditor", "search", query="first", hits=1)
    time.sleep(1.2)  # the range starts at a whole second after the first row
    for n in range(3):
        log.append("auditor", "play", recording_id=f"r{n}")
    rows = log.entries()
    behind_the_triggers(ledger, f"UPDATE access_log SET hits = 99 WHERE id = {rows[0].id}")
    after_first = log.verify(since=datetime.fromisoformat(rows[1].at))
    assert after_first.intact and after_first.first_id == rows[1].id and after_first.checked == 3
    whole = log.verify()
    assert whole.broken is not None and whole.broken.id == rows[0].id
    assert log.verify(until=datetime.fromisoformat(rows[1].at)).broken is not None


def _append_many(url: str, who: str) -> None:
    log = AccessLog(Ledger(url))
    for n in range(30):
        log.append(who, "play", recording_id=f"{who}-{n}")


def test_appenders_at_once_keep_one_chain(url: str) -> None:
    Ledger(url)
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_append_many, args=(url, f"user{p}")) for p in range(4)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(120)
    assert [proc.exitcode for proc in procs] == [0, 0, 0, 0]
    check = AccessLog(Ledger(url)).verify()
    assert check.intact and check.checked == 120


def test_anchors_find_rows_cut_off_the_end(url: str, tmp_path: Path, key: Ed25519PrivateKey) -> None:
    ledger, log = filled(url)
    store = LocalStore(tmp_path / "store")
    public = key.public_key()
    anchor = write_anchor(log, store, "artefacts", None, key)
    assert anchor is not None and anchor.id == log.verify().last_id
    log.append("auditor", "play", recording_id="r9")
    assert check_log(log, stored_anchors(store, "artefacts"), None, None, public).intact
    behind_the_triggers(ledger, f"DELETE FROM access_log WHERE id >= {anchor.id}")
    assert log.verify().intact  # what is left still chains: only the anchor shows the cut
    (problem,) = unmatched(log, stored_anchors(store, "artefacts").anchors)
    assert f"row {anchor.id}" in problem and "removed from its end" in problem
    later = datetime.fromisoformat(anchor.at) + timedelta(seconds=1)  # a range after the anchor: widened back to it
    assert not check_log(log, stored_anchors(store, "artefacts"), later, None, public).intact


def test_asr_access_log_verify_names_the_row(settings: Settings, tmp_path: Path) -> None:
    ledger, log = filled(settings.ledger.ledger_url)

    def verify(*extra: str) -> subprocess.CompletedProcess[str]:
        return asr_verify(settings.ledger.ledger_url, tmp_path, *extra)

    ok = verify()
    assert ok.returncode == 0 and "7 rows checked (rows from the first to 7), the chain holds" in ok.stdout, ok.stderr
    fifth = log.entries()[4].id
    behind_the_triggers(ledger, f"UPDATE access_log SET recording_id = 'r-other' WHERE id = {fifth}")
    bad = verify("--json")
    found = json.loads(bad.stdout)
    assert bad.returncode == 1 and found["broken"]["id"] == fifth and found["checked"] == 4
    assert verify("--from", "2020-01-01", "--to", "2099-12-31").returncode == 1


def rechain_from(ledger: Ledger, row_id: int) -> None:
    """What an owner who knows the chain does after an edit: every hash from that row on computed anew."""
    with ledger.engine.connect() as db:
        rows = db.execute(select(access_log).where(access_log.c.id >= row_id).order_by(access_log.c.id)).all()
        prev = db.execute(select(access_log.c.row_hash).where(access_log.c.id < row_id)
                          .order_by(access_log.c.id.desc()).limit(1)).scalar() or GENESIS
    updates = []
    for row in rows:
        mine = hash_of(row, prev)
        updates.append(f"UPDATE access_log SET prev_hash = '{prev}', row_hash = '{mine}' WHERE id = {row.id}")
        prev = mine
    behind_the_triggers(ledger, *updates)


def test_a_range_is_widened_to_the_anchors_around_it(url: str, tmp_path: Path, key: Ed25519PrivateKey) -> None:
    """Rows of the days asked, removed or rewritten with every hash after them, show in a check of those days
    alone: the check runs on to the first anchor after them (or the log's end)."""
    ledger = Ledger(url)
    log = AccessLog(ledger)
    for n in range(3):
        log.append("auditor", "play", recording_id=f"first-{n}")
    time.sleep(1.2)
    for n in range(3):
        log.append("auditor", "play", recording_id=f"second-{n}")
    store = LocalStore(tmp_path / "store")
    public = key.public_key()
    write_anchor(log, store, "artefacts", None, key)
    rows = log.entries()
    second_day = datetime.fromisoformat(rows[3].at)
    assert check_log(log, stored_anchors(store, "artefacts"), None, second_day, public).intact

    behind_the_triggers(ledger, f"UPDATE access_log SET recording_id = 'forged' WHERE id = {rows[1].id}")
    rechain_from(ledger, int(rows[1].id or 0))
    assert log.verify(until=second_day).intact  # the rows alone hold together
    widened = check_log(log, stored_anchors(store, "artefacts"), None, second_day, public)
    assert not widened.intact and "does not carry the hash anchored" in widened.problems[0]

    behind_the_triggers(ledger, f"DELETE FROM access_log WHERE id = {rows[2].id}")  # the range's last row
    assert check_log(log, stored_anchors(store, "artefacts"), None, second_day, public).chain.broken is not None


def forged_anchor(anchor: Anchor, log: AccessLog, signer: Ed25519PrivateKey | None) -> dict[str, object]:
    """What a database owner writes over an anchor after rewriting the chain: the new last hash, signed with a
    key of their own (or unsigned, as anchors were before they were signed)."""
    last = log.last()
    assert last is not None and last.row_hash is not None
    forged = Anchor(anchor.id, anchor.at, last.row_hash, anchor.anchored_at)
    signature = base64.b64encode(signer.sign(forged.signed_text())).decode() if signer is not None else None
    return {**forged.to_dict(), "signature": signature}


def test_a_rechained_copy_with_its_anchors_rewritten_fails_verify_naming_each_anchor(
        url: str, tmp_path: Path, key: Ed25519PrivateKey) -> None:
    """Row 50 edited, hashes 50-149 computed anew, the anchor object and the QA report's anchor written over: with
    a key of the editor's own, or unsigned, verify fails and names where each anchor was found."""
    ledger = Ledger(url)
    log = AccessLog(ledger)
    for n in range(149):
        log.append("auditor", "play", recording_id=f"r{n}", detail=f"redacted from {n}.0 s")
    store = LocalStore(tmp_path / "store")
    anchor = write_anchor(log, store, BUCKET, None, key)
    assert anchor is not None and anchor.id == 149
    report, anchor_object = DayReports(DAY).audit("json"), f"{PREFIX}{anchor.id:012d}.json"
    put_json(store, BUCKET, report, {"access_log_anchor": anchor.to_dict()})
    assert asr_verify(url, tmp_path).returncode == 0

    behind_the_triggers(ledger, "UPDATE access_log SET recording_id = 'someone else' WHERE id = 50")
    rechain_from(ledger, 50)
    assert log.verify().intact  # the copy holds together on its own
    for signer in (Ed25519PrivateKey.generate(), None):
        forged = forged_anchor(anchor, log, signer)
        put_json(store, BUCKET, anchor_object, forged)
        put_json(store, BUCKET, report, {"access_log_anchor": forged})
        bad = asr_verify(url, tmp_path)
        assert bad.returncode == 1, bad.stdout
        (problem,) = [line for line in bad.stdout.splitlines() if line.startswith("anchor: ")]
        assert f"the anchor of row 149 ({anchor_object}, {report})" in problem
        assert ("signature does not verify" if signer else "is unsigned and no signed anchor covers its row") in problem


def test_rows_removed_and_the_chain_computed_anew_leave_a_gap_that_fails_verify(url: str, tmp_path: Path) -> None:
    ledger = Ledger(url)
    log = AccessLog(ledger)
    for n in range(20):
        log.append("auditor", "play", recording_id=f"r{n}")
    behind_the_triggers(ledger, "DELETE FROM access_log WHERE id IN (8, 9)")
    rechain_from(ledger, 10)
    check = log.verify()
    assert check.broken is None and not check.intact and [g.missing for g in check.gaps] == [(8, 9)]
    out = asr_verify(url, tmp_path)
    assert out.returncode == 1 and "rows 8 to 9 are missing between row 7 and row 10" in out.stdout, out.stdout
    behind_the_triggers(ledger, "DELETE FROM access_log WHERE id <= 3")  # the first rows, chained from the start
    rechain_from(ledger, 4)
    assert [g.missing for g in log.verify().gaps] == [(1, 3), (8, 9)]
    assert "rows 1 to 3 are missing between the start of the log and row 4" in asr_verify(url, tmp_path).stdout


def test_rows_after_the_last_signed_anchor_are_counted_as_not_yet_protected(
        url: str, tmp_path: Path, key: Ed25519PrivateKey) -> None:
    ledger, log = filled(url)
    assert json.loads(asr_verify(url, tmp_path, "--json").stdout)["unprotected_rows"] == 7
    write_anchor(log, LocalStore(tmp_path / "store"), BUCKET, None, key)
    for n in range(3):
        log.append("auditor", "play", recording_id=f"later-{n}")
    found = json.loads(asr_verify(url, tmp_path, "--json").stdout)
    assert found["intact"] and (found["last_signed_anchor"], found["unprotected_rows"]) == (7, 3)
    behind_the_triggers(ledger, "DELETE FROM access_log WHERE id > 7")  # no anchor sees the cut: the head does
    out = asr_verify(url, tmp_path)
    assert out.returncode == 1 and "not yet protected: 0 rows after the last signed anchor (row 7)" in out.stdout
    assert "10 rows were appended and the last row is row 7: 3 rows were cut off the log's end" in out.stdout


def test_verify_reads_the_anchor_the_nightly_qa_report_holds(settings: Settings, tmp_path: Path,
                                                              key_file: Path) -> None:
    """The nightly audit anchors the log in its report and in an object; the object removed and the rows after
    row 5 cut off, the report's anchor still shows the cut."""
    conf = settings.override(anchor_key_file=str(key_file))
    ledger = open_ledger(conf.ledger)
    log = AccessLog(ledger)
    for n in range(10):
        log.append("auditor", "play", recording_id=f"r{n}")
    store = LocalStore(conf.storage.path("store_root"))
    run_audit(DAY, load_rule_set(PROJECT_ROOT / "include" / "qa_rules"), SqliteIndex(conf.index.path("index_path")),
              store, conf)
    (anchor,) = found_anchors(store, BUCKET).anchors
    assert anchor.id == 10 and found_anchors(store, BUCKET).where[anchor] == [f"{PREFIX}{10:012d}.json",
                                                                               DayReports(DAY).audit("json")]
    store.delete(BUCKET, f"{PREFIX}{10:012d}.json")
    behind_the_triggers(ledger, "DELETE FROM access_log WHERE id > 5")
    assert log.verify().intact and stored_anchors(store, BUCKET).anchors == []
    out = asr_verify(conf.ledger.ledger_url, tmp_path)
    assert out.returncode == 1 and f"({DayReports(DAY).audit('json')}), is not in the log" in out.stdout, out.stdout


def test_an_unsigned_anchor_fails_verify_unless_a_signed_one_after_it_covers_its_row(
        url: str, tmp_path: Path, key: Ed25519PrivateKey) -> None:
    """Anchors written before anchors were signed: the chain ties their rows to a later signed anchor's, which
    protects them; an unsigned anchor past the last signed one vouches for rows nothing else does."""
    ledger, log = filled(url)
    store = LocalStore(tmp_path / "store")
    last = log.last()
    assert last is not None and last.id is not None and last.row_hash is not None
    old = Anchor(last.id, last.at, last.row_hash, "2026-11-01T00:00:00+00:00")
    put_json(store, BUCKET, f"{PREFIX}{old.id:012d}.json", old.to_dict())
    alone = check_log(log, found_anchors(store, BUCKET), None, None, key.public_key())
    assert not alone.intact and "is unsigned and no signed anchor covers its row" in alone.problems[0]
    log.append("auditor", "play", recording_id="r-later")
    write_anchor(log, store, BUCKET, None, key)
    covered = check_log(log, found_anchors(store, BUCKET), None, None, key.public_key())
    assert covered.intact and covered.signed == 1 and covered.unprotected == 0
    assert covered.unsigned == [f"the anchor of row 7 ({PREFIX}{7:012d}.json) is unsigned; the signed anchor of "
                                f"row 8 covers it"]
