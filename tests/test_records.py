"""Records management: the append-only access log, legal holds, erasure with tombstones, retention, and the
search page's permissions and answers for erased recordings."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import secrets
import subprocess
import sys
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any, Callable

import pytest
from fastapi import HTTPException
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from asr_tasks.intake.demo_corpus import JFK
from asr_tasks.config import PROJECT_ROOT, Settings
from asr_tasks.index.sqlite import SqliteIndex
from asr_tasks.intake.days import sidecar_key
from asr_tasks.intake.stores import LocalStore, put_json
from asr_tasks.models import Recording, Segment, Transcript, recording_id_for
from asr_tasks.records.access_log import AccessLog
from asr_tasks.records.erasure import Eraser, ErasureSelection, select_keys
from asr_tasks.records.holds import HoldError, Holds
from asr_tasks.records.ledger import Ledger, open_ledger
from asr_tasks.records.permissions import OPERATOR_ROLE, PERMISSIONS, RESOURCE, fab_custom_roles
from asr_tasks.records.locking import rule_for
from asr_tasks.records.retention import run_retention
from asr_tasks.states import RecordingState
from asr_tasks.web.app import create_app

JFK_ETAG = hashlib.md5(JFK.read_bytes(), usedforsecurity=False).hexdigest()
DAY = "2026-11-27"


def recording(name: str, customer: str = "CU-1", agent: str = "AG-1", day: str = DAY) -> Recording:
    """A version of the JFK recording (its ETag is the file's) under a key of its own."""
    key = f"calls/{day.replace('-', '/')}/{name}"
    return Recording(recording_id_for("recordings", key, JFK_ETAG), "recordings", key, JFK_ETAG, 10,
                     name.split(".")[0], day, agent_id=agent, customer_id=customer)


def chosen(ledger: Ledger, **which: str) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """The keys an erasure of ``which`` takes (``select_keys`` with the selection as ``asr erase`` makes it)."""
    return select_keys(ledger, ErasureSelection(reason="customer-request", **which))  # type: ignore[arg-type]


def test_the_access_log_cannot_be_changed_on_sqlite(tmp_path: Path) -> None:
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    log = AccessLog(ledger)
    log.append("auditor", "search", query="保证收益", filters={"agent": "AG-1", "speaker": None}, hits=3)
    log.append("auditor", "play", recording_id="r1", detail="redacted from 16.0 s")
    assert [(e.user, e.action, e.query, e.filters, e.hits) for e in log.entries()] == [
        ("auditor", "search", "保证收益", {"agent": "AG-1"}, 3), ("auditor", "play", None, None, None)]
    for sql in ("UPDATE access_log SET user = 'someone else'", "DELETE FROM access_log"):
        with pytest.raises(DBAPIError, match="append-only"), ledger.engine.begin() as db:
            db.execute(text(sql))
    assert len(AccessLog(Ledger(ledger.url)).entries()) == 2  # reopened: the rows and the guard stay
    with pytest.raises(DBAPIError, match="append-only"), Ledger(ledger.url).engine.begin() as db:
        db.execute(text("DELETE FROM access_log"))
    assert not hasattr(log, "delete") and not hasattr(log, "update")


def test_on_postgresql_the_pipeline_role_may_only_insert_and_select(postgres_server: str) -> None:
    import psycopg2

    name = f"asr_pipeline_{secrets.token_hex(4)}"
    admin = psycopg2.connect(postgres_server)
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f"CREATE ROLE \"{name}\" LOGIN PASSWORD 'pw'")
        cur.execute(f'CREATE DATABASE "{name}" OWNER "{name}"')
    try:
        url = make_url(postgres_server).set(username=name, password="pw", database=name)
        ledger = Ledger(url.render_as_string(hide_password=False))  # the pipeline's role creates the schema
        log = AccessLog(ledger)
        log.append("auditor", "play", recording_id="r1")
        for sql in ("UPDATE access_log SET \"user\" = 'x'", "DELETE FROM access_log", "TRUNCATE access_log"):
            with pytest.raises(DBAPIError, match="permission denied"), ledger.engine.begin() as db:
                db.execute(text(sql))
        superuser = Ledger(make_url(postgres_server).set(database=name).render_as_string(hide_password=False))
        with pytest.raises(DBAPIError, match="append-only"), superuser.engine.begin() as db:
            db.execute(text("DELETE FROM access_log"))  # not even the database's superuser, by accident
        assert [e.recording_id for e in log.entries()] == ["r1"]
        superuser.engine.dispose()
        ledger.engine.dispose()
    finally:
        with admin.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            cur.execute(f'DROP ROLE IF EXISTS "{name}"')
        admin.close()


