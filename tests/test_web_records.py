"""What the page's records say is what happened: opening a call is a read and no play, a play is one row however
many parts of the file the player asks for, another site's page cannot export or change anything in a user's
name, and ``asr ui`` answers only the account that started it."""

from __future__ import annotations

import getpass
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from browser import Browser
from fastapi.testclient import TestClient
from test_webui import jfk_rec, served, world  # noqa: F401  (fixtures)

from asr_tasks.config import PROJECT_ROOT, Settings
from asr_tasks.index.sqlite import SqliteIndex
from asr_tasks.intake.stores import LocalStore
from asr_tasks.models import Recording
from asr_tasks.records.access_log import AccessLog
from asr_tasks.records.ledger import open_ledger
from asr_tasks.web.app import create_app

ASR = str(Path(sys.executable).parent / "asr")


def rows(settings: Settings, recording_id: str) -> list[tuple[str, str]]:
    """The access log's rows about a recording: (action, detail)."""
    return [(e.action, e.detail or "") for e in AccessLog(open_ledger(settings.ledger)).entries()
            if e.recording_id == recording_id]


def test_opening_a_call_is_no_play_and_a_play_is_one_row(served: tuple[str, list[dict[str, str]]],  # noqa: F811
                                                          jfk_rec: Recording, settings: Settings,  # noqa: F811
                                                          tmp_path: Path) -> None:
    """A real browser opens a call page: one ``read`` row, no request for its audio, no ``play`` row. A click on
    a segment plays from there: one ``play`` row, however many range requests are made of that play; a click on
    the turn is a play of its own; a download (no play's nonce) is a play each time."""
    url, audio_requests = served
    rid = jfk_rec.recording_id
    browser = Browser(tmp_path / "chromium-profile")
    try:
        browser.send("Page.enable")
        browser.send("Page.navigate", url=f"{url}call/{rid}?t=3.3")
        browser.wait_for("document.readyState === 'complete' && document.querySelectorAll('.seg').length === 3")
        time.sleep(2)  # what the player would load on its own, it has asked for by now
        assert rows(settings, rid) == [("read", "call page at 3.3 s")] and audio_requests == []
        assert browser.js("document.getElementById('player').preload") == "none"

        browser.click(".seg[data-start='3.300']")
        state = browser.wait_for("(() => { const p = document.getElementById('player');"
                                 " return !p.paused && p.currentTime > 3.4 && {src: p.currentSrc}; })()")
        play = parse_qs(urlsplit(state["src"]).query)["play"][0]
        assert re.fullmatch(r"[a-z]{20}", play)
        parts = browser.js("Promise.all(['bytes=0-99', 'bytes=100-199', 'bytes=5000-'].map(r =>"
                           " fetch(document.getElementById('player').currentSrc, {headers: {Range: r}})"
                           ".then(a => a.status)))")  # more parts of the same play, as a seek asks for
        assert parts == [206, 206, 206]
        browser.js("document.getElementById('player').pause()")
        asked = [r for r in audio_requests if f"play={play}" in r["query"]]
        assert len(asked) >= 4  # the player's own requests, and three more
        played = [detail for action, detail in rows(settings, rid) if action == "play"]
        assert len(played) == 1 and played[0].startswith("as uploaded from 3.3 s, ")
        assert played[0].endswith(f", play {play}")

        browser.click(".turn .who")  # the turn, from its start: another play
        browser.wait_for("(() => { const p = document.getElementById('player');"
                         " return !p.paused && p.currentTime > 0.4; })()")
        browser.js("document.getElementById('player').pause()")
        played = [detail for action, detail in rows(settings, rid) if action == "play"]
        assert len(played) == 2 and played[1].startswith("as uploaded from 0.3 s, ")
        assert not played[1].endswith(f", play {play}")

        for _ in range(2):  # a download names no play: each is one
            assert browser.js(f"fetch('audio/{rid}').then(a => a.status)") == 200
        assert [action for action, _ in rows(settings, rid)] == ["read", "play", "play", "play", "play"]
    finally:
        browser.close()


