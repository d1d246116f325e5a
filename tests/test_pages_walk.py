"""A person's way through the search app: what each page offers next, and a real browser walking it.

The index answers a search by filters alone (no words) on every backend; the pages share one header that
shows what the signed-in user may open; the call page words each finding and says why a quarantined call
has nothing to play; the nightly QA report is served from the app with links that stay in it. The browser
tests walk the auditor's way (a finding's calls, one call, play at the finding, back, export) and the
operator's (progress, a day with a failure, its recordings).
"""

from __future__ import annotations

import base64
import csv
import io
import json
import re
import time
from pathlib import Path
from typing import Any, Callable

import pytest
from browser import Browser
from fastapi import Depends, HTTPException, Request
from fastapi.testclient import TestClient
from test_index_contract import EN_KEY, OLD_KEY, ZH_KEY, _recording, _transcript, es_index, index  # noqa: F401
from test_webui import ARTEFACTS, STEREO_KEY, client, gated, jfk_rec, served, stereo, world  # noqa: F401

from asr_tasks.audit.reports import report_html
from asr_tasks.audit.rules import AuditResult, Finding
from asr_tasks.audit.call_score import CallScore
from asr_tasks.config import Settings
from asr_tasks.index.base import TranscriptIndex
from asr_tasks.index.query import Filters
from asr_tasks.index.sqlite import SqliteIndex
from asr_tasks.intake.stores import LocalStore
from asr_tasks.models import Quarantine, Recording, Transcript, recording_id_for
from asr_tasks.records.access_log import AccessLog
from asr_tasks.records.ledger import open_ledger
from asr_tasks.version import DayReports
from asr_tasks.web.app import create_app
from asr_tasks.web.call_page import audit_rules, finding_words

DAY = "2026-11-27"


def spans(idx: TranscriptIndex, query: str, **filters: Any) -> set[tuple[str, float]]:
    return {(h.key, h.start) for h in idx.search_page(query, Filters(**filters), size=100).hits}


def test_filters_alone_find_every_segment_they_let_through(index: TranscriptIndex) -> None:  # noqa: F811
    """No words, a filter: every segment of the calls it lets through, in pages, counted and exported alike; no
    words and no filter, or an exclusion alone, still finds nothing."""
    assert spans(index, "", agent="AG-2") == {(EN_KEY, 0.5), (EN_KEY, 6.5)}
    assert spans(index, "  ", date_to="2025-12-31") == {(OLD_KEY, 3.0)}
    assert spans(index, "", speaker="customer") == {(ZH_KEY, 5.0), (EN_KEY, 6.5)}
    assert spans(index, "", quality="needs_review", speaker="agent") == {(EN_KEY, 0.5)}
    assert index.search_page("").hits == [] and index.search_page("  ").hits == []
    assert spans(index, "-风险", agent="AG-1") == set()  # what must not be said is not a search by itself
    [hit] = index.search_page("", Filters(date_to="2025-12-31")).hits
    assert hit.highlight == hit.text == "我们不保证收益，投资有风险。"
    seen, after = [], None
    while True:
        page = index.search_page("", Filters(agent="AG-1"), size=2, after=after)
        seen += [(h.key, h.start) for h in page.hits]
        if page.next_after is None:
            break
        after = page.next_after
    assert sorted(seen) == sorted({(ZH_KEY, 1.0), (ZH_KEY, 5.0), (ZH_KEY, 7.5), (OLD_KEY, 3.0)})
    assert [c.to_dict() for c in index.counts("", Filters(agent="AG-1"))] == [
        {"agent_id": "AG-1", "call_date": "2025-12-31", "segments": 1, "recordings": 1},
        {"agent_id": "AG-1", "call_date": "2026-11-27", "segments": 3, "recordings": 1},
    ]
    assert index.counts("") == []