def test_holds_cover_keys_agents_customers_and_days(tmp_path: Path) -> None:
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    holds = Holds(ledger, AccessLog(ledger))
    by_key = holds.place("key", "litigation 17", "officer", value="calls/2026/11/27/a.wav", future=True)  # no call yet
    holds.place("customer", "complaint 9", "officer", value="CU-7")
    days = holds.place("dates", "regulator's review", "officer", date_from="2026-11-01", date_to="2026-11-15")
    row = {"key": "calls/2026/11/20/b.wav", "agent_id": "AG-1", "customer_id": "CU-1", "call_date": "2026-11-20"}
    assert holds.holding(row) is None
    assert holds.holding({**row, "customer_id": "CU-7"}).why == "complaint 9"  # type: ignore[union-attr]
    assert holds.holding({**row, "call_date": "2026-11-15"}) == days
    assert holds.holding({**row, "key": "calls/2026/11/27/a.wav"}) == by_key
    released = holds.release(by_key.id, "case closed", "officer")
    assert not released.active and released.release_why == "case closed"
    assert [h.id for h in holds.listed()] == [2, 3] and len(holds.listed(include_released=True)) == 3
    with pytest.raises(HoldError, match="released already"):
        holds.release(by_key.id, "again", "officer")
    with pytest.raises(HoldError, match="needs a reason"):
        holds.place("agent", " ", "officer", value="AG-1")
    with pytest.raises(HoldError, match="after date_to"):
        holds.place("dates", "x", "officer", date_from="2026-12-02", date_to="2026-12-01")
    assert [e.action for e in AccessLog(ledger).entries()] == ["hold", "hold", "hold", "release"]


@pytest.fixture
def day(settings: Settings, jfk: Path) -> tuple[LocalStore, SqliteIndex, list[Recording]]:
    """Three recordings of a day, sensed, transcribed into artefacts, indexed and reported."""
    from asr_tasks.gate.reports import write_reports
    from asr_tasks.intake.artefacts import Artefacts
    from asr_tasks.version import RecordingVersion

    store = LocalStore(settings.storage.path("store_root"))
    index = SqliteIndex(settings.index.path("index_path"))
    recs = [recording("a.flac", customer="CU-1"), recording("b.flac", customer="CU-2"),
            recording("c.flac", customer="CU-2", day="2026-11-28")]
    open_ledger(settings.ledger).sensed(recs, "m", "2")
    rows = []
    for n, rec in enumerate(recs):
        store.put_file("recordings", rec.key, jfk)
        store.put_bytes("recordings", sidecar_key(rec.key), json.dumps({"customer_id": rec.customer_id}).encode())
        transcript = Transcript(rec, 11.0, [Segment(rec.recording_id, 0, "agent", 1.0, 3.0, f"secret words {n}")],
                                "en", "m", "2")
        put_json(store, settings.storage.artefacts_bucket, RecordingVersion.of(rec).gated("m"), transcript.to_dict())
        store.put_bytes(settings.storage.artefacts_bucket, RecordingVersion.of(rec).pcm(0), b"\0" * 64)
        index.replace_recording(transcript)
        rows.append({"recording_id": rec.recording_id, "key": rec.key, "call_date": rec.call_date,
                     "quality": "pass", "quality_failures": "", "state": "indexed", "reason": ""})
    write_reports(rows, Artefacts(store, settings.storage.artefacts_bucket, "m"), settings.quality)
    return store, index, recs