def test_another_sites_page_cannot_export_or_change_anything_in_your_name(
        settings: Settings, world: tuple[SqliteIndex, LocalStore], jfk_rec: Recording) -> None:  # noqa: F811
    """A page of another site can make the user's browser send a request with their cookie: a form posted, a
    link followed. Every route that changes something and every download answers such a request 403 (the
    browser's ``Sec-Fetch-Site: cross-site``, or an ``Origin`` that is not this host) and writes no row; the
    same requests from the page itself are answered, and a link from elsewhere still opens a call's page."""
    client = TestClient(create_app(settings))
    access = AccessLog(open_ledger(settings.ledger))
    rid = jfk_rec.recording_id
    asked = [("POST", "/api/produce.zip", {"q": "country"}), ("POST", "/api/export", {"q": "country"}),
             ("GET", f"/call/{rid}/transcript.txt", None), ("GET", f"/audio/{rid}", None),
             ("GET", f"/audio/{rid}/original", None), ("POST", "/", {"q": "country"}),
             ("POST", f"/call/{rid}", {"q": "country"}), ("POST", "/api/search", {"q": "country"}),
             ("POST", "/api/holds", {"scope": "agent", "value": "AG-1004", "why": "litigation"}),
             ("POST", "/api/watches", {"name": "theirs", "q": "country"}), ("DELETE", "/api/watches", {"name": "x"})]
    for other in ({"Sec-Fetch-Site": "cross-site"}, {"Origin": "https://evil.example"},
                  {"Sec-Fetch-Site": "same-site"},  # another port of this host, where another account listens
                  {"Origin": "http://testserver.evil.example", "Sec-Fetch-Site": "same-site"}):
        for method, path, form in asked:
            before = len(access.entries())
            answer = client.request(method, path, data=form, headers=other)
            assert answer.status_code == 403, (method, path, other, answer.status_code)
            assert len(access.entries()) == before, (method, path, other)  # nothing logged in their name
    link = client.get(f"/call/{rid}?t=3.3", headers={"Sec-Fetch-Site": "cross-site"})  # a report's link
    assert link.status_code == 200 and "fellow Americans" in link.text
    ours = {"Sec-Fetch-Site": "same-origin", "Origin": "null"}  # a page of ours posts with no-referrer: null
    produced = client.post("/api/produce.zip", data={"q": "country"}, headers=ours)
    assert produced.status_code == 200 and produced.headers["content-type"] == "application/zip"
    assert client.post("/api/export", data={"q": "country"}, headers={"Origin": "http://testserver"}).status_code == 200
    assert client.get(f"/call/{rid}/transcript.txt", headers={"Sec-Fetch-Site": "same-origin"}).status_code == 200


def test_asr_ui_answers_only_the_holder_of_its_token(settings: Settings, world: tuple[SqliteIndex, LocalStore],  # noqa: F811
                                                     jfk_rec: Recording, tmp_path: Path) -> None:  # noqa: F811
    """``asr ui`` prints its address with a token made for this start. Another account on the machine (``nobody``)
    reaches the port: without the token, or with another, it gets no transcript and writes no row; with the
    address as printed, the token becomes an HttpOnly, SameSite=Strict cookie and leaves the address, and the
    page answers, logged as the account that started it."""
    from services import free_port

    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASR_")}
    env.update(ASR_INDEX_PATH=str(settings.index.path("index_path")), ASR_STORE_ROOT=str(settings.storage.path(
        "store_root")), ASR_LEDGER_URL=settings.ledger.ledger_url)
    ui = subprocess.Popen([ASR, "ui", "--port", str(port)], env=env, cwd=PROJECT_ROOT, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
    access = AccessLog(open_ledger(settings.ledger))
    rid, base = jfk_rec.recording_id, f"http://127.0.0.1:{port}"

    def curl(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["runuser", "-u", "nobody", "--", "curl", "-s", "--max-time", "20", *args],
                              capture_output=True, text=True, timeout=60, cwd="/")

    def as_nobody(*args: str) -> str:
        proc = curl(*args)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    try:
        assert ui.stdout is not None
        printed = ui.stdout.readline()
        address = re.search(rf"http://127\.0\.0\.1:{port}/\?token=[\w-]{{40,}}", printed)
        assert address, printed
        deadline = time.monotonic() + 60
        while curl("-o", "/dev/null", "-w", "%{http_code}", f"{base}/").stdout != "401":  # up, and refusing
            assert ui.poll() is None and time.monotonic() < deadline, ui.stderr.read() if ui.stderr else ""
            time.sleep(0.2)
        for path in (f"/call/{rid}", f"/call/{rid}/transcript.txt", f"/audio/{rid}", f"/call/{rid}?token=guessed"):
            said = as_nobody("-w", "\n%{http_code}", f"{base}{path}")
            assert said.rsplit("\n", 1)[1] in ("401", "403") and "fellow Americans" not in said, (path, said)
        assert access.entries() == []  # refused before any route: nothing read, nothing logged

        headers = as_nobody("-D", "-", "-o", "/dev/null", address.group())
        assert re.search(r"^HTTP/1\.1 303", headers, re.M) and re.search(r"^location: /\r?$", headers, re.M | re.I)
        cookie = re.search(r"^set-cookie: (asr-ui-\d+=[^;]+);(.*)$", headers, re.M | re.I)
        assert cookie and "httponly" in cookie.group(2).lower() and "samesite=strict" in cookie.group(2).lower()
        page = as_nobody("-L", "-b", "", address.group(), f"{base}/call/{rid}")  # the printed address, then a call
        assert "fellow Americans" in page
        assert [(e.user, e.action) for e in access.entries()] == [(getpass.getuser(), "read")]
    finally:
        ui.terminate()
        ui.wait(timeout=30)