def test_a_finding_rule_alone_lists_its_calls(index: TranscriptIndex) -> None:  # noqa: F811
    """The calls with a finding of the rule, by day and key, a page at a time, each with its matching segments;
    the calls per finding of that search count the calls, not their segments."""
    zh, en, old = _recording(ZH_KEY, agent="AG-1"), _recording(EN_KEY, agent="AG-2"), _recording(OLD_KEY, agent="AG-1")
    index.replace_findings("2026-11-27", [{"finding_id": "f1", "recording_id": zh.recording_id,
                                           "rule_id": "promise-of-return"}])
    index.replace_findings("2026-11-28", [{"finding_id": "f2", "recording_id": en.recording_id,
                                           "rule_id": "promise-of-return"},
                                          {"finding_id": "f3", "recording_id": en.recording_id,
                                           "rule_id": "recording-disclosure"}])
    index.replace_findings("2025-12-31", [{"finding_id": "f4", "recording_id": old.recording_id,
                                           "rule_id": "recording-disclosure"}])
    rule = Filters(rule="promise-of-return")
    assert spans(index, "", rule="promise-of-return") == {(ZH_KEY, 1.0), (ZH_KEY, 5.0), (ZH_KEY, 7.5),
                                                          (EN_KEY, 0.5), (EN_KEY, 6.5)}
    assert index.rule_counts("", rule) == {"promise-of-return": 2, "recording-disclosure": 1}
    listed = index.calls("", rule, size=10)
    assert [(c["key"], c["hits"], c["agent_id"]) for c in listed.calls] == [(ZH_KEY, 3, "AG-1"), (EN_KEY, 2, "AG-2")]
    assert listed.next_after is None and listed.calls[1]["quality"] == "needs_review"
    keys, after = [], None
    while True:
        page = index.calls("", Filters(agent="AG-1"), size=1, after=after)
        keys += [c["key"] for c in page.calls]
        if page.next_after is None:
            break
        after = page.next_after
    assert keys == [OLD_KEY, ZH_KEY]  # oldest day first, each call once
    assert [c["key"] for c in index.calls("收益", Filters()).calls] == [OLD_KEY, ZH_KEY]  # words narrow it too
    assert index.calls("", Filters()).calls == [] and index.calls("", Filters(rule="no-such-rule")).calls == []


# The web pages, on the world of test_webui: the JFK call, a Chinese call, a stereo call with a finding.


def header_of(page: str) -> list[str]:
    """The labels of the page's header, in order."""
    nav = re.search(r'<nav class="app"[^>]*>(.*?)</nav>', page, re.S)
    assert nav, page[:500]
    return re.findall(r">([^<>]+)</a>", nav.group(1))


def granting(grants: dict[str, set[str]], asked: list[str]) -> Callable[[str], Callable[..., str]]:
    """An ``authorize`` like Airflow's: each check depends on the signed-in user (here an X-User header) and
    answers their name, or 403 when their grants lack the permission; ``asked`` records each check run."""
    def user_of(request: Request) -> str:
        return request.headers.get("x-user", "nobody")

    def authorize(permission: str) -> Callable[..., str]:
        def check(user: str = Depends(user_of)) -> str:
            asked.append(permission)
            if permission not in grants.get(user, set()):
                raise HTTPException(status_code=403, detail=f"{user} may not {permission}")
            return user

        return check

    return authorize


def test_the_header_shows_the_pages_the_user_may_open(settings: Settings, stereo: Recording,  # noqa: F811
                                                      jfk_rec: Recording) -> None:  # noqa: F811
    """Every page has the one header, and it lists only what the signed-in user may open; the checks run when a
    page draws its header, never for the audio a player fetches; a page offers no download its user may not get."""
    grants = {"alice": {"read"}, "bob": {"access_log"}, "ada": {"read", "export", "access_log"}}
    asked: list[str] = []
    signed = TestClient(create_app(settings, authorize=granting(grants, asked)))
    rid = stereo.recording_id
    pages = ["/", f"/call/{rid}", "/progress", f"/progress/day/{DAY}", "/reports/qa", f"/reports/qa/{DAY}", "/trends"]
    for url in pages:
        answer = signed.get(url, headers={"X-User": "alice"})
        assert answer.status_code == 200, url
        assert header_of(answer.text) == ["Search", "Findings", "Trends", "Progress", "Saved searches"], url
    searched = signed.post("/", data={"q": "returns"}, headers={"X-User": "alice"})
    assert header_of(searched.text) == ["Search", "Findings", "Trends", "Progress", "Saved searches"]
    assert header_of(signed.get("/access-log", headers={"X-User": "bob"}).text) == ["Access log"]
    lead = TestClient(create_app(settings, authorize=granting({"lee": {"read_team"}}, [])))
    assert header_of(lead.get("/", headers={"X-User": "lee"}).text) == ["Search", "Findings", "Trends",
                                                                          "Saved searches"]  # no backlog
    assert signed.get("/", headers={"X-User": "bob"}).status_code == 403
    full = signed.post("/", data={"q": "returns"}, headers={"X-User": "ada"}).text
    assert header_of(full) == ["Search", "Findings", "Trends", "Progress", "Saved searches", "Access log"]  # no review
    assert 'aria-current="page">Search</a>' in full and 'action="api/export"' in full
    assert "api/export" not in searched.text  # no export for her
    call = signed.get(f"/call/{rid}", headers={"X-User": "alice"}).text
    assert "transcript.txt" not in call and 'id="player"' in call
    assert "transcript.txt" in signed.get(f"/call/{rid}", headers={"X-User": "ada"}).text
    asked.clear()
    audio = signed.get(f"/audio/{jfk_rec.recording_id}", headers={"X-User": "alice", "Range": "bytes=0-9"})
    assert audio.status_code == 206
    assert asked == ["read"]  # the route's own guard, and no other check


