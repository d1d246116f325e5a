"""The review queue: a day's findings with their reviews, filtered by status and rule, each linked to its second
on the call page; a reviewer confirms, dismisses (with a reason) or assigns one (``audit.reviews``). Reading the
queue is an access-log row, as a report's reading is; each verdict is one of its own."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, ConfigDict, Field

from asr_tasks.audit.reports import finding_link
from asr_tasks.audit.reviews import MAX_COMMENT_CHARS, Review, ReviewError, Reviews, precision, status_of
from asr_tasks.audit.rules import Finding
from asr_tasks.audit.verdicts import DISMISS_REASONS, STATUSES
from asr_tasks.text.masking import configured_policy
from asr_tasks.web.call_page import audit_rules, finding_words
from asr_tasks.web.door import CallDoor, Door
from asr_tasks.web.pages import render_page
from asr_tasks.web.routers.progress import DAY_PATTERN, calendar_day
from asr_tasks.web.routers.reports import stored_days, stored_report

PERMISSION = "review"

router = APIRouter()

Day = Annotated[str, Query(pattern=DAY_PATTERN)]


class Verdict(BaseModel):
    """A reviewer's verdict on one finding of a day."""

    model_config = ConfigDict(extra="forbid")
    date: str = Field(pattern=DAY_PATTERN)
    status: str = Field(max_length=20)
    reason: str | None = Field(None, max_length=40)
    comment: str = Field("", max_length=MAX_COMMENT_CHARS)
    assignee: str | None = Field(None, max_length=255)


def reviews(door: Door) -> Reviews:
    """The ledger's reviews, comments masked, verdicts written to the request's access log."""
    return Reviews(door.ledger, door.access, configured_policy(door.settings))


def day_findings(door: Door, day: str) -> list[Finding]:
    """The day's findings as its stored audit holds them (404: no audit that day)."""
    calendar_day(day, "date")
    report = stored_report(door, day)
    if report is None:
        raise HTTPException(status_code=404, detail=f"no audit is stored for {day}")
    return [Finding.from_dict(f) for f in report["findings"]]


def queue(door: Door, day: str, status: str, rule: str) -> tuple[list[Finding], dict[str, Review], list[Finding]]:
    """The day's findings, their reviews, and those of the status and rule asked for; the reading logged."""
    if status and status not in STATUSES:
        raise HTTPException(status_code=422, detail=f"status {status!r}: one of {', '.join(STATUSES)}")
    findings = day_findings(door, day)
    held = reviews(door).of(f.finding_id for f in findings)
    door.log("read", detail=f"the review queue of {day}")
    return findings, held, [f for f in findings if status in ("", status_of(f, held)) and rule in ("", f.rule_id)]


@router.get("/reviews", response_class=HTMLResponse)
def review_page(request: Request, door: CallDoor, date: Day = "",
                status: str = Query("open", max_length=20), rule: str = Query("", max_length=255)) -> HTMLResponse:
    """The queue of a day (the newest audited by default), its open findings unless another status is asked
    for; a day or status it cannot show, said in the page."""
    days = stored_days(door)
    day = date or (days[0] if days else "")
    if not day:  # nothing audited yet
        return render_page(request, "reviews.html", here="reviews", day="", days=[], rows=[], rules={}, error="")
    try:
        findings, held, listed = queue(door, day, status, rule)
    except HTTPException as exc:  # a person's page says why, in the page
        return render_page(request, "reviews.html", exc.status_code, here="reviews", day="", days=days[:60],
                           rows=[], rules={}, error=str(exc.detail))
    words = audit_rules(door.settings)
    rows = [(f, held.get(f.finding_id), status_of(f, held), finding_link(f, ""), finding_words(f.to_dict(), words))
            for f in listed]
    return render_page(request, "reviews.html", here="reviews", day=day, days=days[:60], rows=rows,
                       rules=precision(findings, held), status=status, rule=rule, statuses=STATUSES,
                       reasons=DISMISS_REASONS, error="")


@router.get("/api/reviews")
def list_reviews(door: CallDoor, date: Day = "", status: str = Query("", max_length=20),
                 rule: str = Query("", max_length=255)) -> dict[str, Any]:
    """The day's findings (the newest audited day's by default) of that status and rule, each with its review;
    each rule's findings by status."""
    days = [] if date else stored_days(door)
    day = date or (days[0] if days else "")
    if not day:
        raise HTTPException(status_code=404, detail="no day has been audited yet")
    findings, held, listed = queue(door, day, status, rule)
    return {"date": day, "findings": [{**f.to_dict(), "status": status_of(f, held),
                          "review": held[f.finding_id].to_dict() if f.finding_id in held else None} for f in listed],
            "rules": precision(findings, held)}


@router.post("/api/reviews/{finding_id}")
def review_finding(finding_id: Annotated[str, PathParam(max_length=64)], body: Verdict,
                   door: CallDoor) -> dict[str, Any]:
    """Confirm, dismiss or assign one finding of the day (400: not a verdict; 404: no such finding)."""
    finding = next((f for f in day_findings(door, body.date) if f.finding_id == finding_id), None)
    if finding is None:
        raise HTTPException(status_code=404, detail=f"no finding {finding_id} on {body.date}")
    try:
        return reviews(door).review(finding, door.user, body.status, body.reason or None, body.comment,
                                    body.assignee or None).to_dict()
    except ReviewError as exc:
        raise HTTPException(status_code=400, detail=str(exc)) from exc