def test_erasing_a_customer_leaves_a_tombstone_and_nothing_of_the_calls(
    settings: Settings, day: tuple[LocalStore, SqliteIndex, list[Recording]], tmp_path: Path
) -> None:
    from asr_tasks.version import RecordingVersion

    store, index, recs = day
    ledger = open_ledger(settings.ledger)
    access = AccessLog(ledger)
    eraser = Eraser(settings, ledger, store, index, access)
    Holds(ledger, access).place("key", "litigation 17", "officer", value=recs[2].key)
    result = eraser.erase(chosen(ledger, customer="CU-2"), "customer-request", "officer")
    assert result.erased == [recs[1].key] and [k for k, _ in result.held] == [recs[2].key]
    assert "legal hold 1 on key" in result.held[0][1]
    bucket = settings.storage.artefacts_bucket
    assert not list(store.list_keys(bucket, RecordingVersion.of(recs[1]).prefix)) and not store.exists("recordings", recs[1].key)
    assert not store.exists("recordings", sidecar_key(recs[1].key))
    assert index.recording(recs[1].recording_id) is None and not index.segments(recs[1].recording_id)
    assert [h.key for h in index.search("secret")] == sorted([recs[0].key, recs[2].key])
    report = " ".join(store.get_bytes(bucket, k.key).decode() for k in store.list_keys(bucket, "v2/2026-11-27/quality"))
    assert recs[1].recording_id not in report and recs[1].key not in report and recs[0].key in report
    # The tombstone keeps the version's id, who, when and the reason's code: no key, party, day or ETag.
    tomb = next(r for r in ledger.rows() if r["recording_id"] == recs[1].recording_id)
    assert (tomb["state"], tomb["erased_by"], tomb["reason"]) == (RecordingState.ERASED, "officer", "customer-request")
    assert tomb["segments"] is None and tomb["erased_at"]
    assert tomb["key"] == f"erased/{recs[1].recording_id}" and tomb["etag"] == recs[1].recording_id
    assert {k: tomb[k] for k in ("call_date", "agent_id", "customer_id", "size", "model")} == dict.fromkeys(
        ("call_date", "agent_id", "customer_id", "size", "model"))
    erased_rows = [e.to_dict() for e in access.entries(actions=("erase",))]
    assert [(e["action"], e["recording_id"]) for e in erased_rows] == [("erase", recs[1].recording_id)]
    assert recs[1].key not in str(erased_rows) and "customer-request" in str(erased_rows)
    ledger_bytes = b"".join(p.read_bytes() for p in tmp_path.glob("ledger.sqlite*"))  # free pages and WAL too
    assert recs[1].key.encode() not in ledger_bytes and recs[2].key.encode() in ledger_bytes
    with pytest.raises(ValueError, match="customer-request"):
        eraser.erase(chosen(ledger, key=recs[0].key), "the customer asked (ticket 4411)", "officer")

    # Idempotent: the same erasure again finds nothing left to erase; sensing the key again does not bring it back.
    assert chosen(ledger, customer="CU-2").keys() == {("recordings", recs[2].key)}
    assert ledger.sensed([recs[1]], "m", "2") == {recs[1].recording_id}  # the stages leave it alone
    assert ledger.state(recs[1].recording_id) == RecordingState.ERASED

    client = TestClient(create_app(settings, index=index, store=store))
    assert client.get(f"/audio/{recs[1].recording_id}").status_code == 410
    assert client.get("/", params={"recording_id": recs[1].recording_id}).status_code == 410
    assert client.get(f"/audio/{recs[0].recording_id}").status_code == 200


def test_retention_erases_what_expired_in_batches_except_what_is_held(
    settings: Settings, day: tuple[LocalStore, SqliteIndex, list[Recording]]
) -> None:
    store, index, recs = day
    assert rule_for("recordings", "calls/2026/x.wav", {"recordings/": 10, "recordings/calls/": 30}) == (
        "recordings/calls/", 30)
    ledger = open_ledger(settings.ledger)
    access = AccessLog(ledger)
    Holds(ledger, access).place("customer", "case 5", "officer", value="CU-1")  # a.flac
    rules = settings.override(retention_days={"recordings/calls/": 3}, retention_batch=1)
    assert run_retention(rules, date(2026, 11, 29), ledger, store, index, access).erased == 0  # kept 27th-29th
    assert run_retention(rules, date(2026, 11, 30), ledger, store, index, access).to_dict() == {
        "finished": 0, "erased": 1, "held": 1, "batches": 2}  # the 27th's two, one held; the 28th's still kept
    assert run_retention(rules, date(2026, 12, 31), ledger, store, index, access).to_dict() == {
        "finished": 0, "erased": 1, "held": 1, "batches": 2}
    assert {r["recording_id"]: r["state"] for r in ledger.rows()} == {
        recs[0].recording_id: "sensed", recs[1].recording_id: RecordingState.ERASED,
        recs[2].recording_id: RecordingState.ERASED}
    assert index.recording(recs[0].recording_id) is not None  # the held call survives retention
    assert all(e.user == "retention" and str(e.detail).endswith(": retention") for e in access.entries(actions=("erase",)))


