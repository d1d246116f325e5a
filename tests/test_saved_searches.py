"""Saved searches that watch: kept per owner in the ledger's database, checked as a search is, masked as the
access log masks what people type, and run by the nightly audit over each new day as findings of their own rule;
from the command line and the page alike."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from test_audit import CALLS, DAY, DISCLOSED, RULES, _record_day, call
from test_dag import BIN, airflow_env

from asr_tasks.audit.reports import rescore, run_audit
from asr_tasks.audit.rules import load_rule_set
from asr_tasks.audit.saved_searches import SavedSearchError, SavedSearches
from asr_tasks.config import PROJECT_ROOT, Settings
from asr_tasks.index.query import Filters
from asr_tasks.intake.stores import LocalStore
from asr_tasks.records.ledger import open_ledger
from asr_tasks.text.masking import configured_policy
from asr_tasks.web.app import create_app

SPEAKERS = ("agent", "customer")
MISHEARD = call("misheard", [DISCLOSED, ("agent", 5.0, 9.0, "这款产品保正收益，您放心。"),
                             ("customer", 10.0, 12.0, "好的。")], agent="AG-7")


def searches(settings: Settings) -> SavedSearches:
    return SavedSearches(open_ledger(settings.ledger), configured_policy(settings))


def test_saved_searches_are_kept_per_owner_and_checked(settings: Settings) -> None:
    saved = searches(settings)
    first = saved.add("alice", "returns", "保证收益", Filters(sounds_like=True, agent="AG-7"), SPEAKERS, "high")
    saved.add("bob", "returns", '"guaranteed return"', Filters(speaker="agent"), SPEAKERS)
    assert first.rule_id == "watch:alice/returns" and first.filters == Filters(agent="AG-7", sounds_like=True)
    assert [(s.owner, s.name) for s in saved.listed()] == [("alice", "returns"), ("bob", "returns")]
    assert [s.query for s in saved.listed("bob")] == ['"guaranteed return"']
    refusals = {
        "has a saved search named": lambda: saved.add("alice", "returns", "x", Filters(), SPEAKERS),
        "has a saved search named 'Returns'": lambda: saved.add("alice", "Returns", "x", Filters(), SPEAKERS),
        "has a saved search named 'my returns'": lambda: (saved.add("alice", "my returns", "x", Filters(), SPEAKERS),
                                                        saved.add("alice", " my  returns", "x", Filters(), SPEAKERS)),
        "name '': letters": lambda: saved.add("alice", " ", "x", Filters(), SPEAKERS),
        "takes no dates": lambda: saved.add("alice", "a", "x", Filters(date_from="2026-11-01"), SPEAKERS),
        "speaker 'boss'": lambda: saved.add("alice", "a", "x", Filters(speaker="boss"), SPEAKERS),
        "needs words": lambda: saved.add("alice", "a", "  ", Filters(agent="AG-1"), SPEAKERS),
        "only excludes": lambda: saved.add("alice", "a", "-risk", Filters(), SPEAKERS),
        "severity 'urgent'": lambda: saved.add("alice", "a", "x", Filters(), SPEAKERS, "urgent"),
        "bob has no saved search named 'gone'": lambda: saved.remove("bob", "gone"),
    }
    for message, attempt in refusals.items():
        with pytest.raises(SavedSearchError, match=message):
            attempt()
    assert saved.remove("alice", "returns").name == "returns"
    assert saved.remove("alice", "my   returns").name == "my returns"
    assert [s.owner for s in saved.listed()] == ["bob"]


@pytest.mark.parametrize(("name", "query", "filters", "refused"), [
    ("card", "card 4111 1111 1111 1111", Filters(), "the query holds personal data"),
    ("mark phone", "Mark 415 555 2671", Filters(), "the query holds personal data"),
    ("rule", "x", Filters(rule="call 415 555 2671"), "the rule holds personal data"),
    ("agent", "x", Filters(agent="4111 1111 1111 1111"), "the agent holds personal data"),
    ("card4111111111111111", "x", Filters(), "at most 4 digits"),
    ("acct GB82WEST12345698765432", "x", Filters(), "at most 4 digits"),
    ("card 4111_1111_1111_1111", "x", Filters(), "at most 4 digits"),
    ("_under", "x", Filters(), "starting with a letter or digit"),
    ("four one five five five five two six seven one", "x", Filters(), r"the name holds personal data \(10 digits\)"),
    ("四一五五五五二六七一", "x", Filters(), r"the name holds personal data \(10 digits\)"),
    ("jane dot doe at example dot com", "x", Filters(), r"the name holds personal data \(email\)"),
    ("call 415 555 2671", "x", Filters(), r"the name holds personal data \(phone\)"),
    ("+44 7700 900123", "x", Filters(), r"the name holds personal data \(phone\); it is kept in clear"),
])
def test_a_saved_search_never_keeps_personal_data(settings: Settings, name: str, query: str, filters: Filters,
                                                  refused: str) -> None:
    """What the index holds masked a search cannot find, and a name is the rule's in every report: refused, digits
    said as words counted as digits, and the refusal never repeating the name."""
    with pytest.raises(SavedSearchError, match=refused) as refusal:
        searches(settings).add("alice", name, query, filters, SPEAKERS)
    assert not (refused.startswith("the name") and name in str(refusal.value))
    with open_ledger(settings.ledger).engine.connect() as db:
        assert not list(db.exec_driver_sql("SELECT * FROM saved_search"))


def test_the_nightly_audit_reports_a_saved_searchs_hits_as_findings(settings: Settings) -> None:
    index = _record_day(settings, [*CALLS, MISHEARD])
    store = LocalStore(settings.storage.path("store_root"))
    saved = searches(settings)
    saved.add("alice", "returns", "保证收益", Filters(sounds_like=True), SPEAKERS, "high")
    saved.add("bob", "mine", "保证收益", Filters(agent="AG-7"), SPEAKERS)  # exact: the model's 保正 is not it
    # filtered by a rule's findings of the same day, which its first audit writes before the searches run
    saved.add("carol", "promised", "收益", Filters(rule="promise-of-return"), SPEAKERS)
    rules = load_rule_set(RULES)

    result = run_audit(DAY, rules, index, store, settings)
    assert {f.key.rsplit("/", 1)[-1] for f in result.findings if f.rule_id == "watch:carol/promised"} == {
        "promise.wav", "misheard.wav"}  # the calls the rule found (the misheard by sound), not the clean call's 收益
    watched = sorted((f.key.rsplit("/", 1)[-1], f.speaker, f.rule_id, f.severity) for f in result.findings
                     if f.rule_id.startswith("watch:") and f.rule_id != "watch:carol/promised")
    # 保证收益 asked by the promise call's customer and promised by its agent (in traditional script: the same
    # sounds), 保正收益 as the model wrote it in the misheard one; bob's exact search of AG-7's calls finds nothing
    assert watched == [("misheard.wav", "agent", "watch:alice/returns", "high"),
                       ("promise.wav", "agent", "watch:alice/returns", "high"),
                       ("promise.wav", "customer", "watch:alice/returns", "high")]
    misheard = next(f for f in result.findings if f.rule_id == "watch:alice/returns" and "misheard" in f.key)
    assert misheard.matched_text == "保正收益" and misheard.confidence == 1.0 and misheard.start == 5.0  # same sound
    assert "saved search returns of alice" in misheard.description
    assert {f["rule_id"] for f in index.findings(DAY)} >= {"watch:alice/returns"}
    html = store.get_bytes(settings.storage.artefacts_bucket, f"reports/qa/{DAY}/qa-audit.html").decode()
    assert "watch:alice/returns" in html

    assert len(run_audit(DAY, rules, index, store, settings).findings) == len(result.findings)  # replaced, not added
    saved.remove("alice", "returns")
    changed = rescore(DAY, rules, index, store, settings)
    assert changed is not None and {f.rule_id for f in changed.removed} == {"watch:alice/returns"}
    assert not changed.added


def test_the_nightly_dag_hands_airflow_a_saved_search_s_counts_by_id_never_its_name_or_words(
        settings: Settings, tmp_path: Path) -> None:
    """XCom, which every viewer of the DAG reads, holds counts: a saved search named after a customer (which no
    policy tells from any other words) is counted by its id, as a real ``airflow dags test`` run stores it."""
    env = airflow_env(tmp_path)  # the same ledger, index and store as ``settings``
    assert env["ASR_LEDGER_URL"] == settings.ledger.ledger_url
    _record_day(settings, [*CALLS, MISHEARD])
    watch = searches(settings).add("alice", "Jane Doe of Elm Street", "保证收益", Filters(sounds_like=True), SPEAKERS)
    for step in (["db", "migrate"], ["dags", "test", "qa_audit_nightly", DAY]):
        proc = subprocess.run([str(BIN / "airflow"), *step], env=env, capture_output=True, text=True, timeout=600,
                              cwd=PROJECT_ROOT)
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-5000:]
    with sqlite3.connect(tmp_path / "airflow" / "airflow.db") as conn:
        stored = [value for (value,) in conn.execute("SELECT value FROM xcom WHERE dag_id = 'qa_audit_nightly'")]
    xcom = " ".join(str(v) for v in stored)
    for said in ("Jane", "Elm", "alice", "保证收益", "\\u4fdd"):  # in clear, or as JSON escapes it
        assert said not in xcom, said
    (day,) = [t for value in stored for t in (value if isinstance(value, list) else json.loads(value))]
    assert day["by_rule"][f"watch:#{watch.id}"] == 3  # what the other test finds: said twice, misheard once
    report = LocalStore(settings.storage.path("store_root")).get_bytes(settings.storage.artefacts_bucket,
                                                                       f"reports/qa/{DAY}/qa-audit.json")
    assert watch.rule_id in report.decode()  # the report, behind the QA team's permissions, names it


def test_watch_from_the_command_line(settings: Settings) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASR_")}
    env.update(ASR_LEDGER_URL=settings.ledger.ledger_url, ASR_INDEX_PATH=str(settings.index.path("index_path")))
    asr = str(Path(sys.executable).parent / "asr")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([asr, "watch", *args], env=env, capture_output=True, text=True, timeout=120,
                              cwd=PROJECT_ROOT)

    added = run("add", "late fees", "~training | 收益", "--sounds-like", "--speaker", "agent", "--tag", "complaint",
                "--min-agent-interruptions", "2", "--rule", "promise-of-return")
    assert added.returncode == 0, added.stderr
    assert "findings of watch:" in added.stdout
    listed = json.loads(run("list", "--json").stdout)
    assert [(s["name"], s["query"], s["sounds_like"], s["filters"]) for s in listed] == [
        ("late fees", "~training | 收益", True, {"speaker": "agent", "tags": ["complaint"], "sounds_like": True,
                                                "min_agent_interruptions": 2, "rule": "promise-of-return"})]
    again = run("add", "late fees", "x")
    assert again.returncode == 2 and "already" in again.stderr
    bad = run("add", "x", "y", "--speaker", "boss")
    assert bad.returncode == 2 and "speaker 'boss'" in bad.stderr
    phone = run("add", "mark five five five two six seven one", "y")
    assert phone.returncode == 2 and "the name holds personal data (7 digits)" in phone.stderr
    assert "five" not in phone.stderr
    assert run("remove", " late fees ").returncode == 0  # as typed, spaces and all
    assert run("list").stdout.strip() == "no saved searches"


def test_watch_from_the_page(settings: Settings) -> None:
    client = TestClient(create_app(settings, allowed_hosts=["testserver"]))
    made = client.post("/api/watches", json={"name": "returns", "q": "保证收益", "sounds_like": True, "tag": ["x"]})
    assert made.status_code == 201, made.text
    assert made.json()["rule_id"].startswith("watch:") and made.json()["filters"]["tags"] == ["x"]
    assert client.post("/api/watches", json={"name": "returns", "q": "x"}).status_code == 400
    phone = client.post("/api/watches", json={"name": "mark five five five two six seven one", "q": "x"})
    assert phone.status_code == 400 and phone.json()["detail"].startswith("the name holds personal data (7 digits)")
    assert client.post("/api/watches", json={"name": "n", "q": "x", "date_from": "2026-01-01"}).status_code == 422
    # every filter of a search but its days is kept, as the search page's "watch this search" link hands them on
    made = client.post("/api/watches", json={"name": "quiet", "q": "x", "rule": "promise-of-return",
                                             "min_non_talk_share": 0.3, "min_agent_interruptions": 2})
    assert made.status_code == 201, made.text
    assert made.json()["filters"] == {"rule": "promise-of-return", "min_non_talk_share": 0.3,
                                      "min_agent_interruptions": 2}
    page = client.post("/watches", data={"q": "risk free", "sounds_like": "true", "rule": "promise-of-return",
                                         "non_talk_percent": "30", "agent_interruptions": "2"})
    assert page.status_code == 200 and "保证收益" in page.text and 'value="risk free"' in page.text
    assert 'name="rule" value="promise-of-return"' in page.text and 'value="30"' in page.text
    assert "min_non_talk_share 0.3" in page.text
    search = client.post("/", data={"q": "x", "rule": "promise-of-return", "non_talk_percent": "30",
                                    "date_from": "2026-11-01"}).text
    assert '<button type="submit" form="asked" formaction="watches" class="link watch">' in search  # posts the search
    client.request("DELETE", "/api/watches", json={"name": "quiet"})
    assert [w["name"] for w in client.get("/api/watches").json()] == ["returns"]
    assert client.request("DELETE", "/api/watches", json={"name": "returns"}).status_code == 200
    assert client.request("DELETE", "/api/watches", json={"name": "returns"}).status_code == 404
    assert client.get("/api/watches").json() == []
