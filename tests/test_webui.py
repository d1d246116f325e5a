"""The search page: HTTP behaviour, Airflow's login in front of the plugin, and a real browser playing a hit.

The browser test drives Debian's headless Chromium over the DevTools protocol:
type a query, press Enter, click a hit, and check that the audio element seeked
to the hit's first second and plays from there. Its screenshot is kept in
var/test-artefacts/search-page.png.
"""

from __future__ import annotations

import base64
import csv
import getpass
import hashlib
import html
import http.client
import http.cookies
import io
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest
import uvicorn
from browser import Browser
from fastapi import FastAPI, Request
from fastapi.testclient import TestClient

from asr_tasks.config import PROJECT_ROOT, Settings
from asr_tasks.index.sqlite import SqliteIndex
from asr_tasks.intake.demo_corpus import JFK
from asr_tasks.intake.stores import LocalStore
from asr_tasks.models import Quarantine, Recording, Segment, Transcript, recording_id_for
from asr_tasks.records.access_log import AccessLog
from asr_tasks.records.ledger import open_ledger
from asr_tasks.version import RecordingVersion
from asr_tasks.web.app import create_app

ARTEFACTS = PROJECT_ROOT / "var" / "test-artefacts"
JFK_KEY = "calls/2026/11/27/call_0005_jfk.flac"
JFK_SOURCE = JFK
ZH_KEY = "calls/2026/11/27/call_0009.wav"
JFK_LINES = [
    (0.3, 3.0, "And so, my fellow Americans,"),
    (3.3, 7.7, "ask not what your country can do for you,"),
    (7.9, 10.6, "ask what you can do for your country."),
]


JFK_ETAG = hashlib.md5(JFK.read_bytes(), usedforsecurity=False).hexdigest()  # what the store says of the file


def _recording(key: str, agent: str, etag: str = JFK_ETAG) -> Recording:
    return Recording(recording_id=recording_id_for("recordings", key, etag), bucket="recordings", key=key, etag=etag,
                     size=1, call_id=key.rsplit("/", 1)[-1].split(".")[0], call_date="2026-11-27", agent_id=agent)


@pytest.fixture
def jfk_rec() -> Recording:
    return _recording(JFK_KEY, "AG-1004")


@pytest.fixture
def world(settings: Settings, jfk: Path, jfk_rec: Recording) -> tuple[SqliteIndex, LocalStore]:
    """A store holding the JFK recording and an index with its transcript and a Chinese call."""
    store = LocalStore(settings.storage.path("store_root"))
    store.put_file("recordings", JFK_KEY, jfk)
    index = SqliteIndex(settings.index.path("index_path"))
    zh = _recording(ZH_KEY, "AG-1001")
    for transcript in (
        Transcript(recording=jfk_rec, duration=11.0, language="en", model="m", pipeline_version="1",
                   segments=[Segment(jfk_rec.recording_id, 0, "mixed", s, e, t) for s, e, t in JFK_LINES]),
        Transcript(recording=zh, duration=20.0, language="zh", model="m", pipeline_version="1", quality="needs_review",
                   segments=[Segment(zh.recording_id, 0, "agent", 2.0, 5.0, "这款产品保证收益 <script>alert(1)</script>"),
                             Segment(zh.recording_id, 1, "customer", 6.0, 8.0, "收益多少？")]),
    ):
        gated(store, settings, transcript)
        index.replace_recording(transcript)
    return index, store


def gated(store: LocalStore, settings: Settings, transcript: Transcript) -> None:
    """The call's gated transcript where the pipeline version that indexed it keeps it: what says whether
    personal data was said in the call, so whether its audio may be played as uploaded."""
    version = RecordingVersion(transcript.recording.call_date, transcript.recording.recording_id,
                               transcript.pipeline_version)
    store.put_bytes(settings.storage.artefacts_bucket, version.gated(transcript.model),
                    json.dumps(transcript.to_dict()).encode())


@pytest.fixture
def client(settings: Settings, world: tuple[SqliteIndex, LocalStore]) -> TestClient:
    return TestClient(create_app(settings))


def test_every_request_for_audio_is_logged_with_the_bytes_it_got(
        client: TestClient, settings: Settings, jfk: Path, jfk_rec: Recording) -> None:
    """Whatever its Range header, each request for a call's audio writes a row that names the bytes sent (not the
    header asked), for the page's player and for the original alike; a header that is not one byte range gets
    the whole file, and the row says so."""
    size = len(jfk.read_bytes())
    asked = {"bytes=00-": f"bytes 0-{size - 1} of {size}", "BYTES=0-": f"bytes 0-{size - 1} of {size}",
             "bytes=-99999999": f"bytes 0-{size - 1} of {size}", "bytes=1-,0-3": f"the whole file, {size} bytes",
             "bytes=1000-1999": f"bytes 1000-1999 of {size}", "bytes = 5 - 9": f"bytes 5-9 of {size}",
             "items=0-9": f"the whole file, {size} bytes", "bytes=0-<script>" + "9" * 500: f"the whole file, {size} bytes"}
    for header, sent in asked.items():
        for url, rendition in ((f"/audio/{jfk_rec.recording_id}?t=2", "as uploaded from 2.0 s"),
                               (f"/audio/{jfk_rec.recording_id}/original", "original from 0.0 s")):
            answer = client.get(url, headers={"Range": header})
            assert answer.status_code in (200, 206), (url, header)
            got = answer.content
            assert len(got) == int(answer.headers["content-length"]) == (
                size if "whole" in sent else int(sent.split()[1].split("-")[1]) - int(sent.split()[1].split("-")[0]) + 1)
            last = AccessLog(open_ledger(settings.ledger)).entries(newest_first=True, limit=1)[0]
            assert (last.action, last.recording_id, last.detail) == ("play", jfk_rec.recording_id,
                                                                     f"{rendition}, {sent}"), header
    assert client.get(f"/audio/{jfk_rec.recording_id}").status_code == 200  # no Range: the whole file
    plays = [e.detail or "" for e in AccessLog(open_ledger(settings.ledger)).entries() if e.action == "play"]
    assert len(plays) == 2 * len(asked) + 1 and plays[-1] == f"as uploaded from 0.0 s, the whole file, {size} bytes"
    assert not any("<" in d for d in plays)


