"""Trends per agent and team, week by week: calls, findings per 100 calls (in all and by rule), average score,
non-talk share; read from the days' calls in short that the audit writes and an override rewrites; a chart and
a table on the page, JSON from the API, a Team Lead's own teams only; the day's report links them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from fastapi.testclient import TestClient
from test_audit import CALLS, DAY, RULES, _record_day
from test_pages_walk import granting
from test_scorecards import overrides

from asr_tasks.audit.reports import run_audit
from asr_tasks.audit.rules import load_rule_set
from asr_tasks.audit.scores import answer
from asr_tasks.audit.trends import monday, stored_day_calls, write_day_calls
from asr_tasks.config import Settings
from asr_tasks.intake.stores import LocalStore
from asr_tasks.records.access_log import AccessLog
from asr_tasks.records.ledger import open_ledger
from asr_tasks.version import DayReports
from asr_tasks.web.app import create_app

EARLIER = "2026-11-18"  # the week before DAY's


def test_weekly_trends_per_agent_and_team(settings: Settings, tmp_path: Path) -> None:
    index = _record_day(settings, CALLS)
    store = LocalStore(settings.storage.path("store_root"))
    result = run_audit(DAY, load_rule_set(RULES), index, store, settings)
    day = stored_day_calls(store, settings, DAY)
    assert day is not None and len(day["calls"]) == len(CALLS)
    assert sum(sum(c["findings"].values()) for c in day["calls"]) == len(result.findings)
    write_day_calls(store, settings, EARLIER, {"date": EARLIER, "calls": [
        {"recording_id": "a" * 24, "agent_id": "AG-1", "non_talk_share": 0.2, "score": 50.0,
         "findings": {"promise-of-return": 2}},
        {"recording_id": "b" * 24, "agent_id": "AG-7", "non_talk_share": 0.4, "score": 90.0, "findings": {}}]})
    store.put_bytes(settings.storage.artefacts_bucket, DayReports(EARLIER).audit("json"),
                    b'{"summary": {"date": "2026-11-18", "recordings": 2}, "findings": []}')
    teams = tmp_path / "teams.yaml"
    teams.write_text("teams:\n  retail: {leads: [lee], agents: [AG-1]}\n  wealth: {leads: [wendy], agents: [AG-7]}\n")
    conf = replace(settings, audit=replace(settings.audit, teams=str(teams)))
    grants = {"rita": {"read", "review"}, "lee": {"read_team"}}
    client = TestClient(create_app(conf, index=index, store=store, authorize=granting(grants, [])))
    span = {"date_from": "2026-11-16", "date_to": "2026-11-29"}

    def weeks(user: str, by: str) -> dict[tuple[str, str], dict[str, object]]:
        answer_ = client.get("/api/trends", params={**span, "by": by}, headers={"X-User": user})
        assert answer_.status_code == 200, answer_.text
        return {(w["group"], w["week"]): w for w in answer_.json()["weeks"]}

    by_team = weeks("rita", "team")
    assert set(by_team) == {("retail", "2026-11-16"), ("wealth", "2026-11-16"), ("retail", monday(DAY))}
    retail_now = by_team[("retail", monday(DAY))]
    assert retail_now["calls"] == len(CALLS)
    assert retail_now["findings_per_100"] == round(100 * len(result.findings) / len(CALLS), 1)
    assert by_team[("retail", "2026-11-16")]["findings_per_100_by_rule"] == {"promise-of-return": 200.0}
    assert (by_team[("wealth", "2026-11-16")]["average_score"], by_team[("wealth", "2026-11-16")]["non_talk_share"]) == (
        90.0, 0.4)
    scores = [s.score for s in result.scores if s.score is not None]
    assert retail_now["average_score"] == round(sum(scores) / len(scores), 1)
    assert set(weeks("rita", "agent")) == {("AG-1", "2026-11-16"), ("AG-7", "2026-11-16"), ("AG-1", monday(DAY))}
    assert set(weeks("lee", "agent")) == {("AG-1", "2026-11-16"), ("AG-1", monday(DAY))}  # his team's only

    # A reviewer's answer moves the week's average as it moves the call's score.
    promise = next(s for s in result.scores if s.key.endswith("/promise.wav"))
    now = answer(DAY, promise.recording_id, "empathy", "no", "curt", "rita", store, index, conf, overrides(conf))
    moved = weeks("rita", "team")[("retail", monday(DAY))]["average_score"]
    expected = [now.score if s.recording_id == promise.recording_id else s.score for s in result.scores]
    assert moved == round(sum(x for x in expected if x is not None) / len([x for x in expected if x is not None]), 1)

    page = client.get("/trends", params={**span, "by": "team", "group": "retail"}, headers={"X-User": "rita"})
    assert page.status_code == 200 and "Trends of 2026-11-16 to 2026-11-29, by team" in page.text
    assert page.text.count('<rect class="col"') == 2 and 'class="score"' in page.text
    assert "findings per 100 calls by rule" in page.text and "wealth" in page.text
    leads = client.get("/trends", params={**span, "by": "agent"}, headers={"X-User": "lee"}).text
    assert "AG-1" in leads and "AG-7" not in leads
    assert client.get("/api/trends", params={"by": "mood"}, headers={"X-User": "rita"}).status_code == 422
    wrong = client.get("/trends", params={"date_from": "2026-02-30"}, headers={"X-User": "rita"})
    assert wrong.status_code == 400 and "not a date of the calendar" in wrong.text and "<nav" in wrong.text
    assert "no calls of team nosuch" in client.get("/trends", params={**span, "group": "nosuch"},
                                                   headers={"X-User": "rita"}).text
    assert client.get("/api/trends", params={"date_from": "2020-01-01", "date_to": "2026-11-29"},
                      headers={"X-User": "rita"}).status_code == 422
    reads = [e.detail for e in AccessLog(open_ledger(settings.ledger)).entries(actions=("read",))]
    assert "trends of 2026-11-16 to 2026-11-29 by agent" in reads
    report = client.get(f"/reports/qa/{DAY}", headers={"X-User": "rita"}).text
    assert f'href="trends?date_to={DAY}"' in report and f'href="reviews?date={DAY}"' in report