def test_a_finding_alone_lists_its_calls_with_their_findings_in_words(client: TestClient,  # noqa: F811
                                                                     settings: Settings,
                                                                     stereo: Recording) -> None:  # noqa: F811
    """A finding rule alone lists the calls with that finding, each finding said in words and linked to its
    second on the call page, which leads back to this search; the facets name what they count; nothing found
    says what was asked and what to try; the landing page says how to search."""
    page = client.post("/", data={"q": "", "rule": "promise-of-return"})
    assert page.status_code == 200
    html = page.text
    assert html.count('<li class="call') == 1 and STEREO_KEY in html and 'class="call needs-review"' in html
    assert "promise-of-return at 0:05.5: the agent said “guarantees your returns”" in html
    link = re.search(r'<a class="finding" href="(call/[^"]+)"', html).group(1)  # type: ignore[union-attr]
    assert link == f"call/{stereo.recording_id}?t=5.5"  # the call and the second: the search is posted there
    assert "<h2>calls per agent</h2>" in html and "<h2>calls per finding</h2>" in html and "hits per" not in html
    assert '<option value="promise-of-return" selected>' in html
    assert re.search(r'<form id="exported" method="post" action="api/export" hidden><input type="hidden" name="q" '
                     r'value=""><input type="hidden" name="rule" value="promise-of-return"></form>', html)
    row = AccessLog(open_ledger(settings.ledger)).entries()[-1]
    assert (row.action, row.query, row.filters, row.hits, row.detail) == (
        "search", "", {"rule": "promise-of-return"}, 1, "calls")

    words = client.post("/", data={"q": "returns"}).text
    assert "<h2>hits per agent</h2>" in words and "<h2>hits per day</h2>" in words
    assert "<h2>calls per finding</h2>" in words

    none = client.post("/", data={"q": "", "rule": "no-such-rule", "agent": "AG-1007"}).text
    assert "No calls match finding no-such-rule, agent AG-1007." in none and "<li>one filter fewer</li>" in none
    nothing = client.post("/", data={"q": "refund", "date_from": DAY}).text
    assert "No hits for refund. No calls match “refund”, from 2026-11-27." in nothing
    assert "a wider range of days" in nothing and "fewer words" in nothing
    landing = client.get("/").text
    assert 'id="hint"' in landing and "by a filter alone" in landing and 'id="empty"' not in landing

    export = client.post("/api/export", data={"q": "", "rule": "promise-of-return", "format": "json"})
    assert export.status_code == 200 and {h["key"] for h in export.json()} == {STEREO_KEY}
    assert len(export.json()) == 5  # every segment of the call


def test_the_call_page_leads_back_to_the_search_it_came_from(client: TestClient, stereo: Recording) -> None:  # noqa: F811
    """Opened from a result, the call page is posted the search: its words are marked, and the way back posts the
    search's words, filters and page again; no address of either page holds a word of it. Opened by its
    address alone, the page leads to Search."""
    html = client.post("/", data={"q": "returns", "agent": "AG-1007"}).text
    link = re.search(r'<a class="open" href="([^"]+)"', html).group(1)  # type: ignore[union-attr]
    assert re.fullmatch(rf"call/{stereo.recording_id}\?t=[\d.]+", link)
    call = client.post("/" + link, data={"q": "returns", "agent": "AG-1007", "after": "WyJ4Il0"}).text
    back = re.search(r'<form method="post" action="./" class="go" id="back">(.*?)<button type="submit" '
                     r'class="back">← Back to the search</button></form>', call)
    assert back and re.findall(r'name="(\w+)" value="([^"]*)"', back.group(1)) == [
        ("q", "returns"), ("agent", "AG-1007"), ("after", "WyJ4Il0")]
    assert '<mark class="match">returns</mark>' in call
    assert not re.search(r'(href|action|src)="[^"]*(returns|AG-1007)', call)
    assert '<a class="back" href="./">← Search</a>' in client.get(f"/call/{stereo.recording_id}").text


