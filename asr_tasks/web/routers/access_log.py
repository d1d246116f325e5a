"""The access log as a page, for the auditor: who searched, played, exported, erased or held what. Reading it
is itself a row of it (``door.py``)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from asr_tasks.web.deps import RECORDING_ID, Filter
from asr_tasks.web.door import CallDoor
from asr_tasks.web.pages import render_page

PERMISSION = "access_log"
PAGE_ROWS = 500  # entries per page; the next page (older ones) is a link

router = APIRouter()


@router.get("/access-log", response_class=HTMLResponse)
def access_log_page(request: Request, door: CallDoor, days: int = Query(7, ge=1, le=3660), who: Filter = "",
                    recording: str = Query("", pattern=RECORDING_ID),
                    page: int = Query(0, ge=0, le=100_000)) -> HTMLResponse:
    """Who searched, played, exported, erased or held what, newest first, a page at a time."""
    since = datetime.now(timezone.utc) - timedelta(days=days)
    door.log("list", recording_id=recording or None, filters={"who": who},
             detail=f"the access log of {days} days, page {page}")
    entries = door.access.entries(since=since, user=who or None, recording_id=recording or None, limit=PAGE_ROWS + 1,
                             newest_first=True, skip=page * PAGE_ROWS)
    older = urlencode({"days": days, "who": who, "recording": recording, "page": page + 1})
    return render_page(request, "access_log.html", here="access-log", entries=entries[:PAGE_ROWS], days=days,
                       who=who, recording=recording, older=older if len(entries) > PAGE_ROWS else None)
