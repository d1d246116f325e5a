"""The review queue: the findings of a day or a range of days with their reviews, filtered by status, rule,
severity, agent and team, each linked to its second on the call page; a reviewer confirms, dismisses (with a
reason) or assigns one (``audit.reviews``). Reading the queue is an access-log row, as a report's reading is;
each verdict is one of its own."""

from __future__ import annotations

from dataclasses import replace
from datetime import date as Date
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, ConfigDict, Field

from asr_tasks.audit.reports import finding_link
from asr_tasks.audit.reviews import MAX_COMMENT_CHARS, Queue, Review, ReviewError, Reviews, precision, status_of
from asr_tasks.audit.rules import SEVERITIES, Finding
from asr_tasks.audit.score_overrides import ScoreOverrides
from asr_tasks.audit.scores import restate
from asr_tasks.audit.verdicts import DISMISS_REASONS, STATUSES
from asr_tasks.records.teams import configured_teams
from asr_tasks.text.masking import configured_policy
from asr_tasks.web.call_page import audit_rules, finding_words
from asr_tasks.web.door import CallDoor, Door
from asr_tasks.web.pages import render_page
from asr_tasks.web.routers.progress import DAY_PATTERN, calendar_day
from asr_tasks.web.routers.reports import stored_days, stored_report

PERMISSION = "review"
MAX_QUEUE_DAYS = 92  # days one queue spans at most: a quarter
PAGE_ROWS = 100  # findings a page of the queue lists (``page``: which hundred)
MAX_PAGE_ROWS = 5000

router = APIRouter()

Day = Annotated[str, Query(pattern=DAY_PATTERN)]
Name = Annotated[str, Query(max_length=255)]


class Verdict(BaseModel):
    """A reviewer's verdict on one finding of a day."""

    model_config = ConfigDict(extra="forbid")
    date: str = Field(pattern=DAY_PATTERN)
    status: str = Field(max_length=20)
    reason: str | None = Field(None, max_length=40)
    comment: str = Field("", max_length=MAX_COMMENT_CHARS)
    assignee: str | None = Field(None, max_length=255)


class Asked:
    """What a queue was asked for: its days (one, a range, or the newest audited) and its filters, checked."""

    def __init__(self, door: CallDoor, date: Day = "", date_from: Day = "", date_to: Day = "",
                 status: str | None = Query(None, max_length=20), rule: Name = "", severity: Name = "", agent: Name = "",
                 team: Name = "", assignee: Name = "", page: int = Query(0, ge=0, le=100_000),
                 size: int = Query(PAGE_ROWS, ge=1, le=MAX_PAGE_ROWS)) -> None:
        self.door, self.status, self.rule, self.severity, self.agent, self.team = (door, status, rule, severity,
                                                                                   agent, team)
        self.page, self.size, self.assignee = page, size, assignee
        self.stored = stored_days(door)
        self.date_from = date or date_from or date_to or (self.stored[0] if self.stored else "")
        self.date_to = date or date_to or self.date_from

    def days(self) -> list[str]:
        """The audited days of the range, newest first (422: a range the queue cannot list)."""
        first, last = calendar_day(self.date_from, "date_from"), calendar_day(self.date_to, "date_to")
        if first > last or (last - first).days >= MAX_QUEUE_DAYS:
            raise HTTPException(status_code=422, detail=f"{first} to {last}: a range of 1 to {MAX_QUEUE_DAYS} days")
        if self.status and self.status not in STATUSES:  # None: the route's default
            raise HTTPException(status_code=422, detail=f"status {self.status!r}: one of {', '.join(STATUSES)}")
        if self.severity and self.severity not in SEVERITIES:
            raise HTTPException(status_code=422, detail=f"severity {self.severity!r}: one of {', '.join(SEVERITIES)}")
        return [d for d in self.stored if first <= Date.fromisoformat(d) <= last]

    def queue(self) -> Queue:
        teams = configured_teams(self.door.settings)
        if self.team and self.team not in {t.id for t in teams.teams}:
            raise HTTPException(status_code=422, detail=f"team {self.team!r}: not a team of the teams file")
        return Queue(self.status or "", self.rule, self.severity, self.agent,
                     teams.agents_of(self.team) if self.team else None, self.assignee)

    def one_page(self, listed: list[Finding]) -> list[Finding]:
        return listed[self.page * self.size:(self.page + 1) * self.size]

    def form(self) -> dict[str, str]:
        return {"date_from": self.date_from, "date_to": self.date_to, "status": self.status or "", "rule": self.rule,
                "severity": self.severity, "agent": self.agent, "team": self.team, "assignee": self.assignee}


def reviews(door: Door) -> Reviews:
    """The ledger's reviews, comments masked, verdicts written to the request's access log."""
    return Reviews(door.ledger, door.access, configured_policy(door.settings))