def test_matches_are_counted_per_phrase(client: TestClient, jfk_rec: Recording) -> None:  # noqa: F811
    """Two occurrences of a two-word phrase are two matches, quoted or not."""
    for q in ('"your country"', "your country", "country your"):
        html = client.post(f"/call/{jfk_rec.recording_id}", data={"q": q}).text
        assert re.findall(r'<mark class="match">([^<]+)</mark>', html) == ["your country", "your country"], q
    html = client.post(f"/call/{jfk_rec.recording_id}", data={"q": "ask country"}).text
    assert len(re.findall(r'<mark class="match">', html)) == 4  # apart, each is a match of its own


def test_each_finding_reads_as_what_it_means(settings: Settings) -> None:
    """Every kind of rule worded from its fields: an absence is "no ... in the first N s", never "at 0:00.0"."""
    rules = audit_rules(settings)
    said = {"speaker": "agent", "severity": "high"}
    assert finding_words({"rule_id": "recording-disclosure", "start": 0.0, "end": 15.0, "matched_text": "",
                          **said}, rules) == "no recording disclosure in the first 15 s from the agent"
    assert finding_words({"rule_id": "promise-of-return", "start": 5.5, "end": 8.0,
                          "matched_text": "guaranteed return", **said}, rules) == (
        "promise-of-return at 0:05.5: the agent said “guaranteed return”")
    assert finding_words({"rule_id": "card-number-read-out", "start": 19.54, "end": 25.6,
                          "matched_text": "[CARD ****1111]", **said}, rules) == (
        "card-number-read-out at 0:19.5: the agent read out [CARD ****1111]")
    assert finding_words({"rule_id": "long-hold", "start": 62.0, "end": 134.3, "matched_text": "72.3 s",
                          "speaker": "any"}, rules) == "long-hold at 1:02.0: nobody spoke for 72 s"
    assert finding_words({"rule_id": "agent-dominates", "start": 0.0, "end": 300.0,
                          "matched_text": "91% of talk time", **said}, rules) == (
        "agent-dominates: the agent took 91% of talk time (at most 85% allowed)")
    assert finding_words({"rule_id": "gone-rule", "start": 0.0, "end": 10.0, "matched_text": "", "speaker": "any"},
                         {}) == "no gone rule in the first 10 s"  # a rule no longer in the files: by its shape


def test_the_call_page_words_its_findings(client: TestClient, world: tuple[SqliteIndex, LocalStore],  # noqa: F811
                                          stereo: Recording) -> None:  # noqa: F811
    kept, _ = world
    kept.replace_findings(DAY, [*kept.findings(DAY), {
        "finding_id": "f2", "recording_id": stereo.recording_id, "rule_id": "recording-disclosure",
        "severity": "medium", "description": "No disclosure.", "speaker": "agent", "start": 0.0, "end": 15.0,
        "key": STEREO_KEY, "matched_text": "", "agent_id": "AG-1007"}])
    html = client.get(f"/call/{stereo.recording_id}").text
    assert "no recording disclosure in the first 15 s from the agent</span> <span class=\"rule\">recording-disclosure" in html
    assert "recording-disclosure at 0:00.0" not in html
    assert "<title>no recording disclosure in the first 15 s from the agent (recording-disclosure)</title>" in html


