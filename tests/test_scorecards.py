"""Scorecards: a form of weighted questions answered from the day's audit or by a reviewer, each call's score in
the stored audit and on the call in the index, a reviewer's override kept apart (who, why), kept by a re-audit,
logged; from the command line and on the call page."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from test_audit import CALLS, DAY, RULES, _record_day, call
from test_pages_walk import granting
from test_reviews import asr_on

from asr_tasks.audit.reports import run_audit, stored_audit
from asr_tasks.audit.rules import load_rule_set
from asr_tasks.audit.score_overrides import OverrideError, ScoreOverrides
from asr_tasks.audit.scorecards import ScorecardError, load_scorecard, score_of
from asr_tasks.audit.scores import answer, day_scores
from asr_tasks.audit.trends import stored_day_calls
from asr_tasks.config import PROJECT_ROOT, Settings
from asr_tasks.index.query import Filters
from asr_tasks.intake.stores import LocalStore
from asr_tasks.records.access_log import AccessLog
from asr_tasks.records.ledger import open_ledger
from asr_tasks.text.masking import configured_policy
from asr_tasks.web.app import create_app

CARD = PROJECT_ROOT / "include" / "scorecards" / "default.yaml"
THANKED = ("agent", 19.0, 21.0, "感谢您的来电，再见。")
COMPLAINT = call("complaint", [("agent", 1.0, 4.0, "您好，本次通话将被录音。"), ("customer", 5.0, 8.0, "我要投诉你们多收费。"),
                               ("agent", 9.0, 12.0, "这是规定。"), ("customer", 13.0, 15.0, "好吧。")])
THANKFUL = call("thankful", [("agent", 1.0, 4.0, "您好，本次通话将被录音。"), ("customer", 5.0, 8.0, "我想查一下余额。"),
                             ("agent", 9.0, 12.0, "好的，请稍等。"), THANKED])


def overrides(settings: Settings) -> ScoreOverrides:
    ledger = open_ledger(settings.ledger)
    return ScoreOverrides(ledger, AccessLog(ledger), configured_policy(settings))


def by_call(settings: Settings) -> dict[str, dict[str, object]]:
    _, scored = day_scores(DAY, LocalStore(settings.storage.path("store_root")), settings, overrides(settings))
    return {s.call.key.rsplit("/", 1)[-1][:-4]: s.to_dict() for s in scored}


def test_the_form_is_refused_with_the_line_and_reason(tmp_path: Path) -> None:
    rules = load_rule_set(RULES)
    good = CARD.read_text(encoding="utf-8")
    cases = {
        "names 'no-such-rule', which is not a rule": good.replace("no_if_found: long-hold", "no_if_found: no-such-rule"),
        "which no tag rule of the rule set gives": good.replace("applies_if_tagged: complaint",
                                                                "applies_if_tagged: angry"),
        "weight must be a number above 0": good.replace("weight: 25", "weight: -1"),
        "either from findings (no_if_found) or from a condition": good.replace(
            "          no_if_found: long-hold", "          no_if_found: long-hold\n          yes_when: {said: [hi]}"),
        "question id 'thanked' is used twice": good.replace("id: empathy", "id: thanked"),
        "unknown field(s) wieght": good.replace("weight: 10\n          applies_if_tagged: vulnerable",
                                                "wieght: 10\n          applies_if_tagged: vulnerable"),
        "metric 'loudness': not one of": good.replace("said: [thank you, thanks, thank you for calling, 谢谢, 感谢, 多谢]",
                                            "metric: loudness\n            above: 3"),
        "'scorecard' is written twice": good + "scorecard: {}\n",
    }
    for message, text in cases.items():
        path = tmp_path / "card.yaml"
        path.write_text(text, encoding="utf-8")
        with pytest.raises(ScorecardError, match=message.replace("(", r"\(").replace(")", r"\)")) as refused:
            load_scorecard(path, rules)
        assert str(path) in str(refused.value), message
    card = load_scorecard(CARD, rules)
    assert [title for title, _ in card.sections()] == ["Compliance", "Customer care"]
    assert {q.id for q in card.questions if not q.automatic} == {"empathy", "vulnerable-customer-supported"}
    assert score_of(card, {}) is None and score_of(card, {"no-pressure": "yes", "no-long-hold": "no"}) == 66.7


def test_each_call_is_scored_by_the_audit_and_a_reviewer_overrides_apart(settings: Settings) -> None:
    index = _record_day(settings, [*CALLS, COMPLAINT, THANKFUL])
    store = LocalStore(settings.storage.path("store_root"))
    result = run_audit(DAY, load_rule_set(RULES), index, store, settings)
    assert {s.call_date for s in result.scores} == {DAY} and len(result.scores) == len(CALLS) + 2
    calls = by_call(settings)
    promise, pii, complaint, thankful = (calls[name] for name in ("promise", "pii", "complaint", "thankful"))
    assert promise["answers"]["no-promise-of-return"] == "no"  # type: ignore[index]
    assert promise["why"]["no-promise-of-return"] == "finding of promise-of-return"  # type: ignore[index]
    assert (pii["answers"]["no-card-read-out"], pii["answers"]["no-long-hold"]) == ("no", "no")  # type: ignore[index]
    assert complaint["answers"]["complaint-acknowledged"] == "no"  # type: ignore[index]  # tagged, not answered
    assert thankful["answers"]["complaint-acknowledged"] == "na"  # type: ignore[index]  # no complaint
    assert (thankful["answers"]["thanked"], promise["answers"]["thanked"]) == ("yes", "no")  # type: ignore[index]
    assert thankful["answers"]["empathy"] is None and thankful["score"] == 100.0  # type: ignore[index]
    # yes over yes-or-no by weight: the promise call lost 25 (the promise) and 5 (no thanks) of 120 answered
    assert promise["score"] == pytest.approx(round(100 * 90 / 120, 1))
    assert index.recording(str(promise["recording_id"]))["score"] == promise["score"]  # type: ignore[index]

    kept = overrides(settings)
    card = load_scorecard(CARD)
    now = answer(DAY, str(promise["recording_id"]), "empathy", "yes", "calm; read 4111 1111 1111 1111 back",
                 "qa1", store, index, settings, kept)
    assert now.answers["empathy"] == "yes" and now.call.answers["empathy"] is None  # the audit's kept apart
    assert now.score == pytest.approx(round(100 * 100 / 130, 1)) and now.call.score == promise["score"]
    assert "4111" not in now.overrides["empathy"].why and now.overrides["empathy"].reviewer == "qa1"
    assert index.recording(str(promise["recording_id"]))["score"] == now.score  # type: ignore[index]
    assert {h.key for h in index.search_page("", Filters(min_score=now.score, max_score=now.score)).hits} == {
        promise["key"]}
    refusals = {
        "no question 'tone'": ("tone", "yes", "x"),
        "answer 'maybe'": ("empathy", "maybe", "x"),
        "says why": ("empathy", "no", " "),
        "control character": ("empathy", "no", "a\x1bb"),
    }
    for message, (question, given, why) in refusals.items():
        with pytest.raises(OverrideError, match=message):
            answer(DAY, str(promise["recording_id"]), question, given, why, "qa1", store, index, settings, kept)
    with pytest.raises(OverrideError, match="has no score"):
        answer(DAY, "0" * 24, "empathy", "yes", "x", "qa1", store, index, settings, kept)

    # A re-audit writes the automatic answers again; the reviewer's stands, apart, and so does the score.
    run_audit(DAY, load_rule_set(RULES), index, store, settings)
    again = by_call(settings)["promise"]
    assert again["score"] == now.score and again["automatic"]["empathy"] is None  # type: ignore[index]
    assert index.recording(str(promise["recording_id"]))["score"] == now.score  # type: ignore[index]
    back = answer(DAY, str(promise["recording_id"]), "empathy", None, "", "qa1", store, index, settings, kept)
    assert back.score == promise["score"] and not back.overrides and card.id == back.call.scorecard
    log = AccessLog(open_ledger(settings.ledger)).entries(actions=("score",))
    assert [(e.user, e.recording_id) for e in log] == [("qa1", promise["recording_id"])] * 2
    assert "4111" not in json.dumps([e.to_dict() for e in log])
    stored = stored_audit(DAY, store, settings)
    assert stored is not None and {s.recording_id for s in stored.scores} == {str(c["recording_id"])
                                                                               for c in calls.values()}


def test_scores_from_the_command_line_and_on_the_call_page(settings: Settings) -> None:
    index = _record_day(settings, [*CALLS, THANKFUL])
    store = LocalStore(settings.storage.path("store_root"))
    run_audit(DAY, load_rule_set(RULES), index, store, settings)
    run = asr_on(settings)

    listed = json.loads(run("scores", "--date", DAY, "--json").stdout)
    assert listed["scorecard"]["id"] == "bank-call" and len(listed["calls"]) == len(CALLS) + 1
    promise = next(c for c in listed["calls"] if c["key"].endswith("/promise.wav"))
    table = run("scores", "--date", DAY).stdout.splitlines()
    assert table[0].split()[:3] == ["RECORDING", "AGENT", "SCORE"] and len(table) == len(CALLS) + 2
    done = run("scores", "--date", DAY, "--call", promise["recording_id"], "--question", "no-promise-of-return",
               "--answer", "yes", "--why", "the customer's words, not the agent's")
    assert done.returncode == 0 and "no-promise-of-return yes" in done.stdout, done.stderr
    for args, message in [(("--call", promise["recording_id"]), "--call ID --question Q --answer"),
                          (("--call", promise["recording_id"], "--question", "empathy", "--answer", "no"), "says why"),
                          (("--call", "f" * 24, "--question", "empathy", "--answer", "no", "--why", "x"),
                           "has no score")]:
        refused = run("scores", "--date", DAY, *args)
        assert refused.returncode == 2 and message in refused.stderr, (args, refused.stderr)
    assert [e.detail for e in AccessLog(open_ledger(settings.ledger)).entries(actions=("read",))] == [
        f"the scores of {DAY}"] * 2

    grants = {"rita": {"read", "review"}, "carl": {"read"}}
    client = TestClient(create_app(settings, index=index, store=store, authorize=granting(grants, [])))
    page = client.get(f"/call/{promise['recording_id']}", headers={"X-User": "rita"}).text
    assert "Scorecard: Bank call quality" in page and "answered by root: the customer&#39;s words" in page
    assert 'data-question="empathy"' in page
    carls = client.get(f"/call/{promise['recording_id']}", headers={"X-User": "carl"}).text
    assert "Scorecard: Bank call quality" in carls and 'class="override"' not in carls  # no form he cannot use
    said = {"question": "empathy", "answer": "no", "why": "curt"}
    assert client.post(f"/api/scores/{promise['recording_id']}", json=said,
                       headers={"X-User": "carl"}).status_code == 403
    done_web = client.post(f"/api/scores/{promise['recording_id']}", json=said, headers={"X-User": "rita"})
    assert done_web.status_code == 200 and done_web.json()["answers"]["empathy"] == "no", done_web.text
    assert client.post(f"/api/scores/{promise['recording_id']}", json={**said, "answer": "maybe"},
                       headers={"X-User": "rita"}).status_code == 400
    assert client.post(f"/api/scores/{'0' * 24}", json=said, headers={"X-User": "rita"}).status_code == 404
    shown = client.get("/api/scores", params={"date": DAY}, headers={"X-User": "rita"}).json()
    mine = next(c for c in shown["calls"] if c["recording_id"] == promise["recording_id"])
    assert mine["overrides"]["empathy"]["reviewer"] == "rita" and mine["score"] == done_web.json()["score"]
    search = client.post("/", data={"q": "", "max_score": f"{mine['score']:g}", "min_score": "0"},
                         headers={"X-User": "carl"}).text
    assert "calls per score" in search.lower() and "promise.wav" in search


def test_a_dismissed_finding_counts_against_no_call_and_a_silent_call_is_not_scored(settings: Settings) -> None:
    """A reviewer's dismissal of the finding that answered a question no answers it yes, in the score, the index
    and the trends at once; reopened, the audit's no is back. A call where nothing was said has no score."""
    index = _record_day(settings, [*CALLS, call("silent", [])])
    store = LocalStore(settings.storage.path("store_root"))
    result = run_audit(DAY, load_rule_set(RULES), index, store, settings)
    promise = next(f for f in result.findings if f.rule_id == "promise-of-return")
    before = by_call(settings)
    assert before["silent"]["score"] is None and set(before["silent"]["answers"].values()) == {None}  # type: ignore[union-attr]
    client = TestClient(create_app(settings, index=index, store=store,
                                   authorize=granting({"rita": {"read", "review"}}, [])), headers={"X-User": "rita"})

    def verdict(status: str, reason: str | None = None) -> dict[str, object]:
        done = client.post(f"/api/reviews/{promise.finding_id}", json={"date": DAY, "status": status,
                                                                       "reason": reason})
        assert done.status_code == 200, done.text
        now = by_call(settings)["promise"]
        short = stored_day_calls(store, settings, DAY)
        assert short is not None
        mine = next(c for c in short["calls"] if c["recording_id"] == promise.recording_id)
        assert mine["score"] == now["score"] == index.recording(promise.recording_id)["score"]  # type: ignore[index]
        return {**now, "trend_findings": mine["findings"]}

    dismissed = verdict("dismissed", "not-said")
    assert dismissed["answers"]["no-promise-of-return"] == "yes"  # type: ignore[index]
    assert dismissed["automatic"]["no-promise-of-return"] == "no"  # type: ignore[index]  # the audit's, apart
    assert dismissed["dismissed_findings"] == ["no-promise-of-return"]
    assert dismissed["score"] > before["promise"]["score"]  # type: ignore[operator]
    assert "promise-of-return" not in dismissed["trend_findings"]  # type: ignore[operator]
    reopened = verdict("open")
    assert reopened["score"] == before["promise"]["score"] and reopened["trend_findings"] == {"promise-of-return": 1}


def test_a_rule_set_without_the_forms_rules_audits_the_day_and_scores_no_call(
        settings: Settings, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Audited with a rule set the form does not fit (a rule it answers from is gone), the day's findings are
    written and its calls go unscored, the log naming the form's line and the missing rule."""
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "one.yaml").write_text((RULES / "default.yaml").read_text(encoding="utf-8").replace(
        "id: promise-of-return", "id: promise-of-gain"), encoding="utf-8")
    index = _record_day(settings, CALLS)
    store = LocalStore(settings.storage.path("store_root"))
    with caplog.at_level("WARNING", logger="asr_tasks.audit.reports"):
        result = run_audit(DAY, load_rule_set(rules), index, store, settings)
    assert any(f.rule_id == "promise-of-gain" for f in result.findings) and result.scores == []
    assert "default.yaml:19" in caplog.text and "'promise-of-return'" in caplog.text
    assert {index.recording(t.recording.recording_id)["score"] for t in CALLS} == {None}  # type: ignore[index]
