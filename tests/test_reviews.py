"""Reviews of QA findings: confirmed, dismissed with a reason or assigned, kept by a re-scored day's same finding,
every action in the access log, comments masked, each rule's findings by status; from the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Callable

import pytest
from fastapi.testclient import TestClient
from test_audit import CALLS, DAY, RULES, _record_day
from test_pages_walk import granting, header_of

from asr_tasks.audit.reports import rescore, run_audit
from asr_tasks.audit.reviews import Review, ReviewError, Reviews, precision
from asr_tasks.audit.rules import load_rule_set
from asr_tasks.config import PROJECT_ROOT, Settings
from asr_tasks.intake.stores import LocalStore
from asr_tasks.records.access_log import AccessLog
from asr_tasks.records.ledger import open_ledger
from asr_tasks.text.masking import configured_policy
from asr_tasks.web.app import create_app


def reviews(settings: Settings) -> Reviews:
    ledger = open_ledger(settings.ledger)
    return Reviews(ledger, AccessLog(ledger), configured_policy(settings))


def test_a_finding_is_confirmed_dismissed_or_assigned_and_keeps_its_review_when_rescored(
        settings: Settings) -> None:
    index = _record_day(settings, CALLS)
    store = LocalStore(settings.storage.path("store_root"))
    result = run_audit(DAY, load_rule_set(RULES), index, store, settings)
    first, second, third = result.findings[:3]
    kept = reviews(settings)
    kept.review(first, "qa1", "confirmed", comment="heard it at 0:09")
    dismissed = kept.review(second, "qa1", "dismissed", "not-said",
                            comment="the customer read 4111 1111 1111 1111 back")
    kept.review(third, "lead", "assigned", assignee="qa2")
    assert dismissed.reason == "not-said" and "4111" not in dismissed.comment and "[CARD" in dismissed.comment
    refusals = {
        "needs a reason": lambda: kept.review(first, "qa1", "dismissed"),
        "says it in the comment": lambda: kept.review(first, "qa1", "dismissed", "other"),
        "status 'closed'": lambda: kept.review(first, "qa1", "closed"),
        "names whom": lambda: kept.review(first, "qa1", "assigned"),
        "only a dismissal has a reason": lambda: kept.review(first, "qa1", "confirmed", "allowed"),
        "user name: at most 255 characters, no personal data": lambda: kept.review(
            first, "qa1", "assigned", assignee="4111 1111 1111 1111"),
        "the assignee holds a control character": lambda: kept.review(
            first, "qa1", "assigned", assignee="\x1b[2Jmallory"),
        "the comment holds a control character": lambda: kept.review(first, "qa1", "confirmed", comment="a\u202eb"),
        "at most 2000 characters": lambda: kept.review(first, "qa1", "confirmed", comment="x" * 2001),
    }
    for message, attempt in refusals.items():
        with pytest.raises(ReviewError, match=message):
            attempt()

    held = kept.of(f.finding_id for f in result.findings)
    assert {f.finding_id: held[f.finding_id].status for f in result.findings if f.finding_id in held} == {
        first.finding_id: "confirmed", second.finding_id: "dismissed", third.finding_id: "assigned"}
    by_rule = precision(result.findings, held)
    assert sum(c["open"] for c in by_rule.values()) == len(result.findings) - 3
    assert by_rule[second.rule_id]["dismissed"] >= 1 and set(by_rule) == {f.rule_id for f in result.findings}

    # A verdict taken back: the finding is open again (the access log keeps both).
    assert kept.review(third, "lead", "open", comment="not for qa2 after all").status == "open"
    kept.review(third, "lead", "assigned", assignee="qa2")
    # Re-scored with the same rules, the same findings come back with the same ids: their reviews stand.
    again = rescore(DAY, load_rule_set(RULES), index, store, settings)
    assert again is not None and not again.added and not again.removed
    def verdicts(reviews: dict[str, Review]) -> dict[str, tuple[str, str | None, str | None, str]]:
        return {i: (r.status, r.reason, r.assignee, r.reviewer) for i, r in reviews.items()}  # not when

    assert verdicts(kept.of(f.finding_id for f in again.result.findings)) == verdicts(held)
    log = [e.to_dict() for e in AccessLog(open_ledger(settings.ledger)).entries(actions=("review",))]
    assert [(e["user"], e["recording_id"]) for e in log] == [
        ("qa1", first.recording_id), ("qa1", second.recording_id), *[("lead", third.recording_id)] * 3]
    assert "dismissed (not-said)" in log[1]["detail"] and "4111" not in json.dumps(log)


def asr_on(settings: Settings) -> Callable[..., subprocess.CompletedProcess[str]]:
    """``asr`` as a shell runs it, on the test's ledger, index and store (and nothing of the environment's)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASR_")}
    env.update(ASR_LEDGER_URL=settings.ledger.ledger_url, ASR_INDEX_PATH=str(settings.index.path("index_path")),
               ASR_STORE_ROOT=str(settings.storage.path("store_root")))
    asr = str(Path(sys.executable).parent / "asr")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([asr, *args], env=env, capture_output=True, text=True, timeout=120, cwd=PROJECT_ROOT)

    return run


