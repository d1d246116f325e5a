"""The operator's view of the backlog from the ledger: how far each month is, finished audio per hour, and one
day's recordings as ``asr status`` prints them. Each page read goes to the access log (``door.py``); a
recording being erased shows no key."""

from __future__ import annotations

import html
from datetime import date, datetime, timezone
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import HTMLResponse
from markupsafe import Markup

from asr_tasks.records.progress import finished_per_hour, first_day, progress
from asr_tasks.states import GONE_STATES, RecordingState
from asr_tasks.version import DayReports
from asr_tasks.web.door import CallDoor
from asr_tasks.web.pages import render_page

PERMISSION = "read"
TEAM_LEADS = False  # the whole backlog's keys and counts: for Call Readers, not for a Team Lead's scope
DAY_PATTERN = r"^(\d{4}-\d{2}-\d{2})?$"
MAX_SPAN_YEARS = 100  # a report's range at most: each month of it is a row of the page

router = APIRouter()


def throughput_svg(series: list[tuple[str, int, float]]) -> Markup:
    """Audio hours finished per hour as columns, the hours under them every 6 hours."""
    width, height = 960, 120
    step = width / max(1, len(series))
    top = max((hours for _, _, hours in series), default=0.0) or 1.0
    parts = [f'<svg viewBox="0 0 {width} {height + 16}" width="100%" height="{height + 16}" role="img" '
             'aria-label="audio hours finished per hour">']
    for n, (hour, count, hours) in enumerate(series):
        h = height * hours / top
        parts.append(f'<rect class="col" x="{n * step:.1f}" y="{height - h:.1f}" width="{max(1.0, step - 1):.1f}" '
                     f'height="{h:.1f}"><title>{html.escape(hour)}:00 {count} recordings, {hours:.2f} audio h'
                     '</title></rect>')
        if n % 6 == 0:
            parts.append(f'<text x="{n * step:.1f}" y="{height + 12}">{html.escape(hour[5:])}h</text>')
    parts.append("</svg>")
    return Markup("".join(parts))


def calendar_day(value: str, name: str) -> date:
    """A date of the calendar, or 400 naming the parameter (the pattern alone lets 2026-13-45 through)."""
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise HTTPException(status_code=400, detail=f"{name} {value!r}: not a date of the calendar") from None


@router.get("/progress", response_class=HTMLResponse)
def progress_page(request: Request, door: CallDoor, date_from: str = Query("", pattern=DAY_PATTERN),
                  date_to: str = Query("", pattern=DAY_PATTERN)) -> HTMLResponse:
    """The operator's view: a bar per year and month, finished audio per hour, failures by reason."""
    now = datetime.now(timezone.utc)
    last = date_to or now.date().isoformat()
    ledger = door.ledger
    first = date_from or first_day(ledger) or last
    if (calendar_day(last, "date_to") - calendar_day(first, "date_from")).days > MAX_SPAN_YEARS * 366:
        raise HTTPException(status_code=400, detail=f"{first} to {last}: at most {MAX_SPAN_YEARS} years at once")
    door.log("list", detail=f"progress of {first} to {last}")
    report = progress(ledger, first, last, "month", now)
    years: dict[str, list[Any]] = {}
    for p in report.periods:
        years.setdefault(p.period[:4], []).append(p)
    rows = [(year, months, sum(p.share_done * p.recordings for p in months) / max(1, sum(p.recordings
                                                                                      for p in months)),
             sum(p.recordings for p in months)) for year, months in sorted(years.items())]
    return render_page(request, "progress.html", here="progress", report=report, years=rows,
                       chart=throughput_svg(finished_per_hour(ledger, now)),
                       day_of=lambda key: "-".join(key.split("/")[-4:-1]))


@router.get("/progress/day/{day}", response_class=HTMLResponse)
def progress_day(request: Request, day: Annotated[str, PathParam(pattern=DAY_PATTERN)],
                 door: CallDoor) -> HTMLResponse:
    """One day's recordings from the ledger, as ``asr status`` prints them, each that the index holds leading to
    its call page (a quarantined one's says why), and the day's QA report where one is stored."""
    calendar_day(day, "day")
    door.log("list", detail=f"the recordings of {day}")
    rows = [{**r, "key": "(erased)"} if r["state"] in GONE_STATES else r for r in door.ledger.rows(day)
            if r["state"] != RecordingState.SUPERSEDED]
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["state"]] = counts.get(r["state"], 0) + 1
    audited = door.store().exists(door.settings.storage.artefacts_bucket, DayReports(day).audit("json"))
    return render_page(request, "progress_day.html", here="progress", day=day, rows=rows, counts=counts,
                       audited=audited)
