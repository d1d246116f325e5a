"""Every route of the search app, called with every kind of request a client could make: none answers with a
call's content (its words, key, parties, audio bytes) without a row in the access log for that request.

The routes are read from the app, not listed here, so a route added later is called too; one this test cannot
fill in fails it until it is taught how.
"""

from __future__ import annotations

import io
import json
import wave
from dataclasses import replace
import re
from pathlib import Path
from typing import Any

import pytest
from fastapi.routing import APIRoute
from starlette.testclient import TestClient
from test_pages_walk import granting, stored_audit
from test_webui import JFK_KEY, ZH_KEY, jfk_rec, world  # noqa: F401  (fixtures)

from asr_tasks import PIPELINE_VERSION
from asr_tasks.audit.rules import Finding
from asr_tasks.audit.saved_searches import SavedSearches, watch_findings
from asr_tasks.audit.trends import write_day_calls
from asr_tasks.records.teams import configured_teams
from asr_tasks.config import Settings
from asr_tasks.index.sqlite import SqliteIndex
from asr_tasks.intake.stores import LocalStore
from asr_tasks.models import Recording
from asr_tasks.records.access_log import AccessLog
from asr_tasks.records.ledger import open_ledger
from asr_tasks.version import DayReports, RecordingVersion
from asr_tasks.web.app import create_app

DAY = "2026-11-27"
RANGES = (None, "bytes=0-", "bytes=00-", "BYTES=0-", "bytes=-99999999", "bytes=1-,0-3", "bytes=1000-1999",
          "items=0-9", "bytes=0-<script>")
QUERIES = ({}, {"q": "country"}, {"q": "收益"}, {"recording_id": "{rid}"}, {"recording": "{rid}"},
           {"q": "country", "format": "json"}, {"include_released": "true"}, {"date_from": DAY, "date_to": DAY},
           {"date": DAY}, {"ids": "{rid}"})
# What a route takes in its body (a search, whatever it names, travels there: never in the URL); {rid} is the call's id.
SEARCHES = [{"q": "country"}, {"q": "收益"}, {"q": "country | 收益", "sounds_like": True}, {"q": "", "agent": "AG-1004"},
            {"q": "", "date_from": DAY, "date_to": DAY}]
BODIES: dict[tuple[str, str], list[dict[str, Any]]] = {
    ("POST", "/"): [{}, *SEARCHES],
    ("POST", "/api/search"): SEARCHES,
    ("POST", "/api/counts"): SEARCHES,
    ("POST", "/api/export"): [{**s, "format": f} for s in SEARCHES for f in ("csv", "json")],
    ("POST", "/api/produce.zip"): [{"ids": ["{rid}"]}, *SEARCHES, {"ids": ["{rid}"], "original": True}],
    ("POST", "/call/{recording_id}"): [{}, *SEARCHES],
    ("POST", "/watches"): [{}, *SEARCHES],
    ("DELETE", "/api/watches"): [{"name": "premiums"}],
    ("POST", "/api/holds"): [{"scope": "agent", "value": "AG-1004", "why": "litigation"}],
    ("POST", "/api/holds/{hold_id}/release"): [{"why": "case closed"}],
    ("POST", "/api/erase"): [{"key": ZH_KEY, "reason": "customer-request"}],
    ("POST", "/api/watches"): [{"name": "premiums", "q": "premium"}],
    ("POST", "/api/reviews/{finding_id}"): [{"date": DAY, "status": "confirmed"}],
    ("POST", "/api/scores/{recording_id}"): [{"question": "empathy", "answer": "yes", "why": "kind"}],
}
FINDING = "f" * 24  # the day's one finding (``stored_audit``), which a reviewer confirms


def markers(jfk: Path) -> list[str | bytes]:
    """What of the two calls must not go out unlogged: words, keys, agents, and bytes from inside the audio."""
    audio = jfk.read_bytes()
    return ["fellow Americans", "your country", "这款产品", "收益多少", "call_0005_jfk", "call_0009", "AG-1004", "AG-1001",
            audio[1000:1024], audio[-24:]]


def buzz_wav() -> bytes:
    """A tenth of a second of a buzz: audio of its own for a call, no run of bytes of the JFK recording's."""
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(bytes(1 + n % 200 for n in range(1600)))
    return out.getvalue()


