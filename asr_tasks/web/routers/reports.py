"""The nightly QA report served from the app: the days whose audit is stored, and one day's report rendered
from what the audit stored (``reports/qa/<day>/qa-audit.json``), its links relative to the page's
``<base href>`` so that they lead to this app wherever it is mounted. Each read goes to the access log
(``door.py``): a report names calls, agents and who opened what."""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Request
from fastapi import Path as PathParam
from fastapi.responses import HTMLResponse

from asr_tasks.audit.redaction import RedactionReport
from asr_tasks.audit.reports import day_links, finding_link, missing_links
from asr_tasks.audit.rules import AuditResult, Finding
from asr_tasks.audit.trends import stored_day_calls
from asr_tasks.version import DayReports
from asr_tasks.web.call_page import audit_rules, finding_words
from asr_tasks.web.door import CallDoor, Door
from asr_tasks.web.pages import held, render_page
from asr_tasks.web.routers.progress import DAY_PATTERN, calendar_day

PERMISSION = "read"
PREFIX = "reports/qa/"
MAX_DAYS = 3660  # days listed at most, newest first

router = APIRouter()


def stored_days(door: Door) -> list[str]:
    """The days with a stored audit, newest first."""
    suffix = "/" + DayReports("").audit("json").rsplit("/", 1)[-1]
    keys = door.store().list_keys(door.settings.storage.artefacts_bucket, PREFIX)
    days = {item.key[len(PREFIX):-len(suffix)] for item in keys if item.key.endswith(suffix)}
    return sorted(days, reverse=True)[:MAX_DAYS]


def stored_report(door: Door, day: str) -> dict[str, Any] | None:
    """What the day's audit stored (summary, findings, tags, scores, who opened what) as the user may see it (a
    Team Lead: their teams' calls, counted anew); None when it has not run."""
    store, bucket, key = door.store(), door.settings.storage.artefacts_bucket, DayReports(day).audit("json")
    if not store.exists(bucket, key):
        return None
    report: dict[str, Any] = json.loads(store.get_bytes(bucket, key))
    return report if door.scope is None else within_scope(report, door, day)


def within_scope(report: dict[str, Any], door: Door, day: str) -> dict[str, Any]:
    """The report of the calls in the user's scope only: their findings and tags and the counts made from those;
    not the day's masking (its figures count every team's calls) nor anybody's openings."""
    short = stored_day_calls(door.store(), door.settings, day) or {"calls": []}
    findings = [Finding.from_dict(f) for f in report["findings"] if door.sees(f.get("agent_id"))]
    calls = {c["recording_id"] for c in short["calls"] if door.sees(c.get("agent_id"))} | {
        f.recording_id for f in findings}
    tags = {rid: t for rid, t in (report.get("tags") or {}).items() if rid in calls}
    summary = report["summary"]
    result = AuditResult(str(summary["date"]), len(calls), findings, tags, str(summary.get("rule_set") or ""))
    return {**report, "summary": result.summary(), "findings": [f.to_dict() for f in findings], "tags": tags,
            "redaction": None, "redaction_withheld": True, "opened": []}


@router.get("/reports/qa", response_class=HTMLResponse)
def qa_days(request: Request, door: CallDoor) -> HTMLResponse:
    """The days whose QA report is stored, each leading to it."""
    door.log("list", detail="the days with a QA report")
    return render_page(request, "qa_days.html", here="findings", days=stored_days(door))


@router.get("/reports/qa/{day}", response_class=HTMLResponse)
def qa_report(request: Request, day: Annotated[str, PathParam(pattern=DAY_PATTERN)], door: CallDoor) -> HTMLResponse:
    """The day's QA report: counts per rule and agent, each finding in words and linked to its second on the
    call page, how the day's masking fared, and who opened which call that day."""
    calendar_day(day, "day")
    report = stored_report(door, day)
    if report is None:
        return render_page(request, "qa_report.html", here="findings", day=day, summary=None)
    door.log("read", detail=f"the QA report of {day}")
    findings = [Finding.from_dict(f) for f in report["findings"]]
    redaction = RedactionReport.from_dict(report["redaction"]) if report.get("redaction") else None
    rules = audit_rules(door.settings)
    return render_page(request, "qa_report.html", here="findings", day=day, summary=report["summary"],
                       findings=[(f, finding_link(f, "")) for f in findings],
                       redaction=redaction, missing=missing_links(redaction, ""),
                       redaction_withheld=bool(report.get("redaction_withheld")),
                       # who opened which call is the access log's: shown only to those who may read it
                       opened=(report.get("opened") or []) if "access_log" in held(request) else [],
                       words=[finding_words(f.to_dict(), rules) for f in findings],
                       rule_search=lambda rule: [("rule", rule), ("date_from", day), ("date_to", day)],
                       links=day_links(day, ""))
