"""The QA team's data for BI tools: findings (with their review's status and team), reviews and scorecard
answers of a range of days as CSV and Parquet, from the page's API (as the user may see them) and the CLI."""

from __future__ import annotations

import csv
import io

import pyarrow.parquet as pq
from fastapi.testclient import TestClient
from test_audit import CALLS, DAY, RULES, _record_day
from test_pages_walk import granting
from test_reviews import asr_on, reviews
from test_scorecards import overrides

from asr_tasks.audit.reports import run_audit
from asr_tasks.audit.rules import load_rule_set
from asr_tasks.audit.scores import answer
from asr_tasks.config import Settings
from asr_tasks.intake.stores import LocalStore
from asr_tasks.records.access_log import AccessLog
from asr_tasks.records.ledger import open_ledger
from asr_tasks.web.app import create_app

RANGE = {"date_from": "2026-11-01", "date_to": "2026-11-30"}


def test_findings_reviews_and_scores_export_as_csv_and_parquet(settings: Settings) -> None:
    index = _record_day(settings, CALLS)
    store = LocalStore(settings.storage.path("store_root"))
    result = run_audit(DAY, load_rule_set(RULES), index, store, settings)
    first = result.findings[0]
    reviews(settings).review(first, "qa1", "dismissed", "other", comment="=HYPERLINK(\"http://x\") said by the customer")
    answer(DAY, first.recording_id, "empathy", "yes", "kind", "qa1", store, index, settings, overrides(settings))
    client = TestClient(create_app(settings, index=index, store=store,
                                   authorize=granting({"eve": {"export"}, "carl": {"read"}}, [])),
                        headers={"X-User": "eve"})

    found = client.get("/api/qa/findings.csv", params=RANGE)
    assert found.status_code == 200 and found.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(found.text)))
    assert sorted(r["finding_id"] for r in rows) == sorted(f.finding_id for f in result.findings)
    assert {r["status"] for r in rows if r["finding_id"] == first.finding_id} == {"dismissed"}

    said = list(csv.DictReader(io.StringIO(client.get("/api/qa/reviews.csv", params=RANGE).text)))
    assert [(r["finding_id"], r["reason"]) for r in said] == [(first.finding_id, "other")]
    assert said[0]["comment"].startswith("'=HYPERLINK")  # a spreadsheet shows it, never runs it
    assert said[0]["reviewed_at"].endswith("+00:00") and said[0]["call_date"] == DAY
    typed = pq.read_table(io.BytesIO(client.get("/api/qa/reviews.parquet", params=RANGE).content))
    assert str(typed.schema.field("call_date").type) == "date32[day]"
    assert str(typed.schema.field("reviewed_at").type).endswith("tz=UTC]")  # a time, in UTC

    scores = client.get("/api/qa/scores.parquet", params=RANGE)
    assert scores.status_code == 200
    table = pq.read_table(io.BytesIO(scores.content)).to_pylist()
    assert len(table) == len(CALLS) * 13  # a row per call and question of the form
    empathy = next(r for r in table if r["recording_id"] == first.recording_id and r["question_id"] == "empathy")
    assert (empathy["answer"], empathy["automatic_answer"], empathy["overridden_by"]) == ("yes", None, "qa1")
    assert empathy["overridden_at"].tzinfo is not None
    assert isinstance(empathy["score"], float) and empathy["weight"] == 10.0
    assert client.get("/api/qa/scores.xlsx", params=RANGE).status_code == 404
    assert client.get("/api/qa/findings.csv", params={"date_from": "2025-01-01",
                                                      "date_to": "2026-11-30"}).status_code == 422
    assert client.get("/api/qa/findings.csv", params=RANGE, headers={"X-User": "carl"}).status_code == 403
    exports = AccessLog(open_ledger(settings.ledger)).entries(actions=("export",))
    assert [e.detail for e in exports][:1] == [f"QA findings of {RANGE['date_from']} to {RANGE['date_to']} as csv, "
                                               f"{len(result.findings)} rows"]

    run = asr_on(settings)
    done = run("qa-export", "findings", "--from", RANGE["date_from"], "--to", RANGE["date_to"],
               "--out", str(settings.storage.path("store_root") / "findings.parquet"))  # Parquet, by its name
    assert done.returncode == 0, done.stderr
    cli = pq.read_table(settings.storage.path("store_root") / "findings.parquet").to_pylist()
    assert sorted(r["finding_id"] for r in cli) == sorted(r["finding_id"] for r in rows)
    refused = run("qa-export", "scores", "--from", "2026-11-30", "--to", "2026-11-01")
    assert refused.returncode == 2 and "--from" in refused.stderr
    mismatch = run("qa-export", "scores", "--from", RANGE["date_from"], "--to", RANGE["date_to"], "--format", "csv",
                   "--out", "x.parquet")
    assert mismatch.returncode == 2 and "the file's name says parquet" in mismatch.stderr