def test_a_held_key_with_a_new_version_waiting_is_neither_erased_nor_expired(
    settings: Settings, day: tuple[LocalStore, SqliteIndex, list[Recording]]
) -> None:
    """Erasure and retention ask the holds before they remove anything, whichever of the key's versions the hold
    covers: here the held one, whose sidecar names the customer, not the re-upload that waits behind it."""
    from asr_tasks.version import RecordingVersion

    store, index, recs = day
    ledger = open_ledger(settings.ledger)
    access = AccessLog(ledger)
    hold = Holds(ledger, access).place("customer", "complaint 9", "officer", value="CU-1")  # a.flac
    again = dataclasses.replace(recs[0], etag="e2", recording_id=recording_id_for("recordings", recs[0].key, "e2"),
                                customer_id=None)
    assert Holds(ledger, access).sense([again], "m", "2") == {again.recording_id}
    assert ledger.state(again.recording_id) == RecordingState.HELD
    eraser = Eraser(settings, ledger, store, index, access)
    result = eraser.erase(chosen(ledger, key=recs[0].key), "customer-request", "officer")
    assert result.erased == [] and "complaint 9" in result.held[0][1]
    run = run_retention(settings.override(retention_days={"recordings/calls/": 3}), date(2026, 12, 31), ledger, store,
                        index, access)
    assert (run.erased, run.held) == (2, 1)
    assert index.recording(recs[0].recording_id) is not None and store.exists("recordings", recs[0].key)
    assert store.exists(settings.storage.artefacts_bucket, RecordingVersion.of(recs[0]).gated("m"))

    Holds(ledger, access).release(hold.id, "settled", "officer")
    assert eraser.erase(chosen(ledger, key=recs[0].key), "customer-request", "officer").erased == [recs[0].key]
    assert {ledger.state(recs[0].recording_id), ledger.state(again.recording_id)} == {RecordingState.ERASED}
    assert index.recording(recs[0].recording_id) is None


