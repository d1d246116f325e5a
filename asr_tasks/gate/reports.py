"""A day's quality report: each recording's gate outcome and the figures behind it, as CSV, HTML and JSON rows."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from asr_tasks.config import QualitySettings
from asr_tasks.gate.checks import SUITES, read_suite, recording_row
from asr_tasks.intake.artefacts import Artefacts
from asr_tasks.intake.stores import get_json, put_json
from asr_tasks.models import Transcript
from asr_tasks.states import GateOutcome
from asr_tasks.templates import render
from asr_tasks.text.spreadsheet import spreadsheet_safe
from asr_tasks.version import DayReports

if TYPE_CHECKING:
    import pandas as pd


def report_row(t: Transcript) -> dict[str, Any]:
    """One line of the day's quality report: the gate's outcome and the figures behind it."""
    return {
        "call_date": t.recording.call_date, **recording_row(t), "quality": t.quality,
        "quality_failures": " ".join(t.quality_failures), "state": t.state, "reason": t.reason or "",
    }


REPORT_COLUMNS = ["key", "quality", "quality_failures", "state", "reason", "duration", "speech_seconds", "segments",
                  "units", "unit", "units_per_speech_second", "transcribed_share", "repeat_share", "language",
                  "recording_id"]


def render_html(day: str, table: pd.DataFrame, settings: QualitySettings) -> str:
    """A self-contained page: counts, each recording's outcome, and what every expectation checks."""
    folder = settings.path("expectations_dir")
    checks = [
        [suite, e["meta"]["name"], e["type"], json.dumps(e.get("kwargs", {}), ensure_ascii=False),
         e["meta"].get("description", "")]
        for suite in SUITES for e in read_suite(folder / suite)["expectations"]
    ]
    counts = table["quality"].value_counts().to_dict()
    return render(
        "quality_report.html", day=str(day), total=len(table), flagged=int((table["quality"] != GateOutcome.PASS).sum()),
        summary=", ".join(f"{k}: {v}" for k, v in sorted(counts.items())) or "no recordings",
        columns=list(table.columns), rows=table.values.tolist(), classes=[str(q) for q in table["quality"]],
        checks=checks,
    )


def write_reports(rows: list[dict[str, Any]], artefacts: Artefacts, settings: QualitySettings) -> list[str]:
    """Save each call date's quality report of the artefacts' model (CSV and HTML, and the rows as JSON).

    A day's earlier rows are kept, each recording's newest row wins: a late upload
    taken by the next night's run joins its day's report instead of replacing it.
    Returns the keys written.
    """
    keys: list[str] = []
    by_day: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_day.setdefault(row["call_date"] or "undated", []).append(row)
    for day, day_rows in sorted(by_day.items()):
        json_key = DayReports(day).quality(artefacts.model, "json")
        earlier = get_json(artefacts.store, artefacts.bucket, json_key) if artefacts.exists(json_key) else []
        merged = {r["recording_id"]: r for r in earlier}
        merged.update({r["recording_id"]: r for r in day_rows})
        keys += _write_day(list(merged.values()), DayReports(day), artefacts.model, artefacts, settings)
    return keys


def drop_from_reports(recording_ids: set[str], day: str, artefacts: Artefacts, settings: QualitySettings) -> list[str]:
    """Rewrite the day's quality reports (of every model) without these recordings; returns the keys rewritten."""
    keys: list[str] = []
    reports = DayReports(day)
    for item in list(artefacts.store.list_keys(artefacts.bucket, reports.quality_prefix)):
        if not item.key.endswith(".json"):
            continue
        rows = get_json(artefacts.store, artefacts.bucket, item.key)
        kept = [r for r in rows if r["recording_id"] not in recording_ids]
        if len(kept) != len(rows):
            model = item.key.removeprefix(reports.quality_prefix).removesuffix(".json")
            keys += _write_day(kept, reports, model, artefacts, settings)
    return keys


def _write_day(rows: list[dict[str, Any]], reports: DayReports, model: str, artefacts: Artefacts,
               settings: QualitySettings) -> list[str]:
    import pandas as pd

    store, bucket = artefacts.store, artefacts.bucket
    csv_key, html_key = reports.quality(model, "csv"), reports.quality(model, "html")
    put_json(store, bucket, reports.quality(model, "json"), rows)
    table = pd.DataFrame(rows, columns=REPORT_COLUMNS).sort_values("key", kind="stable")
    cells = table.apply(lambda column: column.map(spreadsheet_safe) if column.dtype == object else column)
    store.put_bytes(bucket, csv_key, cells.to_csv(index=False).encode("utf-8"))
    store.put_bytes(bucket, html_key, render_html(reports.day, table, settings).encode("utf-8"))
    return [csv_key, html_key]