def asked(method: str, path: str, queries: tuple[dict[str, str], ...]) -> tuple[dict[str, str], ...]:
    """The query strings to send a route: each of ``queries``, or none where the route takes what it is asked in
    its body (``BODIES``: those are what vary)."""
    return ({},) if (method, path) in BODIES else queries


def bodies(method: str, path: str, rid: str) -> list[dict[str, Any] | None]:
    """What to send in the body of a route's requests (none for a GET), the call's id filled in."""
    if method not in ("POST", "DELETE"):
        return [None]
    return [json.loads(json.dumps(body).replace("{rid}", rid)) for body in BODIES.get((method, path), [{}])]


def filled(path: str, rid: str, fmt: str) -> str:
    """A route's path with its parameters filled in; a parameter this test does not know fails it."""
    values = {"recording_id": rid, "fmt": fmt, "day": DAY, "hold_id": "1", "name": "premiums", "finding_id": FINDING,
              "table": "findings"}
    unknown = set(re.findall(r"{(\w+)}", path)) - set(values)
    assert not unknown, f"{path}: the door test cannot fill in {unknown}; teach it"
    return re.sub(r"{(\w+)}", lambda m: values[m.group(1)], path)


def test_no_route_answers_with_a_call_without_a_row_in_the_access_log(
        settings: Settings, world: tuple[SqliteIndex, LocalStore], jfk_rec: Recording, jfk: Path) -> None:  # noqa: F811
    store = world[1]
    open_ledger(settings.ledger).sensed([jfk_rec], "m", PIPELINE_VERSION)  # the day's page lists its key
    version = RecordingVersion(DAY, jfk_rec.recording_id, "1")
    store.put_bytes(settings.storage.artefacts_bucket, version.unredacted("m"),
                    store.get_bytes(settings.storage.artefacts_bucket, version.gated("m")))
    stored_audit(settings, store, [Finding(FINDING, "promise-of-return", "high", "", jfk_rec.recording_id, jfk_rec.key,
                                           DAY, "AG-1004", "agent", 1.0, 3.0, "ask not what your country")])
    app = create_app(settings)
    client, access = TestClient(app), AccessLog(open_ledger(settings.ledger))
    content = markers(jfk)
    routes = sorted((r for r in app.routes if isinstance(r, APIRoute)), key=lambda r: r.path == "/api/erase")
    answered, served = set(), []
    for route in routes:
        for method in sorted(route.methods):
            for fmt in ("txt", "srt", "vtt", "json", "csv"):
                url = filled(route.path, jfk_rec.recording_id, fmt)
                for query in asked(method, route.path, QUERIES):
                    params = {k: v.replace("{rid}", jfk_rec.recording_id) for k, v in query.items()}
                    for header in RANGES if route.path.startswith("/audio/") else (None,):
                        for body in bodies(method, route.path, jfk_rec.recording_id):
                            before = len(access.entries())
                            answer = client.request(method, url, params=params, json=body,
                                                    headers={"Range": header} if header else {})
                            if answer.status_code < 400:
                                answered.add((method, route.path))
                            said = answer.content + json.dumps(dict(answer.headers)).encode()
                            if (body or {}).get("agent") == "AG-1004":
                                said = said.replace(b"AG-1004", b"")  # the agent searched for, echoed back
                            shown = [m for m in content if (m if isinstance(m, bytes) else m.encode()) in said]
                            if shown:
                                rows = access.entries()[before:]
                                assert rows, (method, url, params, header, shown)  # content went out: a row
                                served.append((method, route.path))
                if "{fmt}" not in route.path:
                    break
    assert answered == {(m, r.path) for r in routes for m in r.methods}, "a route never answered: the test is blind"
    assert {path for _, path in served} >= {"/", "/api/search", "/audio/{recording_id}", "/call/{recording_id}",
                                            "/audio/{recording_id}/original", "/api/recordings/{recording_id}/unredacted",
                                            "/call/{recording_id}/transcript.{fmt}", "/api/export",
                                            "/progress/day/{day}", "/api/holds", "/reviews", "/api/reviews",
                                            "/api/produce.zip"}