def test_a_quarantined_call_says_why_and_offers_nothing_dead(client: TestClient, settings: Settings,  # noqa: F811
                                                             world: tuple[SqliteIndex, LocalStore]) -> None:  # noqa: F811
    kept, _ = world
    key = "calls/2026/11/27/call_0007.wav"
    rec = Recording(recording_id=recording_id_for("recordings", key, "e7"), bucket="recordings", key=key, etag="e7",
                    size=10, call_id="call_0007", call_date=DAY, agent_id="AG-1002")
    kept.record_quarantine(Quarantine(recording=rec, reason="not a decodable media file: no 'fmt ' tag found",
                                       pipeline_version="1"))
    ledger = open_ledger(settings.ledger)
    ledger.sensed([rec], "m", "1")
    ledger.advance(rec.recording_id, "quarantined", reason="not a decodable media file: no 'fmt ' tag found")
    html = client.get(f"/call/{rec.recording_id}").text
    assert "<b>Quarantined:</b> not a decodable media file: no &#39;fmt &#39; tag found." in html
    assert "there is no audio to play and no transcript" in html
    for dead in ("<audio", "transcript.txt", 'id="timeline"', "No transcript for this call", "<script"):
        assert dead not in html, dead
    day = client.get(f"/progress/day/{DAY}").text
    assert f'<a href="call/{rec.recording_id}">{key}</a>' in day


def stored_audit(settings: Settings, store: LocalStore, findings: list[Finding]) -> None:
    """The day's QA report as ``run_audit`` stores it (HTML with the configured search_url, and JSON)."""
    result = AuditResult(DAY, 3, findings)
    reports, bucket = DayReports(DAY), settings.storage.artefacts_bucket
    opened = [{"at": "2026-11-27T10:00:00+00:00", "user": "alice", "action": "read", "recording_id": "r1",
               "detail": "call page at 0.0 s"}]
    store.put_bytes(bucket, reports.audit("html"), report_html(result, settings.web.search_url, opened, None).encode())
    scores = [CallScore(f.recording_id, f.key, DAY, f.agent_id, "bank-call", {"no-promise-of-return": "no"},
                        {"no-promise-of-return": f"finding of {f.rule_id}"}, 0.0).to_dict()
              for f in {f.recording_id: f for f in findings}.values()]  # each call with a finding, scored
    store.put_bytes(bucket, reports.audit("json"), json.dumps(
        {"summary": result.summary(), "findings": [f.to_dict() for f in result.findings], "opened": opened}).encode())
    store.put_bytes(bucket, reports.scores, json.dumps({"scores": scores}).encode())


def test_the_qa_report_is_served_with_links_that_stay_in_the_app(
        settings: Settings, world: tuple[SqliteIndex, LocalStore], stereo: Recording) -> None:  # noqa: F811
    """Under any mount point and port the served report's links are relative to its <base href>; reading it is
    an access-log row; the days with a report are listed; the day's recordings page links it."""
    _, store = world
    finding = Finding("f1", "promise-of-return", "high", "A promise.", stereo.recording_id, STEREO_KEY, DAY,
                      "AG-1007", "agent", 5.5, 8.0, "guarantees your returns")
    absent = Finding("f2", "recording-disclosure", "medium", "No disclosure.", stereo.recording_id, STEREO_KEY, DAY,
                     "AG-1007", "agent", 0.0, 15.0, "")
    mounted = TestClient(create_app(settings), root_path="/search")
    assert "No QA report is stored for 2026-11-27" in mounted.get(f"/reports/qa/{DAY}").text
    assert "No QA report is stored yet" in mounted.get("/reports/qa").text
    stored_audit(settings, store, [absent, finding])
    page = mounted.get(f"/reports/qa/{DAY}")
    assert page.status_code == 200
    html = page.text
    assert '<base href="/search/">' in html and "localhost" not in html and "8091" not in html
    assert f'<a href="call/{stereo.recording_id}?t=5.50">{STEREO_KEY} @ 5.5 s</a>' in html
    assert "<td>no recording disclosure in the first 15 s from the agent</td>" in html
    assert ('<form method="post" action="./" class="go"><input type="hidden" name="rule" value="promise-of-return">'
            '<input type="hidden" name="date_from" value="2026-11-27"><input type="hidden" name="date_to" '
            'value="2026-11-27"><button type="submit" class="link">promise-of-return</button></form>') in html
    assert header_of(html) == ["Search", "Findings", "Trends", "Progress", "Saved searches", "Reviews", "Access log"]
    row = AccessLog(open_ledger(settings.ledger)).entries()[-1]
    assert (row.user, row.action, row.detail) == (row.user, "read", "the QA report of 2026-11-27")
    assert f'<a href="reports/qa/{DAY}">{DAY}</a>' in mounted.get("/reports/qa").text
    assert f'href="reports/qa/{DAY}"' in mounted.get(f"/progress/day/{DAY}").text
    stored = store.get_bytes(settings.storage.artefacts_bucket, DayReports(DAY).audit("html")).decode()
    assert f'href="http://localhost:8091/call/{stereo.recording_id}?t=5.50"' in stored  # read outside the app
    assert mounted.get("/reports/qa/2026-02-30").status_code == 400 and mounted.get("/reports/qa/x").status_code == 422