def test_a_card_number_searched_for_is_logged_masked(client: TestClient, settings: Settings,
                                                     jfk_rec: Recording) -> None:
    """What people type is personal data too (the search box, a filter, the search a call page was opened from):
    the access log keeps it as the policy masks it."""
    card = "4111 1111 1111 1111"
    assert client.post("/", data={"q": f"card {card}"}).status_code == 200  # the page's form
    for url in ("/api/search", "/api/counts", "/api/export"):
        body = {"q": f"card {card}", **({"format": "csv"} if url == "/api/export" else {})}
        assert client.post(url, json=body).status_code == 200, url
    assert client.post("/api/search", json={"q": "country", "agent": card}).status_code == 200
    assert client.post(f"/call/{jfk_rec.recording_id}", data={"q": card}).status_code == 200
    entries = AccessLog(open_ledger(settings.ledger)).entries()
    assert len(entries) == 6 and sum("[CARD ****1111]" in (e.query or "") for e in entries) == 5  # the call page too
    assert "4111 1111" not in " ".join(json.dumps(e.to_dict(), ensure_ascii=False) for e in entries)
    assert client.post("/api/search", json={"q": "x", "after": "A" * 40_000}).status_code == 422  # no cursor
    # what the app says of a request is not what someone typed: a byte range is never taken for a card number
    from asr_tasks.records.access_log import open_access_log

    access = open_access_log(settings)
    assert access.policy is not None  # the app's, which masks what people typed
    access.append("auditor", "play", recording_id=jfk_rec.recording_id,
                  detail="as uploaded from 16.0 s, bytes 694624937-1023320223 of 1067485037")
    assert access.entries()[-1].detail == "as uploaded from 16.0 s, bytes 694624937-1023320223 of 1067485037"


def test_audio_is_served_with_ranges(client: TestClient, jfk: Path, jfk_rec: Recording) -> None:
    data = jfk.read_bytes()
    url = f"/audio/{jfk_rec.recording_id}"
    whole = client.get(url)
    assert whole.status_code == 200 and whole.content == data
    assert whole.headers["accept-ranges"] == "bytes" and whole.headers["content-type"] == "audio/flac"
    part = client.get(url, headers={"Range": "bytes=1000-1999"})
    assert part.status_code == 206 and part.content == data[1000:2000]
    assert part.headers["content-range"] == f"bytes 1000-1999/{len(data)}"
    tail = client.get(url, headers={"Range": "bytes=-10"})
    assert tail.status_code == 206 and tail.content == data[-10:]
    beyond = client.get(url, headers={"Range": f"bytes={len(data)}-"})
    assert beyond.status_code == 416 and beyond.headers["content-range"] == f"bytes */{len(data)}"
    assert client.get("/audio/0123456789abcdef01234567").status_code == 404


def test_page_lists_hits_with_escaped_highlights_and_counts(client: TestClient) -> None:
    page = client.post("/", data={"q": "收益 | country", "speaker": "agent"}).text
    assert page.count('<li class="hit') == 1
    assert 'class="hit needs-review"' in page and ">needs review</span>" in page  # the gate flagged this call
    assert 'name="narrow" value="agent=AG-1001" class="link narrow">AG-1001</button> (1)' in page  # a facet
    asked = re.search(r'<form id="asked" method="post" action="./" hidden>(.*?)</form>', page)
    assert asked and re.findall(r'name="(\w+)" value="([^"]*)"', asked.group(1)) == [("q", "收益 | country"),
                                                                                   ("speaker", "agent")]
    assert '<form id="exported" method="post" action="api/export" hidden>' in page  # the whole result
    zh = _recording(ZH_KEY, "AG-1001").recording_id
    assert f'<a class="open" href="call/{zh}?t=2.0">whole call</a>' in page  # the call, at its second: no words
    assert not re.search(r'(href|action|src)="[^"]*\bq=', page)  # what was typed is in no address of the page
    assert "这款产品保证<mark>收益</mark> &lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<script>alert(1)" not in page
    assert 'data-start="2.000"' in page and "▶ 0:02.0–0:05.0" in page
    assert "<td>AG-1001</td><td>2026-11-27</td><td>1</td><td>1</td>" in page
    assert '<option value="agent" selected>agent</option>' in page
    assert '<base href="/">' in page

    api = client.post("/api/search", json={"q": "收益"}).json()["hits"]  # a client may render it: escaped too
    assert "这款产品保证<em>收益</em> &lt;script&gt;alert(1)&lt;/script&gt;" in [h["highlight"] for h in api]
    form = client.post("/api/search", data={"q": "收益", "tag": ""}).json()["hits"]  # a form's fields do as well
    assert [h["key"] for h in form] == [h["key"] for h in api]

    page = client.post("/", data={"q": "收益", "quality": "pass"}).text
    assert "No hits for 收益." in page
    assert "invalid page cursor" in client.post("/", data={"q": "收益", "after": "bogus"}).text
    assert "No hits" not in client.get("/", params={"q": "收益"}).text  # a search is posted; a URL's is not one
    assert client.get("/api/search", params={"q": "收益"}).status_code == 405


def test_page_opens_a_recording_at_a_second_for_audit_links(client: TestClient, jfk_rec: Recording) -> None:
    page = client.get("/", params={"recording_id": jfk_rec.recording_id, "t": "3.3"}).text
    assert f'id="focus" tabindex="0" data-recording="{jfk_rec.recording_id}" data-start="3.300"' in page
    assert "no recording nope" in client.get("/", params={"recording_id": "nope"}).text


def test_json_api_pages_and_counts(client: TestClient) -> None:
    first = client.post("/api/search", json={"q": "country | 收益", "size": 2}).json()
    assert len(first["hits"]) == 2 and first["next_after"]
    rest = client.post("/api/search", json={"q": "country | 收益", "size": 2, "after": first["next_after"]}).json()
    keys = {(h["key"], h["start"]) for h in first["hits"] + rest["hits"]}
    assert keys == {(JFK_KEY, 3.3), (JFK_KEY, 7.9), (ZH_KEY, 2.0), (ZH_KEY, 6.0)}
    assert client.post("/api/search", json={"q": "x", "after": "bogus"}).status_code == 400
    assert client.post("/api/search", json={"q": "x", "color": "red"}).status_code == 422  # a field it has not
    assert client.post("/api/search", content=b"q=x").status_code == 415  # neither JSON nor a form
    counts = client.post("/api/counts", json={"q": "country | 收益"}).json()
    assert counts == [
        {"agent_id": "AG-1001", "call_date": "2026-11-27", "segments": 2, "recordings": 1},
        {"agent_id": "AG-1004", "call_date": "2026-11-27", "segments": 2, "recordings": 1},
    ]