def test_review_from_the_command_line(settings: Settings) -> None:
    index = _record_day(settings, CALLS)
    run_audit(DAY, load_rule_set(RULES), index, LocalStore(settings.storage.path("store_root")), settings)
    run = asr_on(settings)

    listed = json.loads(run("review", "--list", "--date", DAY, "--json").stdout)
    reads = AccessLog(open_ledger(settings.ledger)).entries(actions=("read",))
    assert [e.detail for e in reads] == [f"the review queue of {DAY}"]  # reading the queue is logged
    assert listed["findings"] and {f["status"] for f in listed["findings"]} == {"open"}
    finding = listed["findings"][0]
    done = run("review", "--date", DAY, "--finding", finding["finding_id"], "--dismiss", "allowed", "--why", "ok")
    assert done.returncode == 0, done.stderr
    assert "dismissed, allowed" in done.stdout
    dismissed = json.loads(run("review", "--date", DAY, "--status", "dismissed", "--json").stdout)
    assert [(f["finding_id"], f["review"]["comment"]) for f in dismissed["findings"]] == [(finding["finding_id"], "ok")]
    assert dismissed["rules"][finding["rule_id"]]["dismissed"] == 1
    table = run("review", "--date", DAY, "--status", "open").stdout.splitlines()
    assert table[0].split()[:2] == ["STATUS", "RULE"] and len(table) == len(listed["findings"])
    audit = json.loads(run("audit", "--date", DAY, "--json").stdout)
    assert audit["reviews"][finding["rule_id"]]["dismissed"] == 1
    for args, message in [
        (("--finding", finding["finding_id"]), "--finding ID with one of"),
        (("--confirm",), "--finding ID with one of"),
        (("--finding", "nope", "--confirm"), "no finding of 2026-11-27 has that id"),
        (("--finding", finding["finding_id"], "--dismiss", "other"), "says it in the comment"),
        (("--finding", finding["finding_id"], "--confirm", "--json"), "or no --finding, to list"),
        (("--finding", finding["finding_id"], "--assign", "x" * 300), "at most 255 characters"),
    ]:
        refused = run("review", "--date", DAY, *args)
        assert refused.returncode == 2 and message in refused.stderr, (args, refused.stderr)


def test_the_review_queue_on_the_page(settings: Settings) -> None:
    """A Call Reviewer opens the day's queue, dismisses a finding with a reason, and the queue, the rule's counts
    and the access log show it; a Call Reader may search but not review."""
    index = _record_day(settings, CALLS)
    store = LocalStore(settings.storage.path("store_root"))
    result = run_audit(DAY, load_rule_set(RULES), index, store, settings)
    grants = {"rita": {"read", "review"}, "carl": {"read"}}
    client = TestClient(create_app(settings, index=index, store=store, authorize=granting(grants, [])))
    as_rita, as_carl = {"X-User": "rita"}, {"X-User": "carl"}

    page = client.get("/reviews", headers=as_rita)
    assert page.status_code == 200 and f"Reviews of {DAY}" in page.text
    assert "Reviews" in header_of(page.text) and "Reviews" not in header_of(client.get("/", headers=as_carl).text)
    finding = result.findings[0]
    assert finding.finding_id in page.text and f"call/{finding.recording_id}?" in page.text
    assert client.get("/reviews", headers=as_carl).status_code == 403
    assert client.post(f"/api/reviews/{finding.finding_id}", json={"date": DAY, "status": "confirmed"},
                       headers=as_carl).status_code == 403

    said = {"date": DAY, "status": "dismissed", "reason": "other-party", "comment": "the customer said it"}
    done = client.post(f"/api/reviews/{finding.finding_id}", json=said, headers=as_rita)
    assert done.status_code == 200, done.text
    assert (done.json()["reviewer"], done.json()["status"]) == ("rita", "dismissed")
    assert client.post(f"/api/reviews/{finding.finding_id}", json={**said, "reason": None},
                       headers=as_rita).status_code == 400
    assert client.post("/api/reviews/nope", json=said, headers=as_rita).status_code == 404
    assert client.post(f"/api/reviews/{finding.finding_id}", json={**said, "date": "2026-11-26"},
                       headers=as_rita).status_code == 404  # no audit that day
    assert client.get("/api/reviews", params={"date": DAY, "status": "urgent"}, headers=as_rita).status_code == 422

    listed = client.get("/api/reviews", params={"date": DAY, "status": "dismissed"}, headers=as_rita).json()
    assert [f["finding_id"] for f in listed["findings"]] == [finding.finding_id]
    assert listed["rules"][finding.rule_id]["dismissed"] == 1
    open_page = client.get("/reviews", params={"date": DAY}, headers=as_rita).text  # open ones by default
    assert f'data-finding="{finding.finding_id}"' not in open_page and "the customer said it" not in open_page
    shown = client.get("/reviews", params={"date": DAY, "status": "dismissed"}, headers=as_rita).text
    assert f'data-finding="{finding.finding_id}"' in shown and "the customer said it" in shown
    assert ": said by the other party, or quoted" in shown
    log = AccessLog(open_ledger(settings.ledger)).entries(actions=("review",))
    assert [(e.user, e.recording_id) for e in log] == [("rita", finding.recording_id)]
    reads = AccessLog(open_ledger(settings.ledger)).entries(actions=("read",))
    assert all(e.user == "rita" and e.detail == f"the review queue of {DAY}" for e in reads)
    assert len(reads) == 4  # the pages and the list read; no verdict, refused or not, reads the queue
    missing = client.get("/reviews", params={"date": "2026-11-26"}, headers=as_rita)
    assert missing.status_code == 404 and "no audit is stored for 2026-11-26" in missing.text
    assert "<html" in missing.text and "Reviews" in header_of(missing.text)  # a page, not JSON
    assert client.get("/reviews", params={"status": "urgent"}, headers=as_rita).status_code == 422
    disclosure = client.get("/reviews", params={"date": DAY, "rule": "recording-disclosure", "status": ""},
                            headers=as_rita).text
    assert "no recording disclosure in the first 15 s" in disclosure  # what a finding means, in words