def day_findings(door: Door, day: str) -> list[Finding]:
    """The day's findings as its stored audit holds them, as the user may see them (404: no audit that day)."""
    calendar_day(day, "date")
    report = stored_report(door, day)
    if report is None:
        raise HTTPException(status_code=404, detail=f"no audit is stored for {day}")
    return [Finding.from_dict(f) for f in report["findings"]]


def queue(asked: Asked) -> tuple[list[Finding], dict[str, Review], list[Finding]]:
    """The findings of the days asked for, their reviews, and those the filters keep; the reading logged."""
    days, kept = asked.days(), asked.queue()
    if asked.date_from == asked.date_to and not days:
        raise HTTPException(status_code=404, detail=f"no audit is stored for {asked.date_from}")
    door = asked.door
    findings = [f for day in days for f in day_findings(door, day)]
    held = reviews(door).between(asked.date_from, asked.date_to)
    span = asked.date_from if asked.date_from == asked.date_to else f"{asked.date_from} to {asked.date_to}"
    door.log("read", detail=f"the review queue of {span}")
    return findings, held, [f for f in findings if kept.lists(f, held)]


def counted(asked: Asked, findings: list[Finding], held: dict[str, Review]) -> dict[str, dict[str, int]]:
    """Each rule's findings by status, of the findings the filters keep whatever their status."""
    kept = replace(asked.queue(), status="")
    return precision([f for f in findings if kept.lists(f, held)], held)


@router.get("/reviews", response_class=HTMLResponse)
def review_page(request: Request, asked: Annotated[Asked, Depends()]) -> HTMLResponse:
    """The queue of a day or a range of days (the newest audited day by default), its open findings unless
    another status is asked for; a range or filter it cannot show, said in the page."""
    door = asked.door
    asked.status = "open" if asked.status is None else asked.status
    teams = [t.id for t in configured_teams(door.settings).teams]
    shown: dict[str, Any] = {"form": asked.form(), "days": asked.stored[:60], "statuses": STATUSES,
             "severities": SEVERITIES,
             "reasons": DISMISS_REASONS, "teams": teams}
    if not asked.date_from:  # nothing audited yet
        return render_page(request, "reviews.html", here="reviews", rows=[], rules={}, rule_ids=[], error="",
                           **shown)
    try:
        findings, held, listed = queue(asked)
    except HTTPException as exc:  # a person's page says why, in the page
        return render_page(request, "reviews.html", exc.status_code, here="reviews", rows=[], rules={},
                           rule_ids=[], error=str(exc.detail), **shown)
    words = audit_rules(door.settings)
    rows = [(f, held.get(f.finding_id), status_of(f, held), finding_link(f, ""), finding_words(f.to_dict(), words))
            for f in asked.one_page(listed)]
    pages = {"listed": len(listed), "first": asked.page * asked.size + 1, "page": asked.page,
             "more": (asked.page + 1) * asked.size < len(listed)}
    return render_page(request, "reviews.html", here="reviews", rows=rows, rules=counted(asked, findings, held),
                       rule_ids=sorted({f.rule_id for f in findings}), error="", pages=pages, **shown)


@router.get("/api/reviews")
def list_reviews(asked: Annotated[Asked, Depends()]) -> dict[str, Any]:
    """The findings of a day or range (the newest audited day's by default) that the filters keep (any status
    unless one is asked for), a page of ``size`` (``listed``: how many in all), each with its review; each rule's
    findings by status."""
    if not asked.date_from:
        raise HTTPException(status_code=404, detail="no day has been audited yet")
    findings, held, everything = queue(asked)
    listed = asked.one_page(everything)
    return {"date_from": asked.date_from, "date_to": asked.date_to, "listed": len(everything), "page": asked.page,
            "findings": [{**f.to_dict(), "status": status_of(f, held),
                          "review": held[f.finding_id].to_dict() if f.finding_id in held else None} for f in listed],
            "rules": counted(asked, findings, held)}


@router.post("/api/reviews/{finding_id}")
def review_finding(finding_id: Annotated[str, PathParam(max_length=64)], body: Verdict,
                   door: CallDoor) -> dict[str, Any]:
    """Confirm, dismiss or assign one finding of the day (400: not a verdict; 404: no such finding)."""
    finding = next((f for f in day_findings(door, body.date) if f.finding_id == finding_id), None)
    if finding is None:
        raise HTTPException(status_code=404, detail=f"no finding {finding_id} on {body.date}")
    try:
        done = reviews(door).review(finding, door.user, body.status, body.reason or None, body.comment,
                                    body.assignee or None)
    except ReviewError as exc:
        raise HTTPException(status_code=400, detail=str(exc)) from exc
    # a dismissed finding counts against no call: the day's scores and trends as the verdict leaves them
    restate(body.date, door.store(), door.index(), door.settings, ScoreOverrides(door.ledger, door.access))
    return done.to_dict()