# A real browser walking the two ways through the app, on a real HTTP server.


@pytest.fixture
def walked(settings: Settings, world: tuple[SqliteIndex, LocalStore], stereo: Recording,  # noqa: F811
           jfk_rec: Recording) -> dict[str, Recording]:  # noqa: F811
    """The day as the pipeline and the audit leave it: the stereo call playable with its finding, a quarantined
    upload, the ledger's rows for all of them, and the day's QA report stored."""
    kept, store = world
    gated(store, settings, Transcript(recording=stereo, duration=11.0, language="en", model="m",
                                      pipeline_version="1", segments=[]))
    key = "calls/2026/11/27/call_0007.wav"
    bad = Recording(recording_id=recording_id_for("recordings", key, "e7"), bucket="recordings", key=key, etag="e7",
                    size=10, call_id="call_0007", call_date=DAY, agent_id="AG-1002")
    kept.record_quarantine(Quarantine(recording=bad, reason="not a decodable media file", pipeline_version="1"))
    ledger = open_ledger(settings.ledger)
    ledger.sensed([jfk_rec, stereo, bad], "m", "1")
    for rec in (jfk_rec, stereo):
        ledger.advance(rec.recording_id, "indexed")
    ledger.advance(bad.recording_id, "quarantined", reason="not a decodable media file")
    stored_audit(settings, store, [Finding("f1", "promise-of-return", "high", "A promise.", stereo.recording_id,
                                           STEREO_KEY, DAY, "AG-1007", "agent", 5.5, 8.0, "guarantees your returns")])
    return {"stereo": stereo, "quarantined": bad}


def opened(browser: Browser, selector: str) -> None:
    """Click a link for real, in view and on its first line (a link may wrap), and wait for its page."""
    x, y = browser.js(f"(() => {{ const a = document.querySelector({json.dumps(selector)});"
                      " a.scrollIntoView({block: 'center'}); const r = a.getClientRects()[0];"
                      " window.walking = true; return [r.x + r.width / 2, r.y + r.height / 2]; })()")
    for kind in ("mousePressed", "mouseReleased"):
        browser.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)
    browser.wait_for("!window.walking && document.readyState === 'complete'")


def shot(browser: Browser, name: str) -> None:
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    (ARTEFACTS / name).write_bytes(base64.b64decode(browser.send("Page.captureScreenshot", format="png")["data"]))


