"""Downloads, for the export permission: a search's whole result (every page) as CSV or JSON (the search posted,
never in the URL), a call's transcript as TXT, SRT, WebVTT or JSON, and the QA team's findings, reviews and scores
of a range of days as CSV or Parquet. Each export goes to the access log (``door.py``), and none answers a
request another site's page made (``DOWNLOADS``: ``app.py``)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query
from fastapi.responses import Response, StreamingResponse

from asr_tasks.audit.qa_exports import FORMATS, TABLES, encode, table_rows
from asr_tasks.audit.reviews import Reviews
from asr_tasks.audit.rules import Finding
from asr_tasks.audit.score_overrides import ScoreOverrides
from asr_tasks.audit.scores import day_scores
from asr_tasks.index.export import FORMATS as EXPORT_HIT_FORMATS
from asr_tasks.records.production import searched
from asr_tasks.records.teams import configured_teams
from asr_tasks.index.export import export
from asr_tasks.web.call_page import EXPORT_FORMATS, export_transcript
from asr_tasks.web.deps import AppSettings, Searched, posted
from asr_tasks.web.door import CallDoor
from asr_tasks.web.routers.progress import DAY_PATTERN, calendar_day
from asr_tasks.web.routers.reports import stored_days, stored_report

PERMISSION = "export"
DOWNLOADS = True  # every route, whatever its method, refuses a cross-site request (``same_site``)
TRANSCRIPT_MEDIA = {"txt": "text/plain", "srt": "application/x-subrip", "vtt": "text/vtt", "json": "application/json"}

MAX_EXPORT_DAYS = 366  # days one QA export spans at most
router = APIRouter()


class ExportAsked(Searched):
    """A search to export whole (its words and filters, in the body as every search is), and in which format."""

    format: str = "csv"


@router.post("/api/export")
def export_hits(door: CallDoor, settings: AppSettings,
                asked: Annotated[ExportAsked, Depends(posted(ExportAsked))]) -> StreamingResponse:
    """Every hit of the search (all pages), streamed as CSV or JSON."""
    format = asked.format
    if format not in EXPORT_HIT_FORMATS:
        raise HTTPException(status_code=400, detail=f"format {format!r}: csv or json")
    q, filters = asked.query(), asked.filters(settings)
    door.log("export", query=q, filters=asdict(filters), detail=f"search results as {format}",
             subjects=searched(door.index(), q, filters))  # the calls exported: an erasure of one seals the words
    media = "text/csv" if format == "csv" else "application/json"
    return StreamingResponse(export(door.index(), q, filters, format), media_type=f"{media}; charset=utf-8",
                             headers={"Content-Disposition": f'attachment; filename="search.{format}"'})


@router.get("/api/qa/{table}.{fmt}")
def qa_export(table: str, fmt: str, door: CallDoor, date_from: Annotated[str, Query(pattern=DAY_PATTERN)],
              date_to: Annotated[str, Query(pattern=DAY_PATTERN)]) -> Response:
    """The findings, reviews or scorecard answers of the audited days of a range (of the calls the user may
    see), as CSV or Parquet."""
    if table not in TABLES or fmt not in FORMATS:
        raise HTTPException(status_code=404, detail=f"no QA export {table}.{fmt} ({', '.join(TABLES)}; "
                                                    f"{', '.join(FORMATS)})")
    first, last = calendar_day(date_from, "date_from"), calendar_day(date_to, "date_to")
    if first > last or (last - first).days >= MAX_EXPORT_DAYS:
        raise HTTPException(status_code=422, detail=f"{first} to {last}: a range of 1 to {MAX_EXPORT_DAYS} days")
    days = [d for d in stored_days(door) if date_from <= d <= date_to]
    findings = [Finding.from_dict(f) for day in days for f in (stored_report(door, day) or {"findings": []})["findings"]]
    held = Reviews(door.ledger, door.access).between(date_from, date_to) if table != "scores" else {}
    card, scored = None, []
    if table == "scores":
        for day in days:
            card, done = day_scores(day, door.store(), door.settings, ScoreOverrides(door.ledger, door.access))
            scored += [s for s in done if door.sees(s.call.agent_id)]
    rows = table_rows(table, findings, held, card, scored, configured_teams(door.settings))
    door.log("export", detail=f"QA {table} of {date_from} to {date_to} as {fmt}, {len(rows)} rows")
    media = "text/csv; charset=utf-8" if fmt == "csv" else "application/vnd.apache.parquet"
    return Response(encode(table, rows, fmt), media_type=media,
                    headers={"Content-Disposition": f'attachment; filename="qa-{table}-{date_from}-{date_to}.{fmt}"'})


@router.get("/call/{recording_id}/transcript.{fmt}")
def transcript_export(recording_id: str, fmt: str, door: CallDoor) -> Response:
    """The call's transcript as TXT, SRT, WebVTT or JSON, as a download."""
    if fmt not in EXPORT_FORMATS:
        raise HTTPException(status_code=404, detail=f"no transcript format {fmt!r} ({', '.join(EXPORT_FORMATS)})")
    rec, segments = door.call(recording_id, f"transcript.{fmt}", action="export")
    return Response(export_transcript(fmt, rec, segments), media_type=f"{TRANSCRIPT_MEDIA[fmt]}; charset=utf-8",
                    headers={"Content-Disposition": f'attachment; filename="{recording_id}.{fmt}"'})
