"""The access log's hash chain and anchors: a row changed, removed or cut off behind the triggers' back, as a
database owner can, is found by ``verify`` and by ``asr access-log --verify``, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
from sqlalchemy import select, text

from asr_tasks.config import PROJECT_ROOT, Settings
from asr_tasks.intake.stores import LocalStore
from asr_tasks.records.access_log import AccessLog
from asr_tasks.records.anchors import check_log, stored_anchors, unmatched, write_anchor
from asr_tasks.records.chain import GENESIS, hash_of
from asr_tasks.records.tables import access_log
from asr_tasks.records.ledger import Ledger


@pytest.fixture
def url(fresh_url: str) -> str:
    return fresh_url


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


def test_anchors_find_rows_cut_off_the_end(url: str, tmp_path: Path) -> None:
    ledger, log = filled(url)
    store = LocalStore(tmp_path / "store")
    anchor = write_anchor(log, store, "artefacts", None)
    assert anchor is not None and anchor.id == log.verify().last_id
    log.append("auditor", "play", recording_id="r9")
    assert check_log(log, stored_anchors(store, "artefacts"), None, None).intact
    behind_the_triggers(ledger, f"DELETE FROM access_log WHERE id >= {anchor.id}")
    assert log.verify().intact  # what is left still chains: only the anchor shows the cut
    (problem,) = unmatched(log, stored_anchors(store, "artefacts").anchors)
    assert f"row {anchor.id}" in problem and "removed from its end" in problem
    later = datetime.fromisoformat(anchor.at) + timedelta(seconds=1)  # a range after the anchor: widened back to it
    assert not check_log(log, stored_anchors(store, "artefacts"), later, None).intact


def test_asr_access_log_verify_names_the_row(settings: Settings, tmp_path: Path) -> None:
    ledger, log = filled(settings.ledger.ledger_url)

    def verify(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "asr_tasks.cli", "access-log", "--verify", *extra],
                              capture_output=True, text=True, cwd=PROJECT_ROOT, timeout=120,
                              env={"ASR_LEDGER_URL": settings.ledger.ledger_url, "ASR_STORE_ROOT": str(tmp_path / "store"),
                                   "PATH": "/usr/bin:/bin"})

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


def test_a_range_is_widened_to_the_anchors_around_it(url: str, tmp_path: Path) -> None:
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
    write_anchor(log, store, "artefacts", None)
    rows = log.entries()
    second_day = datetime.fromisoformat(rows[3].at)
    assert check_log(log, stored_anchors(store, "artefacts"), None, second_day).intact

    behind_the_triggers(ledger, f"UPDATE access_log SET recording_id = 'forged' WHERE id = {rows[1].id}")
    rechain_from(ledger, int(rows[1].id or 0))
    assert log.verify(until=second_day).intact  # the rows alone hold together
    widened = check_log(log, stored_anchors(store, "artefacts"), None, second_day)
    assert not widened.intact and "does not carry the hash anchored" in widened.problems[0]

    behind_the_triggers(ledger, f"DELETE FROM access_log WHERE id = {rows[2].id}")  # the range's last row
    assert check_log(log, stored_anchors(store, "artefacts"), None, second_day).chain.broken is not None