def test_browser_walks_the_auditors_way(served: tuple[str, list[dict[str, str]]],  # noqa: F811
                                        walked: dict[str, Recording],
                                        settings: Settings, tmp_path: Path) -> None:
    """From the landing page: a finding rule alone, its call, play from the finding, back to the same search,
    and the search's calls exported."""
    url, _ = served
    call = walked["stereo"]
    browser = Browser(tmp_path / "chromium-profile")
    try:
        browser.send("Page.enable")
        browser.send("Page.setDownloadBehavior", behavior="allow", downloadPath=str(tmp_path / "downloads"))
        browser.send("Page.navigate", url=url)
        browser.wait_for("document.readyState === 'complete' && !!document.getElementById('hint')")
        browser.js("document.querySelector('select[name=rule]').value = 'promise-of-return'")
        opened(browser, "#search button[type=submit]")
        assert browser.js("location.href") == url  # the search is posted, not put in the address
        assert browser.js("document.querySelector('select[name=rule]').value") == "promise-of-return"
        assert browser.js("document.querySelectorAll('li.call').length") == 1
        assert browser.js("document.querySelector('a.finding').innerText") == (
            "promise-of-return at 0:05.5: the agent said “guarantees your returns”")
        shot(browser, "walk-findings.png")

        before = len(AccessLog(open_ledger(settings.ledger)).entries())
        opened(browser, "a.finding")
        assert browser.js("location.href") == f"{url}call/{call.recording_id}?t=5.5"  # the second, no words
        opening = [(e.action, e.recording_id) for e in AccessLog(open_ledger(settings.ledger)).entries()[before:]]
        assert opening == [("read", call.recording_id)]  # opened, not played
        browser.js("window.seeks = []; document.getElementById('player')"
                   ".addEventListener('seeked', e => seeks.push(e.target.currentTime))")
        browser.click(".finding-link")
        state = browser.wait_for("(() => { const p = document.getElementById('player'); return seeks.length > 0 &&"
                                 " !p.paused && p.currentTime > 5.6 && {seeked: seeks[0], now: p.currentTime}; })()")
        # 'seeked' is handled once the seek is done, and a busy machine may already have played a little further
        assert state["seeked"] == pytest.approx(5.5, abs=0.05) and state["now"] < 8.0
        browser.js("document.getElementById('player').pause()")
        plays = [e.detail or "" for e in AccessLog(open_ledger(settings.ledger)).entries()
                 if (e.action, e.recording_id) == ("play", call.recording_id)]
        assert len(plays) == 1 and re.fullmatch(r"as uploaded from 5\.5 s, bytes .*, play [a-z]{20}", plays[0])
        shot(browser, "walk-call.png")

        assert browser.js("document.querySelector('button.back').innerText") == "← Back to the search"
        opened(browser, "button.back")
        assert browser.js("location.href") == url
        assert browser.js("document.querySelector('select[name=rule]').value") == "promise-of-return"
        assert browser.js("document.querySelectorAll('li.call').length") == 1

        browser.click("button.export")
        downloaded = tmp_path / "downloads" / "search.csv"
        deadline = time.monotonic() + 30
        while not downloaded.exists():
            assert time.monotonic() < deadline, "the export did not download"
            time.sleep(0.1)
        rows = list(csv.DictReader(io.StringIO(downloaded.read_text())))
        assert {r["key"] for r in rows} == {STEREO_KEY} and len(rows) == 5
        last = AccessLog(open_ledger(settings.ledger)).entries()[-1]
        assert (last.action, last.filters, last.detail) == ("export", {"rule": "promise-of-return"},
                                                            "search results as csv")
    finally:
        browser.close()


def test_browser_walks_the_operators_way(served: tuple[str, list[dict[str, str]]],  # noqa: F811
                                         walked: dict[str, Recording],
                                         tmp_path: Path) -> None:
    """From the landing page through the header: progress, the day of a failure, its recordings, the quarantined
    one's page saying why; then the day's QA report and a finding's second on its call page."""
    url, _ = served
    bad, call = walked["quarantined"], walked["stereo"]
    browser = Browser(tmp_path / "chromium-profile")
    try:
        browser.send("Page.enable")
        browser.send("Page.navigate", url=url)
        browser.wait_for("document.readyState === 'complete' && !!document.querySelector('nav.app')")
        opened(browser, "nav.app a[href='progress']")
        assert browser.js("document.querySelector('nav.app a[aria-current=page]').innerText") == "Progress"
        assert "not a decodable media file" in browser.js("document.body.innerText")
        opened(browser, f"a[href='progress/day/{DAY}']")
        assert browser.js("location.pathname") == f"/progress/day/{DAY}"
        assert browser.js("document.querySelectorAll('tbody tr').length") == 3
        shot(browser, "walk-day.png")

        opened(browser, f"a[href='call/{bad.recording_id}']")
        said = browser.js("document.getElementById('quarantined').innerText")
        assert said.startswith("Quarantined: not a decodable media file.") and "no audio to play" in said
        assert browser.js("document.querySelectorAll('audio, a[href*=transcript]').length") == 0

        browser.send("Page.navigate", url=f"{url}progress/day/{DAY}")
        browser.wait_for("document.readyState === 'complete' && !!document.querySelector('a.qa')")
        opened(browser, "a.qa")
        assert browser.js("location.pathname") == f"/reports/qa/{DAY}"
        assert browser.js("document.querySelector('nav.app a[aria-current=page]').innerText") == "Findings"
        opened(browser, f"a[href^='call/{call.recording_id}']")
        assert browser.js("location.href") == f"{url}call/{call.recording_id}?t=5.50"
        assert re.fullmatch(rf"audio/{call.recording_id}\?t=5\.5&play=[a-z]{{20}}",
                            browser.js("document.getElementById('player').getAttribute('src')"))
        shot(browser, "walk-report-call.png")
    finally:
        browser.close()