def test_tags_narrow_the_search_and_are_faceted_and_shown_on_the_call_page(
        client: TestClient, settings: Settings, world: tuple[SqliteIndex, LocalStore], jfk_rec: Recording) -> None:
    """The facet counts the tags of the search's own calls (a call the search does not let through names none of
    its tags), each a link that adds the tag to the search; ``tag`` narrows the page, the API and the export
    alike, is logged as typed (masked), and the call page shows its call's tags."""
    index, _ = world
    zh = _recording(ZH_KEY, "AG-1001")
    index.replace_tags("2026-11-27", {jfk_rec.recording_id: ["complaint"],
                                      zh.recording_id: ["complaint", "vulnerable-customer"]})
    page = client.post("/", data={"q": "收益 | country"}).text
    assert "<h2>calls per tag</h2>" in page
    narrows = {tag: html.unescape(change) for change, tag in re.findall(
        r'name="narrow" value="([^"]*)" class="link narrow">(complaint|vulnerable-customer)</button>', page)}
    assert ">complaint</button> (2)" in page and ">vulnerable-customer</button> (1)" in page
    narrowed = client.post("/", data={"q": "收益 | country", "narrow": narrows["vulnerable-customer"]}).text
    assert narrowed.count('<li class="hit') == 2 and JFK_KEY not in narrowed  # the Chinese call's two hits
    assert '<input type="checkbox" name="tag" value="vulnerable-customer" checked>' in narrowed
    assert 'value="tag=complaint&amp;tag=vulnerable-customer"' in narrowed  # the facet adds a tag to those asked for
    jfk_only = client.post("/", data={"q": "country"}).text
    facet = re.search(r'<nav class="facets".*?</nav>', jfk_only, re.S)
    assert facet and ">complaint</button> (1)" in facet.group() and "vulnerable-customer" not in facet.group()

    calls = client.post("/", data={"q": "", "tag": ["vulnerable-customer", ""]}).text  # the form's empty field
    assert calls.count('<li class="call') == 1 and ZH_KEY in calls
    assert '<span class="tag">complaint</span><span class="tag">vulnerable-customer</span>' in calls
    exported = re.search(r'<form id="exported" method="post" action="api/export" hidden>(.*?)</form>', calls)
    assert exported and re.findall(r'name="(\w+)" value="([^"]*)"', exported.group(1)) == [
        ("q", ""), ("tag", "vulnerable-customer")]
    row = AccessLog(open_ledger(settings.ledger)).entries()[-1]
    assert (row.action, row.filters, row.detail) == ("search", {"tags": ["vulnerable-customer"]}, "calls")
    assert "No calls match tag cancellation." in client.post("/", data={"tag": "cancellation"}).text

    api = client.post("/api/search", json={"q": "收益 | country", "tag": ["complaint", "vulnerable-customer"]})
    assert {h["key"] for h in api.json()["hits"]} == {ZH_KEY}
    export = client.post("/api/export", data={"q": "country", "tag": "complaint", "format": "json"}).json()
    assert {h["key"] for h in export} == {JFK_KEY}
    assert client.post("/api/search", json={"q": "x", "tag": ["t" * 201]}).status_code == 422
    assert client.post("/api/search", json={"q": "", "tag": [""]}).status_code == 422
    assert client.post("/api/search", json={"q": "x", "tag": [f"t{n}" for n in range(21)]}).status_code == 422
    client.post("/api/search", json={"q": "country", "tag": ["4111 1111 1111 1111"]})
    assert AccessLog(open_ledger(settings.ledger)).entries()[-1].filters == {"tags": ["[CARD ****1111]"]}

    call = client.get(f"/call/{zh.recording_id}").text  # each tag a search of its calls, posted
    for tag in ("complaint", "vulnerable-customer"):
        assert (f'<form method="post" action="./" class="go"><input type="hidden" name="tag" value="{tag}">'
                f'<button type="submit" class="tag"') in call
    index.replace_tags("2026-11-27", {})
    assert '<span class="tags">Tags <b>-</b></span>' in client.get(f"/call/{zh.recording_id}").text


AIRFLOW_PROBE = """
import json
from airflow.utils.db import initdb
initdb()
from airflow.api_fastapi.app import create_app, get_auth_manager
from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
from fastapi.testclient import TestClient
client = TestClient(create_app("core"))
anonymous = client.post("/search/", data={"q": "country"})
token = get_auth_manager().generate_jwt(SimpleAuthManagerUser(username="auditor", role="viewer"))
client.cookies.set("_token", token)
signed_in = client.post("/search/", data={"q": "country"})
client.cookies.clear()
audio = client.get("/search/audio/" + %r, headers={"Authorization": "Bearer " + token, "Range": "bytes=0-9"})
print(json.dumps({"anonymous": anonymous.status_code, "signed_in": signed_in.status_code, "page": signed_in.text,
                  "audio": audio.status_code, "audio_anonymous": client.get("/search/audio/" + %r).status_code}))
"""


