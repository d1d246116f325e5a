"""The search page and its JSON API: hits with their highlights, facets and counts, and the recording an audit
link points at. Every search and every recording opened goes to the access log (``door.py``)."""

from __future__ import annotations

import html
from dataclasses import asdict
from typing import Any, Sequence
from urllib.parse import urlencode

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import HTMLResponse
from markupsafe import Markup

from asr_tasks.config import Settings
from asr_tasks.index.query import HL_CLOSE, HL_OPEN, CursorError, Filters, IndexBackendError, clock
from asr_tasks.inputs import speaker_names
from asr_tasks.web.deps import MAX_QUERY_CHARS, AppSettings, CheckedQuery, Filter, PageSize, SearchFilters, Second, gone
from asr_tasks.web.door import CallDoor, Door
from asr_tasks.web.pages import render_page

PERMISSION = "read"
PAGE_SIZE = 20

MAX_CURSOR_CHARS = 512  # a page cursor is a few sort values; anything longer is not one
router = APIRouter()


def escaped_highlight(highlight: str, open_tag: str, close_tag: str) -> str:
    """Escaped text with the index's highlight markers as tags: the transcript can never inject markup."""
    return html.escape(highlight).replace(HL_OPEN, open_tag).replace(HL_CLOSE, close_tag)


def highlighted(highlight: str) -> Markup:
    """A hit's highlight on the page, its matches in <mark>."""
    return Markup(escaped_highlight(highlight, "<mark>", "</mark>"))


def speakers(settings: Settings) -> list[str]:
    """The speaker names the form offers: those the API's ``speaker`` takes."""
    return speaker_names(settings.audio)


def facets(form: dict[str, str], counts: Sequence[Any], rules: dict[str, int]) -> dict[str, list[tuple[str, int, str]]]:
    """Hits per agent, per day and per finding rule, each with the query string that narrows the search to it."""
    def narrowed(**change: str) -> str:
        return urlencode({**form, **change})

    agents: dict[str, int] = {}
    days: dict[str, int] = {}
    for c in counts:
        agents[c.agent_id or ""] = agents.get(c.agent_id or "", 0) + c.segments
        days[c.call_date or ""] = days.get(c.call_date or "", 0) + c.segments
    return {
        "agent": [(a or "-", n, narrowed(agent=a)) for a, n in sorted(agents.items(), key=lambda x: -x[1]) if a],
        "day": [(d, n, narrowed(date_from=d, date_to=d)) for d, n in sorted(days.items()) if d],
        "finding": [(r, n, narrowed(rule=r)) for r, n in sorted(rules.items(), key=lambda x: -x[1])],
    }


def hits_view(q: str, filters: Filters, form: dict[str, str], after: str, door: Door) -> tuple[dict[str, Any], int]:
    """One page of hits, with counts and facets on the first page, logged; or why not (400, 503)."""
    try:
        result = door.index().search_page(q, filters, size=PAGE_SIZE, after=after or None, open_tag=HL_OPEN,
                                          close_tag=HL_CLOSE)
        counts = [] if after else door.index().counts(q, filters)
        rules = {} if after else door.index().rule_counts(q, filters)
    except (CursorError, ValueError) as exc:
        return {"error": str(exc)}, 400
    except IndexBackendError as exc:
        return {"error": str(exc)}, 503
    view = {"hits": result.hits, "counts": counts, "next_after": result.next_after,
            "next_query": urlencode({**form, "after": result.next_after or ""}), "facets": facets(form, counts, rules)}
    door.log("search", query=q, filters=asdict(filters), hits=sum(c.segments for c in counts) if counts
             else len(result.hits), detail=f"page after {after}" if after else None)
    return view, 200


