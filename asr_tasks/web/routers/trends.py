"""Trends per agent or per team, week by week (``audit.trends``): a table of calls, findings per 100 calls,
average score and non-talk share, findings per 100 calls by rule, and a server-drawn chart of one group (or of
every call shown). A Team Lead sees their teams' agents only; each reading is an access-log row."""

from __future__ import annotations

import html
from datetime import date, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import HTMLResponse
from markupsafe import Markup

from asr_tasks.audit.trends import GROUPINGS, Week, stored_day_calls, weekly
from asr_tasks.records.teams import configured_teams
from asr_tasks.web.door import CallDoor, Door
from asr_tasks.web.pages import render_page
from asr_tasks.web.routers.progress import DAY_PATTERN, calendar_day
from asr_tasks.web.routers.reports import stored_days

PERMISSION = "read"
DEFAULT_WEEKS = 12
MAX_TREND_DAYS = 732  # two years of weeks at most
Day = Annotated[str, Query(pattern=DAY_PATTERN)]

router = APIRouter()


def trend_weeks(door: Door, date_from: str, date_to: str, by: str) -> tuple[str, str, list[Week]]:
    """The range (the last twelve weeks to the newest audited day by default) and its weeks per group, of the
    calls the user may see; the reading logged. 422 for a range or grouping it cannot show."""
    if by not in GROUPINGS:
        raise HTTPException(status_code=422, detail=f"by {by!r}: one of {', '.join(GROUPINGS)}")
    days = stored_days(door)
    last = date_to or (days[0] if days else date.today().isoformat())
    first = date_from or (calendar_day(last, "date_to") - timedelta(weeks=DEFAULT_WEEKS) + timedelta(days=1)).isoformat()
    span = (calendar_day(last, "date_to") - calendar_day(first, "date_from")).days
    if not 0 <= span < MAX_TREND_DAYS:
        raise HTTPException(status_code=422, detail=f"{first} to {last}: a range of 1 to {MAX_TREND_DAYS} days")
    store, settings = door.store(), door.settings
    calls = [c for d in days if first <= d <= last if (c := stored_day_calls(store, settings, d)) is not None]
    door.log("read", detail=f"trends of {first} to {last} by {by}")
    return first, last, weekly(calls, by, configured_teams(settings), door.sees)


def overall(weeks: list[Week]) -> list[Week]:
    """Every group's weeks added up, week by week."""
    out: dict[str, Week] = {}
    for w in weeks:
        total = out.setdefault(w.week, Week(w.week, "all"))
        total.calls += w.calls
        total.findings.update(w.findings)
        total.scores += w.scores
        total.non_talk += w.non_talk
    return [out[k] for k in sorted(out)]


def chart(weeks: list[Week]) -> Markup:
    """Findings per 100 calls as columns and the average score as a line (0-100, right), a week each."""
    width, height, pad = 720, 140, 28
    rows = [w.to_dict() for w in weeks]
    step = min(80.0, (width - 2 * pad) / max(1, len(rows)))  # a few weeks stay columns, not walls
    top = max((r["findings_per_100"] for r in rows), default=0.0) or 1.0
    parts = [f'<svg viewBox="0 0 {width} {height + 30}" width="100%" role="img" class="trend" '
             'aria-label="findings per 100 calls and average score, week by week">']
    points = []
    for n, r in enumerate(rows):
        x, h = pad + n * step, (height - 10) * r["findings_per_100"] / top
        parts.append(f'<rect class="col" x="{x + 2:.1f}" y="{height - h:.1f}" width="{max(1.0, step - 4):.1f}" '
                     f'height="{h:.1f}"><title>{html.escape(r["week"])}: {r["calls"]} calls, '
                     f'{r["findings_per_100"]:g} findings per 100 calls</title></rect>')
        if r["average_score"] is not None:
            y = height - (height - 10) * r["average_score"] / 100
            points.append(f"{x + step / 2:.1f},{y:.1f}")
            parts.append(f'<circle class="dot" cx="{x + step / 2:.1f}" cy="{y:.1f}" r="3"><title>'
                         f'{html.escape(r["week"])}: average score {r["average_score"]:g}</title></circle>')
        if n % max(1, len(rows) // 8) == 0:
            parts.append(f'<text x="{x:.1f}" y="{height + 14}">{html.escape(r["week"][5:])}</text>')
    if points:
        parts.append(f'<polyline class="score" points="{" ".join(points)}"><title>average score</title></polyline>')
    parts.append(f'<text x="0" y="10">{top:g}/100</text><text x="{width - pad + 2}" y="10">100</text>')
    parts.append(f'<text x="{width - pad + 2}" y="{height}">0</text></svg>')
    return Markup("".join(parts))


@router.get("/trends", response_class=HTMLResponse)
def trends_page(request: Request, door: CallDoor, date_from: Day = "", date_to: Day = "",
                by: str = Query("team", max_length=10), group: str = Query("", max_length=255)) -> HTMLResponse:
    """Each group's weeks as a table, one group's (or all the calls') findings and scores as a chart; a range or
    grouping it cannot show, said in the page."""
    try:
        first, last, weeks = trend_weeks(door, date_from, date_to, by)
    except HTTPException as exc:
        return render_page(request, "trends.html", exc.status_code, here="trends", error=str(exc.detail),
                           date_from=date_from, date_to=date_to, by=by, group=group, groups=[], rows=[], shown=[],
                           rules=[], chart="", groupings=GROUPINGS)
    shown = [w for w in weeks if w.group == group] if group else overall(weeks)
    rules = sorted({r for w in shown for r in w.findings})
    return render_page(request, "trends.html", here="trends", date_from=first, date_to=last, by=by, group=group,
                       groups=sorted({w.group for w in weeks}), rows=[w.to_dict() for w in weeks],
                       shown=[w.to_dict() for w in shown], rules=rules, chart=chart(shown), groupings=GROUPINGS,
                       error="" if not group or shown else f"no calls of {by} {group} in this range")


@router.get("/api/trends")
def api_trends(door: CallDoor, date_from: Day = "", date_to: Day = "",
               by: str = Query("team", max_length=10)) -> dict[str, Any]:
    """Each group's weeks: calls, findings per 100 calls (in all and by rule), average score, non-talk share."""
    first, last, weeks = trend_weeks(door, date_from, date_to, by)
    return {"date_from": first, "date_to": last, "by": by, "weeks": [w.to_dict() for w in weeks]}
