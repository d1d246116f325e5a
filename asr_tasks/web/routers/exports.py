"""Downloads, for the export permission: a search's whole result (every page) as CSV or JSON, and a call's
transcript as TXT, SRT, WebVTT or JSON. Each export goes to the access log (``door.py``)."""

from __future__ import annotations

from dataclasses import asdict

from fastapi import APIRouter, HTTPException
from fastapi.responses import Response, StreamingResponse

from asr_tasks.index.export import FORMATS as EXPORT_HIT_FORMATS
from asr_tasks.index.export import export
from asr_tasks.web.call_page import EXPORT_FORMATS, export_transcript
from asr_tasks.web.deps import CheckedQuery, SearchFilters
from asr_tasks.web.door import CallDoor

PERMISSION = "export"
TRANSCRIPT_MEDIA = {"txt": "text/plain", "srt": "application/x-subrip", "vtt": "text/vtt", "json": "application/json"}

router = APIRouter()


@router.get("/api/export")
def export_hits(q: CheckedQuery, filters: SearchFilters, door: CallDoor, format: str = "csv") -> StreamingResponse:
    """Every hit of the search (all pages), streamed as CSV or JSON."""
    if format not in EXPORT_HIT_FORMATS:
        raise HTTPException(status_code=400, detail=f"format {format!r}: csv or json")
    door.log("export", query=q, filters=asdict(filters), detail=f"search results as {format}")
    media = "text/csv" if format == "csv" else "application/json"
    return StreamingResponse(export(door.index(), q, filters, format), media_type=f"{media}; charset=utf-8",
                             headers={"Content-Disposition": f'attachment; filename="search.{format}"'})


@router.get("/call/{recording_id}/transcript.{fmt}")
def transcript_export(recording_id: str, fmt: str, door: CallDoor) -> Response:
    """The call's transcript as TXT, SRT, WebVTT or JSON, as a download."""
    if fmt not in EXPORT_FORMATS:
        raise HTTPException(status_code=404, detail=f"no transcript format {fmt!r} ({', '.join(EXPORT_FORMATS)})")
    rec, segments = door.call(recording_id, f"transcript.{fmt}", action="export")
    return Response(export_transcript(fmt, rec, segments), media_type=f"{TRANSCRIPT_MEDIA[fmt]}; charset=utf-8",
                    headers={"Content-Disposition": f'attachment; filename="{recording_id}.{fmt}"'})