def test_every_route_asks_for_its_own_permission(settings: Settings,
                                                 day: tuple[LocalStore, SqliteIndex, list[Recording]]) -> None:
    store, index, recs = day

    def granting(*allowed: str) -> Callable[[str], Callable[..., str]]:
        def authorize(permission: str) -> Callable[..., str]:
            def check() -> str:
                if permission not in allowed:
                    raise HTTPException(status_code=403, detail=f"may not {PERMISSIONS[permission].allows}")
                return "viewer"
            return check
        return authorize

    rid = recs[0].recording_id
    routes = {"page": ("/", {"q": "secret"}), "api": ("/api/search", {"q": "secret"}),
              "counts": ("/api/counts", {"q": "secret"}), "audio": (f"/audio/{rid}", {}),
              "original": (f"/audio/{rid}/original", {}), "unredacted": (f"/api/recordings/{rid}/unredacted", {}),
              "log": ("/access-log", {}), "holds": ("/api/holds", {})}
    expected = {"read": {"page", "api", "counts", "audio"}, "read_unredacted": {"original", "unredacted"},
                "access_log": {"log"}, "erase_hold": {"holds"}}
    granted = {"unredacted": 404}  # allowed, and none was kept (keep_unredacted is off)
    for permission, allowed in expected.items():
        client = TestClient(create_app(settings, index=index, store=store, authorize=granting(permission)))
        answers = {name: (client.post(url, data=params) if params else client.get(url)).status_code
                   for name, (url, params) in routes.items()}
        assert answers == {name: granted.get(name, 200) if name in allowed else 403 for name in routes}, permission
    officer = TestClient(create_app(settings, index=index, store=store, authorize=granting("erase_hold")))
    reader = TestClient(create_app(settings, index=index, store=store, authorize=granting("read")))
    hold = {"scope": "customer", "value": "CU-1", "why": "complaint 12"}
    assert reader.post("/api/holds", json=hold).status_code == 403
    placed = officer.post("/api/holds", json=hold)
    assert placed.status_code == 201 and placed.json()["held_by"] == "viewer"
    assert officer.post("/api/holds", content=json.dumps(hold), headers={"Content-Type": "text/plain"}
                        ).status_code == 422  # a cross-site form cannot place one
    ask = {"customer": "CU-1", "reason": "customer-request"}
    plan = officer.post("/api/erase", json=ask).json()
    assert (plan["keys"], plan["held"]) == (1, 1) and "complaint 12" in plan["first_held"][0]["hold"]
    erased = officer.post("/api/erase", json={**ask, "confirm": plan["token"]}).json()
    assert erased["erased"] == [] and "complaint 12" in erased["held"][0]["hold"]
    assert officer.post(f"/api/holds/{placed.json()['id']}/release", json={"why": "settled"}).status_code == 200
    plan = officer.post("/api/erase", json={**ask, "dry_run": True}).json()
    assert (plan["keys"], plan["held"]) == (1, 0)
    assert officer.post("/api/erase", json={**ask, "confirm": plan["token"]}).json()["erased"] == [recs[0].key]
    assert reader.get(f"/audio/{rid}").status_code == 410
    entries = AccessLog(open_ledger(settings.ledger)).entries()
    assert {(e.user, e.action) for e in entries} == {("viewer", "search"), ("viewer", "play"), ("viewer", "hold"),
                                                     ("viewer", "release"), ("viewer", "erase"), ("viewer", "list")}
    assert any((e.detail or "").startswith("original from 0.0 s, the whole file, ") for e in entries)