def focus_view(recording_id: str, t: float, door: Door) -> tuple[dict[str, Any], int]:
    """The recording an audit link opens, logged; or why not (410 erased, 404 unknown)."""
    focus = door.index().recording(recording_id)
    if focus is None:
        missing = gone(door.ledger, recording_id)
        return {"error": missing.detail if missing else f"no recording {recording_id}"}, 410 if missing else 404
    door.log("read", recording_id=recording_id, detail=f"opened at {t:.1f} s")
    return {"focus": focus}, 200


@router.get("/", response_class=HTMLResponse)
def page(
    request: Request,
    settings: AppSettings,
    door: CallDoor,
    q: str = "",
    date_from: Filter = "",
    date_to: Filter = "",
    agent: Filter = "",
    speaker: Filter = "",
    quality: Filter = "",
    rule: Filter = "",
    non_talk_percent: str = Query("", pattern=r"^(\d{1,3}(\.\d+)?)?$"),  # a form sends an empty field as ""
    agent_interruptions: str = Query("", pattern=r"^\d{0,6}$"),
    after: str = Query("", max_length=MAX_CURSOR_CHARS),
    recording_id: Filter = "",
    t: Second = 0.0,
) -> HTMLResponse:
    """The page: form, hits (or the recording an audit link points at), facets and the player."""
    filters = Filters(date_from or None, date_to or None, agent or None, speaker or None, quality or None,
                      float(non_talk_percent) / 100 if non_talk_percent else None,
                      int(agent_interruptions) if agent_interruptions else None, None, rule or None)
    form = {"q": q, "date_from": date_from, "date_to": date_to, "agent": agent, "speaker": speaker,
            "quality": quality, "rule": rule, "non_talk_percent": non_talk_percent,
            "agent_interruptions": agent_interruptions}
    view: dict[str, Any] = {"hits": None, "counts": [], "next_after": None, "focus": None, "error": "", "facets": {}}
    status = 200
    if len(q) > MAX_QUERY_CHARS:
        view["error"], status = f"the query is longer than {MAX_QUERY_CHARS} characters", 400
    elif q.strip():
        found, status = hits_view(q, filters, form, after, door)
        view.update(found)
    elif recording_id:
        found, status = focus_view(recording_id, t, door)
        view.update(found)
    return render_page(request, "search.html", status, form=form, speakers=speakers(settings), query=q, t=t,
                       page_size=PAGE_SIZE, clock=clock, marked=highlighted,
                       call_query=lambda h: urlencode({"q": q, "t": f"{h.start:.1f}"}),
                       export_query=urlencode({"q": q, **{k: v for k, v in asdict(filters).items() if v is not None}}),
                       **view)


@router.get("/api/search")
def api_search(
    q: CheckedQuery,
    filters: SearchFilters,
    door: CallDoor,
    size: PageSize,
    after: str | None = Query(None, max_length=MAX_CURSOR_CHARS),
) -> dict[str, Any]:
    """Hits as JSON (highlights escaped, their matches in <em>), with the cursor of the next page."""
    try:
        result = door.index().search_page(q, filters, size, after, open_tag=HL_OPEN, close_tag=HL_CLOSE)
    except CursorError as exc:
        raise HTTPException(status_code=400, detail=str(exc)) from exc
    except IndexBackendError as exc:
        raise HTTPException(status_code=503, detail=str(exc)) from exc
    door.log("search", query=q, filters=asdict(filters), hits=len(result.hits),
             detail=f"api page after {after}" if after else "api")
    hits = [{**h.to_dict(), "highlight": escaped_highlight(h.highlight, "<em>", "</em>")} for h in result.hits]
    return {"hits": hits, "next_after": result.next_after}


@router.get("/api/counts")
def api_counts(q: CheckedQuery, filters: SearchFilters, door: CallDoor) -> list[dict[str, Any]]:
    """Matching segments and recordings per agent and day."""
    counts = door.index().counts(q, filters)
    door.log("search", query=q, filters=asdict(filters), hits=sum(c.segments for c in counts), detail="api counts")
    return [c.to_dict() for c in counts]