@pytest.mark.parametrize("header", ["bytes=0-", "bytes=-10", "bytes=1-,0-3", "bytes=2-1"])
def test_the_bytes_sent_are_the_bytes_logged(client: TestClient, settings: Settings, jfk: Path,  # noqa: F811
                                             jfk_rec: Recording, header: str) -> None:
    """The row names exactly the bytes that went out, so an auditor can tell a whole file from a seek."""
    answer = client.get(f"/audio/{jfk_rec.recording_id}/original", headers={"Range": header})
    detail = AccessLog(open_ledger(settings.ledger)).entries()[-1].detail or ""
    data = jfk.read_bytes()
    if "whole file" in detail:
        assert answer.status_code == 200 and answer.content == data
    else:
        first, last = map(int, re.search(r"bytes (\d+)-(\d+) of", detail).groups())  # type: ignore[union-attr]
        assert answer.status_code == 206 and answer.content == data[first : last + 1]


@pytest.fixture
def client(settings: Settings, world: tuple[SqliteIndex, LocalStore]) -> TestClient:  # noqa: F811
    return TestClient(create_app(settings))



def test_audio_is_the_version_that_was_indexed_or_nothing(client: TestClient, settings: Settings,  # noqa: F811
                                                         jfk_rec: Recording) -> None:
    """An upload under a known key is not the call that was vetted: neither the player nor the original serves
    it in the indexed call's name; and a call whose erasure has begun is gone, though its documents are not yet."""
    from asr_tasks.intake.demo_corpus import JFK

    url = f"/audio/{jfk_rec.recording_id}"
    assert client.get(url).status_code == 200
    source = settings.storage.path("store_root") / "recordings" / JFK_KEY
    source.write_bytes(b"OggS" + JFK.read_bytes()[4:])  # other bytes at the key: another recording
    for path in (url, url + "/original"):
        answer = client.get(path, headers={"Range": "bytes=0-"})
        assert answer.status_code == 409 and "not the version that was indexed" in answer.json()["detail"], path
    source.write_bytes(JFK.read_bytes())
    assert client.get(url).status_code == 200
    ledger = open_ledger(settings.ledger)
    ledger.sensed([jfk_rec], "m", PIPELINE_VERSION)
    ledger.erasing([jfk_rec.recording_id], "officer", "customer-request")
    for path in (url, f"/call/{jfk_rec.recording_id}", f"/call/{jfk_rec.recording_id}/transcript.txt"):
        assert client.get(path).status_code == 410, path