def test_the_queue_spans_days_and_narrows_by_severity_agent_and_team(settings: Settings, tmp_path: Path) -> None:
    """A range of days lists every audited day's findings; severity, agent and team (``audit.teams``) narrow
    them; a range, team or severity the queue cannot list is refused with why."""
    index = _record_day(settings, CALLS)
    store = LocalStore(settings.storage.path("store_root"))
    result = run_audit(DAY, load_rule_set(RULES), index, store, settings)
    teams = tmp_path / "teams.yaml"
    teams.write_text("teams:\n  retail: {leads: [lee], agents: [AG-1]}\n  wealth: {agents: [AG-7]}\n")
    app = create_app(replace(settings, audit=replace(settings.audit, teams=str(teams))), index=index, store=store,
                     authorize=granting({"rita": {"read", "review"}}, []))
    client = TestClient(app, headers={"X-User": "rita"})

    def listed(**params: str) -> list[str]:
        answer = client.get("/api/reviews", params=params)
        assert answer.status_code == 200, answer.text
        return sorted(f["finding_id"] for f in answer.json()["findings"])

    every = sorted(f.finding_id for f in result.findings)
    assert listed(date_from="2026-11-01", date_to="2026-11-30") == every == listed()
    assert listed(date_from="2026-11-28", date_to="2026-11-30") == []
    assert listed(severity="high") == sorted(f.finding_id for f in result.findings if f.severity == "high")
    assert listed(agent="AG-1") == every and listed(agent="AG-2") == []
    assert listed(team="retail") == every and listed(team="wealth") == []
    reviews(settings).review(result.findings[0], "rita", "assigned", assignee="wendy")
    assert listed(assignee="wendy") == [result.findings[0].finding_id] and listed(assignee="bob") == []
    counts = client.get("/api/reviews", params={"severity": "high"}).json()["rules"]  # of what the filters keep
    assert sum(sum(c.values()) for c in counts.values()) == len(listed(severity="high"))
    pages = [client.get("/api/reviews", params={"size": 2, "page": n}).json() for n in range(3)]
    assert [p["listed"] for p in pages] == [len(every)] * 3 and sum(len(p["findings"]) for p in pages) == len(every)
    assert sorted(f["finding_id"] for p in pages for f in p["findings"]) == every  # each on one page
    paged = client.get("/reviews", params={"status": "", "size": 2, "page": 1}).text
    assert f"Findings 3 to 4 of {len(every)}." in paged and "page=0" in paged and "page=2" in paged
    for params, message in [({"team": "nope"}, "not a team"), ({"severity": "urgent"}, "severity 'urgent'"),
                            ({"date_from": "2026-01-01", "date_to": "2026-11-30"}, "a range of 1 to 92 days"),
                            ({"date_from": "2026-11-30", "date_to": "2026-11-01"}, "a range of 1 to 92 days")]:
        refused = client.get("/api/reviews", params=params)
        assert refused.status_code == 422 and message in refused.text, (params, refused.text)
    page = client.get("/reviews", params={"date_from": "2026-11-01", "date_to": "2026-11-30", "status": ""}).text
    assert "Reviews of 2026-11-01 to 2026-11-30" in page and f'data-date="{DAY}"' in page
    assert '<option selected>retail</option>' not in page and "<option>wealth</option>" in page