def test_the_roles_are_one_per_permission_and_the_operators() -> None:
    from airflow.providers.fab.auth_manager.security_manager.override import FabAirflowSecurityManagerOverride

    roles = json.loads(fab_custom_roles())
    assert set(roles) == {p.role for p in PERMISSIONS.values()} | {OPERATOR_ROLE}
    for p in PERMISSIONS.values():
        assert roles[p.role] == [{"action": p.action, "resource": RESOURCE}], p.role
    operator = {(grant["action"], grant["resource"]) for grant in roles[OPERATOR_ROLE]}
    assert len(operator) == len(roles[OPERATOR_ROLE]) and {r for _, r in operator} & {RESOURCE} == set()
    # Airflow's Op role, whole on the DAGs, their runs and tasks, the logs, pools and backfills; less elsewhere.
    [op] = [set(c["perms"]) for c in FabAirflowSecurityManagerOverride.ROLE_CONFIGS if c["role"] == "Op"]
    assert operator <= op
    for resource in ("DAGs", "DAG Runs", "Task Instances", "Task Logs", "Pools", "Backfills"):
        assert {p for p in op if p[1] == resource} <= operator, resource
    assert {a for a, r in operator if r == "Connections"} == {"can_read", "menu_access"}
    assert {a for a, r in operator if r == "XComs"} == {"can_read", "menu_access"}
    assert {r for _, r in operator} & {"Variables", "Configurations"} == set()

    # The roles of docs/records.md's table are the roles created, and Admin (FAB's own, never created here).
    page = (PROJECT_ROOT / "docs" / "records.md").read_text(encoding="utf-8")
    table = page[page.index("| role | action on `Call recordings` | routes |"):].split("\n\n")[0].splitlines()[2:]
    documented = {row.split("|")[1].strip(): row.split("|")[2].strip() for row in table}
    assert set(documented) == set(roles) | {"Admin"}
    assert documented[OPERATOR_ROLE] == "none" and documented["Admin"] == "every one"
    assert all(documented[p.role] == f"`{p.action}`" for p in PERMISSIONS.values())
    proc = subprocess.run([sys.executable, "-m", "asr_tasks.cli", "roles", "--table"], cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "Call Access Auditor" in proc.stdout and OPERATOR_ROLE in proc.stdout, proc.stderr


def test_the_nightly_qa_report_lists_the_recordings_opened_that_day(
    settings: Settings, day: tuple[LocalStore, SqliteIndex, list[Recording]], jfk: Path
) -> None:
    from asr_tasks.audit.reports import run_audit
    from asr_tasks.audit.rules import load_rules

    store, index, recs = day
    client = TestClient(create_app(settings, index=index, store=store))
    assert client.get(f"/audio/{recs[0].recording_id}", params={"t": 12.5}).status_code == 200
    today = datetime.now(timezone.utc).date().isoformat()  # the day the recording was opened (UTC)
    run_audit(today, load_rules(settings.audit.path("qa_rules_dir")), index, store, settings)
    prefix = f"reports/qa/{today}/qa-audit"
    report = json.loads(store.get_bytes(settings.storage.artefacts_bucket, f"{prefix}.json"))
    assert [(o["action"], o["recording_id"], o["detail"]) for o in report["opened"]] == [
        ("play", recs[0].recording_id, f"as uploaded from 12.5 s, the whole file, {jfk.stat().st_size} bytes")]
    assert recs[0].recording_id in store.get_bytes(settings.storage.artefacts_bucket, f"{prefix}.html").decode()


def test_an_erasure_cut_short_before_the_reports_is_finished_by_the_next_one(
    settings: Settings, day: tuple[LocalStore, SqliteIndex, list[Recording]], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, index, recs = day
    ledger = open_ledger(settings.ledger)
    eraser = Eraser(settings, ledger, store, index, AccessLog(ledger))

    def crash(day: str, ids: set[str]) -> None:
        raise KeyboardInterrupt  # the process dies after the artefacts went, before the reports were rewritten

    with monkeypatch.context() as patch:
        patch.setattr(eraser, "_rewrite_reports", crash)
        with pytest.raises(KeyboardInterrupt):
            eraser.erase(chosen(ledger, key=recs[0].key), "customer-request", "officer")
    assert ledger.state(recs[0].recording_id) == "erasing"
    result = eraser.erase(chosen(ledger, key=recs[2].key), "mistaken-upload", "officer")
    assert (result.erased, result.finished) == ([recs[2].key], [recs[0].key])
    assert ledger.state(recs[0].recording_id) == RecordingState.ERASED
    tomb = next(r for r in ledger.rows() if r["recording_id"] == recs[0].recording_id)
    assert tomb["reason"] == "customer-request"  # the first erasure's who and why stay on the tombstone
    bucket = settings.storage.artefacts_bucket
    report = " ".join(store.get_bytes(bucket, k.key).decode() for k in store.list_keys(bucket, "v2/2026-11-27/quality"))
    assert recs[0].recording_id not in report and recs[1].recording_id in report


def test_the_access_log_page_shows_the_newest_first_and_links_the_older(settings: Settings) -> None:
    """Past a page of entries the newest play is still on the first page; the older ones are a link away."""
    from asr_tasks.web.routers.access_log import PAGE_ROWS

    access = AccessLog(open_ledger(settings.ledger))
    for n in range(PAGE_ROWS + 2):
        access.append("auditor", "search", query=f"query {n}", hits=n)
    access.append("auditor", "play", recording_id="r" * 24, detail="as uploaded from 1.0 s")
    client = TestClient(create_app(settings))
    first = client.get("/access-log").text
    assert first.count("<tr><td class=\"at\">") == PAGE_ROWS and "as uploaded from 1.0 s" in first
    assert first.index("as uploaded from 1.0 s") < first.index(f"query {PAGE_ROWS + 1}")
    assert f'href="access-log?recording={"r" * 24}&amp;days=7"' in first and "query 0<" not in first
    older = client.get("/access-log", params={"page": 1}).text
    assert older.count("<tr><td class=\"at\">") == 5 and "query 0<" in older  # and the two reads of the page and "Older entries" not in older
    assert 'class="older" href="access-log?days=7&amp;who=&amp;recording=&amp;page=1"' in first