def test_a_team_lead_reaches_no_call_of_another_team_by_any_route(
        settings: Settings, world: tuple[SqliteIndex, LocalStore], jfk_rec: Recording, jfk: Path) -> None:  # noqa: F811
    """Lee leads the retail team (``include/teams.yaml``: AG-1001, the Chinese call's agent) and holds every
    permission that reads calls but the Call Reader's; every route, asked about either call, answers him nothing
    of the wealth team's JFK call (AG-1004): not its words, key, agent or audio, not in a facet, a report, a
    score, a queue or an export. His own team's call he does reach (the test is not blind)."""
    index, store = world
    zh_rid = index.search("收益")[0].recording_id
    # the retail call's rendition (the page plays it, a production holds it), which is not the JFK call's audio
    store.put_bytes(settings.storage.artefacts_bucket, RecordingVersion(DAY, zh_rid, "1").redacted_audio, buzz_wav())
    open_ledger(settings.ledger).sensed([jfk_rec], "m", PIPELINE_VERSION)
    stored_audit(settings, store, [
        Finding(FINDING, "promise-of-return", "high", "", jfk_rec.recording_id, jfk_rec.key, DAY, "AG-1004", "agent",
                1.0, 3.0, "ask not what your country"),
        Finding("e" * 24, "promise-of-return", "high", "", zh_rid, ZH_KEY, DAY, "AG-1001", "agent", 2.0, 5.0,
                "这款产品保证收益")])
    index.replace_findings(DAY, [{"finding_id": FINDING, "recording_id": jfk_rec.recording_id, "rule_id": "r",
                                  "agent_id": "AG-1004", "start": 1.0, "end": 3.0, "matched_text": "your country"}])
    report_key = (settings.storage.artefacts_bucket, DayReports(DAY).audit("json"))
    report = json.loads(store.get_bytes(*report_key))
    report["redaction"] = {"redact_pii": True, "margin_seconds": 0.25, "kinds": [], "recordings_with_pii": 1,
                           "seconds_silenced": 18.5, "missing_renditions": [jfk_rec.recording_id]}
    store.put_bytes(*report_key, json.dumps(report).encode())  # the day's masking: the wealth call's
    write_day_calls(store, settings, DAY, {"date": DAY, "calls": [
        {"recording_id": rid, "agent_id": agent, "non_talk_share": 0.1, "score": 80.0, "findings": {"r": 1}}
        for rid, agent in ((jfk_rec.recording_id, "AG-1004"), (zh_rid, "AG-1001"))]})
    lee = {"read_team", "read_unredacted", "export", "review"}
    app = create_app(settings, index=index, store=store, authorize=granting({"lee": lee}, []))
    client = TestClient(app, headers={"X-User": "lee"})
    theirs = ["fellow Americans", "your country", "call_0005_jfk", "AG-1004", jfk.read_bytes()[1000:1024],
              jfk_rec.recording_id, "18.5 s silenced"]
    ours = ["这款产品", "收益多少", "AG-1001"]
    reached: set[str] = set()
    for route in (r for r in app.routes if isinstance(r, APIRoute)):
        for method in sorted(route.methods):
            for rid in (jfk_rec.recording_id, zh_rid):
                for query in asked(method, route.path, (*QUERIES, {"q": "country | 收益"}, {"q": "", "agent": "AG-1004"},
                                                        {"by": "agent"})):
                    params = {k: v.replace("{rid}", rid) for k, v in query.items()}
                    for body in bodies(method, route.path, rid):
                        url = filled(route.path, rid, "csv" if route.path.startswith("/api/qa/") else "json")
                        answer = client.request(method, url, params=params, json=body)
                        said = answer.content + json.dumps(dict(answer.headers)).encode()
                        if rid == jfk_rec.recording_id:
                            said = said.replace(rid.encode(), b"")  # its id, as asked for, may be echoed back
                        if "agent" in params or (body or {}).get("agent") == "AG-1004":
                            said = said.replace(b"AG-1004", b"")  # so may the agent asked for
                        leaked = [m for m in theirs if (m if isinstance(m, bytes) else m.encode()) in said]
                        assert not leaked, (method, url, params, answer.status_code, leaked)
                        if any(m.encode() in said for m in ours):
                            reached.add(route.path)
    assert reached >= {"/", "/api/search", "/call/{recording_id}", "/api/export", "/reports/qa/{day}", "/reviews",
                       "/trends", "/api/trends",
                       "/api/reviews", "/api/scores", "/call/{recording_id}/transcript.{fmt}",
                       "/api/qa/{table}.{fmt}", "/api/produce.zip"}, reached
    assert client.get(f"/call/{jfk_rec.recording_id}").status_code == 404  # unknown to him, not forbidden
    assert client.get(f"/audio/{jfk_rec.recording_id}").status_code == 404
    assert client.get("/progress").status_code == 403  # the whole backlog is a Call Reader's
    # His saved searches run over his teams' calls, and name no agent of another team.
    assert client.post("/api/watches", json={"name": "theirs", "q": "country", "agent": "AG-1004"}).status_code == 400
    assert client.post("/api/watches", json={"name": "mine", "q": "country | 收益"}).json()["within_teams"] is True
    searches = SavedSearches(open_ledger(settings.ledger)).listed("lee")
    assert {f.agent_id for f in watch_findings(DAY, searches, index, configured_teams(settings))} == {"AG-1001"}
    assert {f.agent_id for f in watch_findings(DAY, [replace(searches[0], within_teams=False)], index,
                                               configured_teams(settings))} == {"AG-1001", "AG-1004"}
    # A call of another team that is being erased is as unknown to him as any other of theirs; a reader is told.
    open_ledger(settings.ledger).erasing([jfk_rec.recording_id], "officer", "customer-request")
    assert client.get(f"/call/{jfk_rec.recording_id}").status_code == 404
    reader = TestClient(create_app(settings, index=index, store=store, authorize=granting({"ada": {"read"}}, [])))
    assert reader.get(f"/call/{jfk_rec.recording_id}", headers={"X-User": "ada"}).status_code == 410