def test_airflow_plugin_mounts_the_page_behind_airflows_login(
    tmp_path: Path, settings: Settings, world: tuple[SqliteIndex, LocalStore], jfk_rec: Recording
) -> None:
    home = tmp_path / "airflow"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "ASR_"))}
    env.update({
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(PROJECT_ROOT / "plugins"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(tmp_path / "no-dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__API_AUTH__JWT_SECRET": "a-test-secret-that-is-long-enough-for-hs512-signatures-0123456789",
        "ASR_INDEX_PATH": str(settings.index.path("index_path")),
        "ASR_STORE_ROOT": str(settings.storage.path("store_root")),
    })
    home.mkdir()
    code = AIRFLOW_PROBE % (jfk_rec.recording_id, jfk_rec.recording_id)
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (result["anonymous"], result["audio_anonymous"]) == (401, 401)
    assert (result["signed_in"], result["audio"]) == (200, 206)
    assert '<base href="/search/">' in result["page"] and "ask not what your <mark>country</mark>" in result["page"]


FAB_USERS = {"alice": ["Call Reader"], "bob": ["Call Access Auditor", "Call Unredacted Reader"],
             "olga": ["ASR Operator"], "ada": ["Admin"], "lee": ["Call Team Lead"], "wendy": ["Call Team Lead"]}


def set_cookies(answer: http.client.HTTPResponse) -> dict[str, http.cookies.Morsel[str]]:
    cookies: http.cookies.SimpleCookie = http.cookies.SimpleCookie()
    for header in answer.headers.get_all("Set-Cookie") or []:
        cookies.load(header)
    return dict(cookies)


def sign_in_through_the_form(port: int, user: str, password: str) -> dict[str, dict[str, http.cookies.Morsel[str]]]:
    """FAB's login page as a browser uses it: its form (with the CSRF token of the session), then the redirect."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("GET", "/auth/login/")
        page = conn.getresponse()
        form, first = page.read().decode(), set_cookies(page)
        assert page.status == 200 and "session" in first, (page.status, form[-2000:])
        token = re.search(r'name="csrf_token"[^>]*value="([^"]+)"', form) or re.search(
            r'value="([^"]+)"[^>]*name="csrf_token"', form)
        assert token, form[-2000:]
        body = urllib.parse.urlencode({"username": user, "password": password, "csrf_token": token.group(1)})
        conn.request("POST", "/auth/login/", body=body, headers={
            "Content-Type": "application/x-www-form-urlencoded", "Cookie": f"session={first['session'].value}"})
        signed_in = conn.getresponse()
        signed_in.read()
        assert signed_in.status == 302, signed_in.status
        return {"login page": first, "signed in": set_cookies(signed_in)}
    finally:
        conn.close()


@dataclass(frozen=True)
class ApiServer:
    """A real ``airflow api-server`` with the plugin, under the FAB auth manager: its address, each user's API
    token, and the file that holds everything it printed (its request log)."""

    base: str
    port: int
    tokens: dict[str, str]
    printed: Path

    def ask(self, method: str, path: str, token: str | None = None, form: dict[str, Any] | None = None,
            body: dict[str, Any] | None = None, cookie: str | None = None) -> tuple[int, bytes]:
        """A request as a client makes it: a bearer token or the browser's cookie, a form's fields or JSON."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        if cookie:
            headers["Cookie"] = cookie
        data = None
        if form is not None:
            data = urllib.parse.urlencode(form, doseq=True).encode()
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        elif body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(f"{self.base}{path}", data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                return int(answer.status), answer.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()


@pytest.fixture
def api_server(tmp_path: Path, settings: Settings, world: tuple[SqliteIndex, LocalStore]) -> Iterator[ApiServer]:
    """The real API server under Airflow's FAB auth manager: roles made by ``airflow-init``'s steps, the users of
    ``FAB_USERS``; what it prints goes to a file."""
    from services import free_port

    home, port = tmp_path / "airflow", free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "ASR_"))}
    env.update({
        "PATH": f"{Path(sys.executable).parent}:{env.get('PATH', '')}",
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__AUTH_MANAGER": "airflow.providers.fab.auth_manager.fab_auth_manager.FabAuthManager",
        "AIRFLOW__FAB__CONFIG_FILE": str(PROJECT_ROOT / "include" / "airflow" / "webserver_config.py"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(PROJECT_ROOT / "plugins"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(tmp_path / "no-dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__API_AUTH__JWT_SECRET": "a-test-secret-that-is-long-enough-for-hs512-signatures-0123456789",
        "AIRFLOW__API__SECRET_KEY": "a-test-secret-for-the-session-cookie-0123456789",
        "ASR_INDEX_PATH": str(settings.index.path("index_path")),
        "ASR_STORE_ROOT": str(settings.storage.path("store_root")),
        "ASR_LEDGER_URL": settings.ledger.ledger_url,
    })
    home.mkdir()
    roles = subprocess.run([sys.executable, "-m", "asr_tasks.cli", "roles"], env=env, capture_output=True, text=True,
                           timeout=120, check=True).stdout.strip()
    steps = [["airflow", "db", "migrate"], ["airflow", "sync-perm"],  # the page's resource, from the plugin's view
             ["env", f"AIRFLOW__FAB__CUSTOM_ROLES={roles}", "airflow", "sync-perm"]]  # then its roles
    for user, (first, *more) in FAB_USERS.items():
        steps.append(["airflow", "users", "create", "--username", user, "--password", f"{user}-pw", "--role", first,
                      "--firstname", user, "--lastname", "Test", "--email", f"{user}@example.invalid"])
        steps += [["airflow", "users", "add-role", "-u", user, "-r", role] for role in more]
    for step in steps:
        proc = subprocess.run(step, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert proc.returncode == 0, f"{step}: {proc.stdout[-2000:]}{proc.stderr[-3000:]}"
    printed = tmp_path / "api-server.out"
    with printed.open("wb") as out:
        server = subprocess.Popen(["airflow", "api-server", "--port", str(port)], env=env, cwd=tmp_path,
                                  stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(f"{base}/api/v2/monitor/health", timeout=5):
                    break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    pytest.fail(f"the API server did not come up (exit {server.poll()}): "
                                f"{printed.read_text(errors='replace')[-3000:]}")
                time.sleep(0.5)
        tokens = {}
        for user in FAB_USERS:
            request = urllib.request.Request(f"{base}/auth/token", method="POST", headers={
                "Content-Type": "application/json"}, data=json.dumps({"username": user,
                                                                      "password": f"{user}-pw"}).encode())
            with urllib.request.urlopen(request, timeout=30) as answer:
                tokens[user] = json.load(answer)["access_token"]
        yield ApiServer(base, port, tokens, printed)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)


def test_the_fab_auth_manager_grants_each_route_by_role(
    api_server: ApiServer, settings: Settings, jfk_rec: Recording, jfk: Path
) -> None:
    """The real API server under Airflow's FAB auth manager: each user's roles open the routes they grant."""
    server, tokens, port = api_server, api_server.tokens, api_server.port
    rid = jfk_rec.recording_id
    routes: dict[str, tuple[str, str, dict[str, Any] | None, dict[str, Any] | None]] = {
        "search page": ("POST", "/search/", {"q": "country"}, None),
        "search api": ("POST", "/search/api/search", None, {"q": "country"}),
        "play": ("GET", f"/search/audio/{rid}?t=3.5", None, None),
        "play original": ("GET", f"/search/audio/{rid}/original", None, None),
        "access log": ("GET", "/search/access-log", None, None)}

    def status(name: str, token: str | None) -> int:
        method, path, form, body = routes[name]
        return server.ask(method, path, token, form=form, body=body)[0]

    answers = {user: {name: status(name, token) for name in routes} for user, token in tokens.items()}
    assert answers == {
        "alice": {"search page": 200, "search api": 200, "play": 200, "play original": 403, "access log": 403},
        "bob": {"search page": 403, "search api": 403, "play": 403, "play original": 200, "access log": 200},
        "olga": dict.fromkeys(routes, 403),  # the operator runs the DAGs and reads no call
        "ada": dict.fromkeys(routes, 200),  # FAB's Admin holds every permission there is
        # team leads (include/teams.yaml): JFK's agent is in wendy's team, not in lee's, to whom it is unknown
        "lee": {"search page": 200, "search api": 200, "play": 404, "play original": 403, "access log": 403},
        "wendy": {"search page": 200, "search api": 200, "play": 200, "play original": 403, "access log": 403},
    }
    for user, keys in {"lee": {ZH_KEY}, "wendy": {JFK_KEY}, "alice": {ZH_KEY, JFK_KEY}}.items():
        code, found = server.ask("POST", "/search/api/search", tokens[user], body={"q": "country | 收益"})
        assert code == 200 and {h["key"] for h in json.loads(found)["hits"]} == keys, user
    assert {name: status(name, None) for name in routes} == dict.fromkeys(routes, 401)
    airflow_routes = {"dags": "/api/v2/dags", "runs": "/api/v2/dags/~/dagRuns", "pools": "/api/v2/pools",
                      "connections": "/api/v2/connections", "variables": "/api/v2/variables",
                      "config": "/api/v2/config", "roles": "/auth/fab/v1/roles"}
    assert {name: server.ask("GET", path, tokens["olga"])[0] for name, path in airflow_routes.items()} == {
        "dags": 200, "runs": 200, "pools": 200, "connections": 200, "variables": 403, "config": 403, "roles": 403}

    # The browser's way in: the session cookie is Secure, HttpOnly and SameSite=Lax even over plain HTTP
    # (browsers keep a Secure cookie for http://localhost); the API token's cookie is HttpOnly and Lax.
    cookies = sign_in_through_the_form(port, "alice", "alice-pw")
    for step, jar in cookies.items():
        session = jar["session"]
        assert (session["secure"], session["httponly"], session["samesite"].lower()) == (True, True, "lax"), step
    jwt = cookies["signed in"]["_token"]
    assert jwt["httponly"] and jwt["samesite"].lower() == "lax"
    assert server.ask("POST", "/search/", form={"q": "country"}, cookie=f"_token={jwt.value}")[0] == 200

    log = [(e.user, e.action, e.recording_id, e.query, e.detail)
           for e in AccessLog(open_ledger(settings.ledger)).entries()]
    assert ("alice", "search", None, "country", None) in log and ("alice", "search", None, "country", "api") in log
    size = len(jfk.read_bytes())
    assert ("alice", "play", rid, None, f"as uploaded from 3.5 s, the whole file, {size} bytes") in log
    assert ("bob", "play", rid, None, f"original from 0.0 s, the whole file, {size} bytes") in log
    assert ("bob", "list", None, None, "the access log of 7 days, page 0") in log  # reading the log is logged
    assert {user for user, *_ in log} == {"alice", "bob", "ada", "lee", "wendy"}  # a refused request logs nothing
    excerpt = "\n".join(f"{e.at}  {e.user:<6} {e.action:<6} {e.recording_id or ''} {e.query or ''} {e.detail or ''}"
                        for e in AccessLog(open_ledger(settings.ledger)).entries())
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    (ARTEFACTS / "access-log-excerpt.txt").write_text(excerpt + "\n")


def test_what_people_type_never_reaches_the_api_servers_request_log(api_server: ApiServer,
                                                                   jfk_rec: Recording) -> None:
    """The API server prints a line for every request it answers. A Call Reader signed in through the login
    form searches for a card number, a customer's name and a phone number with the page's form and with the
    API, and opens a call from a result; a query string typed into an address by hand is hidden as well. Not
    one of the words or digits, and no ``q=``, is in what the server printed."""
    server = api_server
    cookie = f"_token={sign_in_through_the_form(server.port, 'alice', 'alice-pw')['signed in']['_token'].value}"
    typed = ["card 4111 1111 1111 1111", "Margaret Hollingsworth", "call me on 555 867 5309"]
    for words in typed:
        assert server.ask("POST", "/search/", form={"q": words}, cookie=cookie)[0] == 200  # the page's form
        assert server.ask("POST", "/search/api/search", server.tokens["alice"], body={"q": words})[0] == 200
        assert server.ask("POST", "/search/api/counts", server.tokens["alice"], form={"q": words})[0] == 200
    code, page = server.ask("POST", "/search/", form={"q": "Margaret | country"}, cookie=cookie)
    opened = re.search(r'<a class="open" href="(call/[0-9a-f]{24}\?t=[\d.]+)">', page.decode())
    assert code == 200 and opened, page.decode()[-2000:]
    code, call = server.ask("POST", f"/search/{opened.group(1)}", form={"q": "Margaret | country"}, cookie=cookie)
    assert code == 200 and '<mark class="match">country</mark>' in call.decode()  # the words marked
    by_hand = "/search/?q=card+4111+1111+1111+1111&agent=Hollingsworth"
    assert server.ask("GET", by_hand, cookie=cookie)[0] == 200
    deadline = time.monotonic() + 30
    while "/search/call/" not in server.printed.read_text(errors="replace"):  # the last request's line
        assert time.monotonic() < deadline, server.printed.read_text(errors="replace")[-3000:]
        time.sleep(0.2)
    printed = server.printed.read_text(errors="replace")
    assert "/search/api/search" in printed and "…" in printed  # it logs the page's requests, a query hidden
    for said in ("4111+1111", "4111 1111", "4111%201111", "1111+1111", "Margaret", "Hollingsworth", "555+867", "555 867",
                 "867+5309", "867%205309", "q=", "country"):
        assert said not in printed, (said, [line for line in printed.splitlines() if said in line][:3])


@pytest.fixture
def served(settings: Settings, world: tuple[SqliteIndex, LocalStore]) -> Iterator[tuple[str, list[dict[str, str]]]]:
    """The page on a real HTTP server (uvicorn on loopback), with the audio requests it receives (path, query
    string, Range header)."""
    app: FastAPI = create_app(settings)
    audio_requests: list[dict[str, str]] = []

    @app.middleware("http")
    async def record(request: Request, call_next: Any) -> Any:
        if request.url.path.startswith("/audio/"):
            audio_requests.append({"path": request.url.path, "query": request.url.query,
                                   "range": request.headers.get("range", "")})
        return await call_next(request)

    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}/", audio_requests
    server.should_exit = True
    thread.join(timeout=10)


def test_browser_search_click_and_play_from_the_hit(
    served: tuple[str, list[dict[str, str]]], tmp_path: Path, jfk_rec: Recording, settings: Settings
) -> None:
    url, audio_requests = served
    browser = Browser(tmp_path / "chromium-profile")
    try:
        browser.send("Page.enable")
        browser.send("Page.navigate", url=url)
        browser.wait_for("document.readyState === 'complete' && !!document.querySelector('input[name=q]')")
        browser.js("document.querySelector('input[name=q]').focus()")
        browser.send("Input.insertText", text='"your country"')
        for kind in ("keyDown", "keyUp"):
            browser.send("Input.dispatchKeyEvent", type=kind, key="Enter", code="Enter", windowsVirtualKeyCode=13,
                         text="\r" if kind == "keyDown" else "")
        assert browser.wait_for("document.querySelectorAll('.hit').length") == 2
        assert browser.js("location.href") == url  # the search was posted: nothing of it in the address

        hit = "li.hit[data-start='7.900']"
        assert browser.js(f"document.querySelector({json.dumps(hit)}).innerText").startswith("▶ 0:07.9–0:10.6")
        browser.js("window.seeks = []; document.getElementById('player')"
                   ".addEventListener('seeked', e => seeks.push(e.target.currentTime))")
        browser.click(hit)
        browser.wait_for("seeks.length > 0")
        player = browser.wait_for("(() => { const p = document.getElementById('player');"
                                  " return !p.paused && p.currentTime > 8.0 && {current: p.currentTime,"
                                  " seeked: seeks[0], src: p.currentSrc, duration: p.duration}; })()")
        # the player jumped to the hit's start ('seeked' is handled once it is done: a busy machine may have played on)
        assert player["seeked"] == pytest.approx(7.9, abs=0.05)
        assert 8.0 < player["current"] < 10.6  # and plays on from there
        assert player["duration"] == pytest.approx(11.0, abs=0.1)
        assert re.fullmatch(rf"{url}audio/{jfk_rec.recording_id}\?t=7\.9&play=[a-z]{{20}}", player["src"])
        log = [(e.user, e.action, e.query, e.recording_id, e.detail)
               for e in AccessLog(open_ledger(settings.ledger)).entries()]
        assert (getpass.getuser(), "search", '"your country"', None, None) in log  # who searched what, and played
        plays = [d for user, action, _, rid, d in log if (user, action, rid) == (getpass.getuser(), "play",
                                                                                 jfk_rec.recording_id)]
        assert len(plays) == 1 and plays[0].startswith("as uploaded from 7.9 s, bytes ")  # one play, one row
        assert browser.js("document.querySelector('.hit.playing').dataset.start") == "7.900"
        assert browser.js("document.getElementById('now').textContent") == f"{JFK_KEY} at 0:07.9"
        assert any(r["range"].startswith("bytes=") for r in audio_requests)

        # The browser enforces the page's policy: a script without the page's nonce does not run.
        browser.js("(() => { const s = document.createElement('script'); s.textContent = 'window.injected = 1';"
                   " document.body.appendChild(s); })()")
        assert browser.js("typeof window.injected") == "undefined"
        status = browser.js("fetch('audio/0123456789abcdef01234567').then(r => r.status)")
        assert status == 404

        browser.js("document.getElementById('player').pause()")
        shot = browser.send("Page.captureScreenshot", format="png")
        ARTEFACTS.mkdir(parents=True, exist_ok=True)
        (ARTEFACTS / "search-page.png").write_bytes(base64.b64decode(shot["data"]))
    finally:
        browser.close()


def test_every_response_carries_the_security_headers(client: TestClient, jfk_rec: Recording) -> None:
    page = client.post("/", data={"q": "country"})
    policy = page.headers["content-security-policy"]
    nonce = re.search(r"script-src 'nonce-([\w-]+)'", policy)
    assert nonce and f'<script nonce="{nonce.group(1)}">' in page.text and f'<style nonce="{nonce.group(1)}">' in page.text
    assert "default-src 'none'" in policy and "frame-ancestors 'none'" in policy
    for answer in (page, client.get(f"/audio/{jfk_rec.recording_id}"), client.post("/api/search", json={"q": "x"}),
                   client.get("/no-such-route")):
        assert answer.headers["x-content-type-options"] == "nosniff", answer.url
        assert answer.headers["x-frame-options"] == "DENY", answer.url
        assert "content-security-policy" in answer.headers, answer.url
        assert answer.headers["cache-control"] == "no-store", answer.url  # no copy of a call outlives its erasure
    assert client.get("/").headers["content-security-policy"] != policy  # a nonce per response
    assert client.get("/openapi.json").status_code == 404 and client.get("/docs").status_code == 404


def test_no_page_styles_an_element_inline() -> None:
    """The policy lets only a page's own nonced <style> style it: an inline style attribute is refused by the
    browser (and logged as a violation), so no template may use one."""
    templates = sorted((PROJECT_ROOT / "include" / "templates").glob("*.html"))
    assert templates and not [t.name for t in templates if re.search(r"\sstyle\s*=", t.read_text())]


def test_the_audio_route_serves_decoded_audio_only(settings: Settings, world: tuple[SqliteIndex, LocalStore],
                                                   jfk_rec: Recording) -> None:
    """An uploaded page or picture under a day prefix is quarantined, and never served: not even by its id."""
    index, store = world
    html_rec = _recording("calls/2026/11/27/invite.wav", "AG-1")
    store.put_bytes("recordings", html_rec.key, b"<html><script>alert(document.cookie)</script></html>")
    index.record_quarantine(Quarantine(recording=html_rec, reason="not a decodable media file", pipeline_version="1"))
    client = TestClient(create_app(settings))
    refused = client.get(f"/audio/{html_rec.recording_id}")
    assert refused.status_code == 404 and "quarantined" in refused.json()["detail"]
    assert b"<script>" not in refused.content

    disguised = _recording("calls/2026/11/27/page.flac", "AG-1")  # indexed somehow, but no audio inside
    store.put_bytes("recordings", disguised.key, b"<svg onload=alert(1)></svg>" * 4)
    nothing_said = Transcript(recording=disguised, duration=1.0, language="en", model="m", pipeline_version="1",
                              segments=[])
    index.replace_recording(nothing_said)
    unknown = client.get(f"/audio/{disguised.recording_id}")  # no gated transcript: is personal data in it?
    assert unknown.status_code == 409 and "gated transcript is not stored" in unknown.json()["detail"]
    gated(store, settings, nothing_said)
    assert client.get(f"/audio/{disguised.recording_id}").status_code == 415

    served = client.get(f"/audio/{jfk_rec.recording_id}")
    assert served.headers["content-type"] == "audio/flac"  # from the content: fLaC
    assert served.headers["content-disposition"] == f'attachment; filename="{jfk_rec.recording_id}"'
    (settings.storage.path("store_root") / "recordings" / JFK_KEY).unlink()
    gone = client.get(f"/audio/{jfk_rec.recording_id}")
    assert gone.status_code == 404 and "not stored" in gone.json()["detail"]


@pytest.mark.parametrize(("url", "body", "status"), [
    ("/?recording_id=x&t=inf", None, 422), ("/?recording_id=x&t=nan", None, 422), ("/?recording_id=x&t=-1", None, 422),
    ("/", {"q": "(" * 400 + "country" + ")" * 400}, 400), ("/", {"q": "country", "date_from": "2026-13-01"}, 400),
    ("/", {"date_from": "2026-11-30", "date_to": "2026-11-01"}, 400), ("/", {"q": "country", "speaker": "cust"}, 400),
    ("/", {"q": "country", "after": "not-a-cursor"}, 400), ("/", {"q": "country", "after": "WyJ4Il0"}, 400),
    ("/", {"q": "a" * 1001}, 400), ("/", {"q": "country", "min_score": "high"}, 422),
    ("/", {"q": "country", "narrow": "min_score=high"}, 422),
    ("/api/search", {"q": "country", "after": "WyJ4IiwgeyJhIjogMX1d"}, 400), ("/api/search", {"q": "a" * 1001}, 422),
    ("/api/search", {"q": "country", "size": "many"}, 422),
])
def test_bad_input_is_a_4xx_with_a_message_never_a_500(client: TestClient, url: str, body: dict[str, str] | None,
                                                       status: int) -> None:
    answer = client.get(url) if body is None else client.post(url, data=body)
    assert answer.status_code == status, answer.text[:300]


def test_asr_ui_answers_its_own_host_names_only(settings: Settings, world: tuple[SqliteIndex, LocalStore]) -> None:
    client = TestClient(create_app(settings, allowed_hosts=["127.0.0.1", "localhost"]))
    assert client.get("/", headers={"Host": "127.0.0.1:8091"}).status_code == 200
    assert client.get("/", headers={"Host": "attacker.example"}).status_code == 400  # DNS rebinding


def test_a_call_with_personal_data_is_played_from_its_redacted_rendition(
        settings: Settings, world: tuple[SqliteIndex, LocalStore], jfk_rec: Recording, tmp_path: Path) -> None:
    index, store = world
    # The call was indexed by pipeline version 1 (the fixture) and the pipeline is at a later one now: its
    # artefacts are where version 1 put them, and the page must look there, not serve the original upload.
    assert RecordingVersion.of(jfk_rec).pipeline_version != "1"
    version = RecordingVersion(jfk_rec.call_date, jfk_rec.recording_id, "1")
    bucket = settings.storage.artefacts_bucket
    gated = Transcript(recording=jfk_rec, duration=11.0, segments=[], language="en", model="m", pipeline_version="1",
                       pii=[{"kind": "card", "start": 3.3, "end": 7.7}])
    store.put_bytes(bucket, version.gated("m"), json.dumps(gated.to_dict()).encode())
    client = TestClient(create_app(settings))
    held = client.get(f"/audio/{jfk_rec.recording_id}")
    assert held.status_code == 409 and "redacted audio is not ready" in held.json()["detail"]
    rendition = tmp_path / "redacted.flac"
    subprocess.run(["ffmpeg", "-v", "error", "-i", str(JFK_SOURCE), "-af", "volume=0:enable='between(t,3,8)'",
                    str(rendition)], check=True)
    store.put_file(bucket, version.redacted_audio, rendition)
    served = client.get(f"/audio/{jfk_rec.recording_id}")
    assert served.status_code == 200 and served.content == rendition.read_bytes()
    assert served.headers["content-type"] == "audio/flac"


STEREO_KEY = "calls/2026/11/27/stereo.wav"


@pytest.fixture
def stereo(settings: Settings, world: tuple[SqliteIndex, LocalStore], jfk: Path) -> Recording:
    """A two-speaker call with analytics and a finding, indexed beside the world's calls."""
    index, store = world
    rec = _recording(STEREO_KEY, "AG-1007")
    store.put_file("recordings", STEREO_KEY, jfk)
    lines = [("agent", 0, 0.5, 2.0, "Hello, thank you for calling."), ("agent", 0, 2.2, 3.0, "How can I help?"),
             ("customer", 1, 3.5, 5.0, "=HYPERLINK(\"x\") returns <b>now</b>."),
             ("agent", 0, 5.5, 8.0, "This fund guarantees your returns."), ("customer", 1, 8.5, 9.5, "收益多少？")]
    transcript = Transcript(
        recording=rec, duration=11.0, language="en", model="m", pipeline_version="1", quality="needs_review",
        quality_failures=["speech_rate"], segments=[Segment(rec.recording_id, ch, who, a, b, text)
                                                    for who, ch, a, b, text in lines],
        analytics={"non_talk_share": 0.3, "non_talk_seconds": 3.3, "talk_seconds": 7.7, "longest_silence_seconds": 1.0,
                   "overlap_seconds": 0.4, "turns": 4, "silences": [[9.5, 11.0]],
                   "speech": {"agent": [[0.5, 3.0], [5.5, 8.0]], "customer": [[3.5, 5.0], [7.6, 9.5]]},
                   "speakers": {"agent": {"talk_seconds": 5.0, "talk_share": 0.65, "words": 14, "words_per_minute": 168.0,
                                          "turns": 2, "interruptions": 0},
                                "customer": {"talk_seconds": 2.7, "talk_share": 0.35, "words": 8,
                                             "words_per_minute": 177.8, "turns": 2, "interruptions": 1}}})
    index.replace_recording(transcript)
    index.replace_findings("2026-11-27", [{"finding_id": "f1", "recording_id": rec.recording_id, "rule_id":
                                           "promise-of-return", "severity": "high", "description": "A promise.",
                                           "speaker": "agent", "start": 5.5, "end": 8.0, "key": STEREO_KEY,
                                           "matched_text": "guarantees your returns", "agent_id": "AG-1007"}])
    return rec


def test_the_call_page_shows_the_whole_conversation(client: TestClient, stereo: Recording) -> None:
    page = client.post(f"/call/{stereo.recording_id}?t=5.5", data={"q": "returns"})  # opened from a search
    assert page.status_code == 200
    html = page.text
    said = re.findall(r'class="seg[^"]*" data-start="([\d.]+)"', html)
    assert said == ["0.500", "2.200", "3.500", "5.500", "8.500"]  # every segment, in order
    assert [m.group(1) for m in re.finditer(r'<div class="turn (\w+)"', html)] == ["agent", "customer", "agent",
                                                                                   "customer"]
    assert html.count('<mark class="match">returns</mark>') == 2  # the search's term, in both speakers' words
    assert "&lt;b&gt;now&lt;/b&gt;" in html and "<b>now</b>" not in html  # the transcript is text, never markup
    assert 'class="seg flagged" data-start="5.500"' in html and "promise-of-return at 0:05.5" in html
    assert "needs_review" in html and "speech_rate" in html and "AG-1007" in html and "收益多少" in html
    assert '<svg id="timeline"' in html and html.count('class="talk agent"') == 2 and 'class="overlap"' in html
    assert 'class="finding high"' in html
    assert re.search(rf'<audio id="player" controls preload="none" src="audio/{stereo.recording_id}\?t=5\.5&amp;'
                     r'play=[a-z]{20}">', html)  # nothing fetched before a play, and the play named
    assert "30 %" in html and "1 interruptions" in html
    assert client.get("/call/0123456789abcdef01234567").status_code == 404


def test_a_calls_transcript_exports_in_four_formats(client: TestClient, stereo: Recording) -> None:
    base = f"/call/{stereo.recording_id}/transcript"
    txt = client.get(f"{base}.txt")
    assert txt.status_code == 200 and "attachment" in txt.headers["content-disposition"]
    assert "[00:00:05.500] agent: This fund guarantees your returns." in txt.text
    srt = client.get(f"{base}.srt").text
    assert srt.startswith("1\n00:00:00,500 --> 00:00:02,000\nagent: Hello, thank you for calling.\n")
    vtt = client.get(f"{base}.vtt").text
    assert vtt.startswith("WEBVTT\n\n00:00:00.500 --> 00:00:02.000\n<v agent>Hello")
    data = client.get(f"{base}.json").json()
    assert [s["speaker"] for s in data["segments"]] == ["agent", "agent", "customer", "agent", "customer"]
    assert data["quality"] == "needs_review" and client.get(f"{base}.doc").status_code == 404


def test_a_line_break_in_a_segment_cannot_forge_a_cue(
        settings: Settings, world: tuple[SqliteIndex, LocalStore], client: TestClient) -> None:
    index, _ = world
    rec = _recording("calls/2026/11/27/forged.wav", "AG-1009")
    forged = "fine.\n\n99\n00:00:00,000 --> 00:09:59,000\nagent: I promise a refund\r\n"
    index.replace_recording(Transcript(recording=rec, duration=9.0, language="en", model="m", pipeline_version="1",
                                       segments=[Segment(rec.recording_id, 0, "agent", 1.0, 2.0, forged)]))
    base = f"/call/{rec.recording_id}/transcript"
    srt, vtt, txt = (client.get(f"{base}.{fmt}").text for fmt in ("srt", "vtt", "txt"))
    assert srt == "1\n00:00:01,000 --> 00:00:02,000\nagent: fine. 99 00:00:00,000 -> 00:09:59,000 agent: I promise a refund\n"
    assert vtt.count("-->") == 1 and len(txt.strip().splitlines()) == 3  # the heading, a blank line, one line
    assert client.get(f"{base}.json").json()["segments"][0]["text"] == forged  # JSON carries the text as it is
    index.replace_recording(Transcript(recording=rec, duration=9.0, language="en", model="m", pipeline_version="1",
                                       segments=[Segment(rec.recording_id, 0, "agent", 1.0, 2.0, "<b>a & b</b>")]))
    assert "<v agent>&lt;b&gt;a &amp; b&lt;/b&gt;\n" in client.get(f"{base}.vtt").text  # cue text is markup there


def test_a_searchs_whole_result_exports_as_csv_and_json(client: TestClient, stereo: Recording) -> None:
    csv_text = client.post("/api/export", data={"q": "returns | 收益", "format": "csv"}).text
    rows = list(csv.DictReader(io.StringIO(csv_text)))
    assert {r["key"] for r in rows} == {STEREO_KEY, ZH_KEY} and len(rows) == 5
    assert [r["text"] for r in rows if "HYPERLINK" in r["text"]] == ["'=HYPERLINK(\"x\") returns <b>now</b>."]
    assert all(not r["text"].startswith("=") for r in rows)  # a spreadsheet runs no formula from a transcript
    data = client.post("/api/export", json={"q": "returns | 收益", "format": "json", "agent": "AG-1007"}).json()
    assert {h["key"] for h in data} == {STEREO_KEY} and {h["quality"] for h in data} == {"needs_review"}
    assert client.post("/api/export", json={"q": "x", "format": "xml"}).status_code == 400
    narrowed = client.post("/api/search", json={"q": "returns | 收益", "min_non_talk_share": 0.25}).json()["hits"]
    assert {h["key"] for h in narrowed} == {STEREO_KEY}


def test_browser_renders_a_chinese_call_page(served: tuple[str, list[dict[str, str]]], tmp_path: Path) -> None:
    url, _ = served
    zh = _recording(ZH_KEY, "AG-1001")
    browser = Browser(tmp_path / "chromium-profile")
    try:
        browser.send("Page.enable")
        browser.send("Page.navigate", url=url)
        browser.wait_for("document.readyState === 'complete' && !!document.getElementById('search')")
        browser.js(f"(() => {{ const f = document.getElementById('search'); f.action = 'call/{zh.recording_id}';"
                   " f.querySelector('[name=q]').value = '收益'; f.submit(); })()")  # opened from a search for 收益
        browser.wait_for("document.readyState === 'complete' && document.querySelectorAll('.seg').length === 2")
        assert browser.js("document.documentElement.lang") == "zh"
        assert browser.js("document.querySelector('.turn.customer .said').innerText").strip() == "收益多少？"
        assert browser.js("document.querySelectorAll('mark.match').length") == 2  # 收益, in both turns
        assert browser.js("document.fonts.check('16px \"Noto Sans CJK SC\"')")  # a CJK font, not boxes
        shot = browser.send("Page.captureScreenshot", format="png")
        ARTEFACTS.mkdir(parents=True, exist_ok=True)
        (ARTEFACTS / "call-page-chinese.png").write_bytes(base64.b64decode(shot["data"]))
    finally:
        browser.close()
