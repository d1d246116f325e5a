"""The access log as a page, for the auditor: who searched, played, exported, erased or held what."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from asr_tasks.web.deps import Access
from asr_tasks.web.pages import render_page

PERMISSION = "access_log"

router = APIRouter()


@router.get("/access-log", response_class=HTMLResponse)
def access_log_page(request: Request, access: Access, days: int = Query(7, ge=1, le=3660), who: str = "",
                    recording: str = "") -> HTMLResponse:
    """Who searched, played, exported, erased or held what, newest last."""
    since = datetime.now(timezone.utc) - timedelta(days=days)
    entries = access.entries(since=since, user=who or None, recording_id=recording or None, limit=5000)
    return render_page(request, "access_log.html", entries=entries, days=days, who=who, recording=recording)
