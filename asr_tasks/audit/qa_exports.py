"""The QA team's data for a bank's BI tools: findings, reviews and scorecard answers of a range of days, as CSV
or Parquet.

One row per finding (with its review's status and the agent's team), per review,
and per call and question of the scorecard (the call's score beside each
answer, the automatic answer and the reviewer's apart): long tables that a BI
tool pivots as it likes. CSV cells that a spreadsheet would run as a formula are
quoted (``spreadsheet_safe``); Parquet keeps each column's type.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from datetime import date, datetime, timezone
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from asr_tasks.audit.reviews import Review, status_of
from asr_tasks.audit.rules import Finding
from asr_tasks.audit.score_overrides import Scored
from asr_tasks.audit.scorecards import Scorecard
from asr_tasks.records.teams import Teams
from asr_tasks.text.spreadsheet import spreadsheet_safe

FORMATS = ("csv", "parquet")
TABLES: dict[str, dict[str, pa.DataType]] = {
    "findings": {"finding_id": pa.string(), "call_date": pa.date32(), "recording_id": pa.string(),
                 "key": pa.string(), "agent_id": pa.string(), "team": pa.string(), "rule_id": pa.string(),
                 "severity": pa.string(), "speaker": pa.string(), "start": pa.float64(), "end": pa.float64(),
                 "matched_text": pa.string(), "confidence": pa.float64(), "rule_set": pa.string(),
                 "status": pa.string()},
    "reviews": {"finding_id": pa.string(), "call_date": pa.date32(), "recording_id": pa.string(),
                "agent_id": pa.string(), "team": pa.string(), "rule_id": pa.string(), "status": pa.string(),
                "reason": pa.string(), "comment": pa.string(), "assignee": pa.string(), "reviewer": pa.string(),
                "reviewed_at": pa.timestamp("s", tz="UTC")},
    "scores": {"call_date": pa.date32(), "recording_id": pa.string(), "key": pa.string(), "agent_id": pa.string(),
               "team": pa.string(), "scorecard": pa.string(), "score": pa.float64(),
               "automatic_score": pa.float64(), "section": pa.string(), "question_id": pa.string(),
               "weight": pa.float64(), "answer": pa.string(), "automatic_answer": pa.string(), "why": pa.string(),
               "overridden_by": pa.string(), "override_why": pa.string(),
               "overridden_at": pa.timestamp("s", tz="UTC")},
}


def finding_rows(findings: Iterable[Finding], reviews: dict[str, Review], teams: Teams) -> list[dict[str, Any]]:
    return [{**{k: v for k, v in f.to_dict().items() if k in TABLES["findings"]}, "team": teams.team_of(f.agent_id),
             "status": status_of(f, reviews)} for f in findings]


def review_rows(findings: Iterable[Finding], reviews: dict[str, Review], teams: Teams) -> list[dict[str, Any]]:
    return [{**reviews[f.finding_id].to_dict(), "agent_id": f.agent_id, "team": teams.team_of(f.agent_id)}
            for f in findings if f.finding_id in reviews]


def score_rows(card: Scorecard | None, scored: Iterable[Scored], teams: Teams) -> list[dict[str, Any]]:
    if card is None:
        return []
    out = []
    for s in scored:
        call = {"call_date": s.call.call_date, "recording_id": s.call.recording_id, "key": s.call.key,
                "agent_id": s.call.agent_id, "team": teams.team_of(s.call.agent_id), "scorecard": card.id,
                "score": s.score, "automatic_score": s.call.score}
        for q in card.questions:
            override = s.overrides.get(q.id)
            out.append({**call, "section": q.section, "question_id": q.id, "weight": q.weight,
                        "answer": s.answers.get(q.id), "automatic_answer": s.call.answers.get(q.id),
                        "why": s.call.why.get(q.id, ""), "overridden_by": override.reviewer if override else None,
                        "override_why": override.why if override else None,
                        "overridden_at": override.overridden_at if override else None})
    return out


def _typed(kind: pa.DataType, value: Any) -> Any:
    """A value as its column holds it: a day as a date, a time as one in UTC (the ledger's times are UTC)."""
    if value in (None, ""):
        return None if kind != pa.string() else value
    if kind == pa.date32():
        return date.fromisoformat(str(value))
    if pa.types.is_timestamp(kind):
        at = datetime.fromisoformat(str(value))
        return at if at.tzinfo else at.replace(tzinfo=timezone.utc)
    return value


def encode(table: str, rows: list[dict[str, Any]], fmt: str) -> bytes:
    """The rows as a CSV (header first, formula-like cells quoted) or a Parquet file of the table's columns."""
    columns = TABLES[table]
    rows = [{name: _typed(kind, r.get(name)) for name, kind in columns.items()} for r in rows]
    if fmt == "parquet":
        data = pa.table({name: pa.array([r[name] for r in rows], type=kind) for name, kind in columns.items()})
        sink = io.BytesIO()
        pq.write_table(data, sink)
        return sink.getvalue()
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(columns), extrasaction="ignore")
    writer.writeheader()
    for r in rows:
        writer.writerow({name: spreadsheet_safe(v.isoformat() if isinstance(v, date) else v) for name, v in r.items()})
    return text.getvalue().encode()


def table_rows(table: str, findings: list[Finding], reviews: dict[str, Review], card: Scorecard | None,
               scored: list[Scored], teams: Teams) -> list[dict[str, Any]]:
    """The rows of one of ``TABLES`` from a range's findings, their reviews and its calls' scores."""
    if table == "findings":
        return finding_rows(findings, reviews, teams)
    if table == "reviews":
        return review_rows(findings, reviews, teams)
    return score_rows(card, scored, teams)
