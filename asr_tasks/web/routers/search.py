"""The search page and its JSON API: hits with their highlights, facets and counts, the calls a search by
filters alone lists (a finding rule, a tag, an agent, a day: no words), and the recording an audit link points
at. Every search and every recording opened goes to the access log (``door.py``)."""

from __future__ import annotations

import html
from dataclasses import asdict
from typing import Any, Callable, Sequence
from urllib.parse import urlencode

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import HTMLResponse
from markupsafe import Markup

from asr_tasks.config import Settings
from asr_tasks.index.query import (
    HL_CLOSE,
    HL_OPEN,
    SCORE_BANDS,
    CursorError,
    Filters,
    IndexBackendError,
    blank,
    check_query,
    checked_filters,
    clock,
)
from asr_tasks.web.call_page import audit_rules, finding_words
from asr_tasks.inputs import InputError, speaker_names
from asr_tasks.web.deps import AppSettings, CheckedQuery, Filter, PageSize, SearchFilters, Second
from asr_tasks.web.door import CallDoor, Door
from asr_tasks.web.pages import render_page

PERMISSION = "read"
WATCHED = ("q", "sounds_like", "agent", "speaker", "quality", "rule", "non_talk_percent", "agent_interruptions",
           "min_score", "max_score", "tag")  # what a saved search takes from the form: all but the days (it runs over each new one)
PAGE_SIZE = 20

MAX_CURSOR_CHARS = 512  # a page cursor is a few sort values; anything longer is not one
router = APIRouter()

# The page's form as its fields came: text for each, and the list of tags asked for under "tag" (repeated in URLs).
Form = dict[str, Any]


def form_query(form: Form, **change: Any) -> str:
    """The form (changed as asked) as the query string of a link to the page, each tag a ``tag=`` of its own."""
    return urlencode({**form, **change}, doseq=True)


def escaped_highlight(highlight: str, open_tag: str, close_tag: str) -> str:
    """Escaped text with the index's highlight markers as tags: the transcript can never inject markup."""
    return html.escape(highlight).replace(HL_OPEN, open_tag).replace(HL_CLOSE, close_tag)


def highlighted(highlight: str) -> Markup:
    """A hit's highlight on the page, its matches in <mark>."""
    return Markup(escaped_highlight(highlight, "<mark>", "</mark>"))


def checked(q: str, filters: Filters, settings: Settings) -> str:
    """Why the form's query or filters cannot be answered as meant ("" when they can): the same checks, in the
    same words, as the API and the CLI."""
    try:
        if q.strip():
            check_query(q, "q")
        checked_filters(filters, speakers(settings))
    except InputError as exc:
        return str(exc)
    return ""


def speakers(settings: Settings) -> list[str]:
    """The speaker names the form offers: those the API's ``speaker`` takes."""
    return speaker_names(settings.audio)


def facets(form: Form, counts: Sequence[Any], rules: dict[str, int], tags: dict[str, int],
           scores: dict[str, int], unit: str = "hits") -> list[tuple[str, list[tuple[str, int, str]]]]:
    """Per agent and per day (``unit``: the search's matching segments, "hits", or its "calls"), and calls per
    finding rule, per tag and per band of score, each titled with what it counts and each entry with the query
    string that narrows to it (a tag is added to those the search already asks for)."""
    def narrowed(**change: Any) -> str:
        return form_query(form, **change)

    agents: dict[str, int] = {}
    days: dict[str, int] = {}
    for c in counts:
        n = c.segments if unit == "hits" else c.recordings
        agents[c.agent_id or ""] = agents.get(c.agent_id or "", 0) + n
        days[c.call_date or ""] = days.get(c.call_date or "", 0) + n
    return [
        (f"{unit} per agent", [(a, n, narrowed(agent=a)) for a, n in sorted(agents.items(), key=lambda x: -x[1]) if a]),
        (f"{unit} per day", [(d, n, narrowed(date_from=d, date_to=d)) for d, n in sorted(days.items()) if d]),
        ("calls per finding", [(r, n, narrowed(rule=r)) for r, n in sorted(rules.items(), key=lambda x: -x[1])]),
        ("calls per tag", [(t, n, narrowed(tag=sorted({*form["tag"], t})))
                           for t, n in sorted(tags.items(), key=lambda x: -x[1])]),
        ("calls per score", [(band, scores[band], narrowed(min_score=f"{low:g}", max_score=f"{high:g}"))
                             for (band, low), high in zip(SCORE_BANDS, (100, *(b - 0.1 for _, b in SCORE_BANDS)))
                             if scores.get(band)]),
    ]


def export_query(q: str, filters: Filters) -> str:
    """The search as the export API's query string: its filters by their names there, each tag a ``tag=``."""
    named = {k: v for k, v in asdict(filters).items() if v is not None and v is not False and k != "tags"}
    return urlencode({"q": q, **named, "tag": list(filters.tags)}, doseq=True)


def answered(ask: Callable[[], dict[str, Any]]) -> tuple[dict[str, Any], int]:
    """What the index answered, or why not: a cursor or filter it refuses (400), a backend it cannot reach (503)."""
    try:
        return ask(), 200
    except (CursorError, ValueError) as exc:
        return {"error": str(exc)}, 400
    except IndexBackendError as exc:
        return {"error": str(exc)}, 503


def hits_view(q: str, filters: Filters, form: Form, after: str, door: Door) -> tuple[dict[str, Any], int]:
    """One page of hits, with counts and facets on the first page, logged; or why not (400, 503)."""
    def ask() -> dict[str, Any]:
        result = door.index().search_page(q, filters, size=PAGE_SIZE, after=after or None, open_tag=HL_OPEN,
                                          close_tag=HL_CLOSE)
        counts = [] if after else door.index().counts(q, filters)
        rules = {} if after else door.index().rule_counts(q, filters)
        tags = {} if after else door.index().tag_counts(q, filters)
        scores = {} if after else door.index().score_counts(q, filters)
        return {"hits": result.hits, "counts": counts, "next_after": result.next_after,
                "next_query": form_query(form, after=result.next_after or ""),
                "facets": facets(form, counts, rules, tags, scores)}

    view, status = answered(ask)
    if status == 200:
        door.log("search", query=q, filters=asdict(filters), hits=sum(c.segments for c in view["counts"])
                 if view["counts"] else len(view["hits"]), detail="a later page" if after else None)
    return view, status


def call_findings(calls: list[dict[str, Any]], rule: str | None, door: Door) -> dict[str, list[dict[str, Any]]]:
    """The findings of the listed calls (of ``rule`` only, when the search asks for one), in words, by call."""
    listed, rules = {c["recording_id"] for c in calls}, audit_rules(door.settings)
    found: dict[str, list[dict[str, Any]]] = {}
    for day in sorted({c.get("call_date") or "" for c in calls}):
        for f in door.index().findings(day):
            if f["recording_id"] in listed and rule in (None, f["rule_id"]):
                found.setdefault(f["recording_id"], []).append({**f, "words": finding_words(f, rules)})
    return {rid: sorted(fs, key=lambda f: float(f["start"])) for rid, fs in found.items()}


def calls_view(filters: Filters, form: Form, after: str, door: Door) -> tuple[dict[str, Any], int]:
    """A search by filters alone: one page of the calls they let through, each with its findings and tags, and
    calls per agent, day, finding and tag on the first page, logged; or why not (400, 503)."""
    def ask() -> dict[str, Any]:
        page = door.index().calls("", filters, size=PAGE_SIZE, after=after or None)
        counts = [] if after else door.index().counts("", filters)
        rules = {} if after else door.index().rule_counts("", filters)
        tags = {} if after else door.index().tag_counts("", filters)
        scores = {} if after else door.index().score_counts("", filters)
        found = call_findings(page.calls, filters.rule, door)
        return {"calls": [{**c, "findings": found.get(c["recording_id"], [])} for c in page.calls],
                "counts": counts, "next_after": page.next_after,
                "next_query": form_query(form, after=page.next_after or ""),
                "facets": facets(form, counts, rules, tags, scores, "calls")}

    view, status = answered(ask)
    if status == 200:
        door.log("search", query="", filters=asdict(filters), hits=sum(c.recordings for c in view["counts"])
                 if view["counts"] else len(view["calls"]), detail="calls" + (", a later page" if after else ""))
    return view, status


def asked(form: Form) -> str:
    """What a search asked for, in words: its query and every filter it set."""
    names = {"rule": "finding", "agent": "agent", "speaker": "speaker", "quality": "quality", "date_from": "from",
             "date_to": "to", "non_talk_percent": "non-talk ≥ %", "agent_interruptions": "agent interrupts ≥",
             "min_score": "score ≥", "max_score": "score ≤"}
    said = [f"“{form['q'].strip()}”"] if form["q"].strip() else []
    return ", ".join(said + [f"{label} {form[name]}" for name, label in names.items() if form.get(name)]
                     + [f"tag {tag}" for tag in form["tag"]])


def tries(form: Form) -> list[str]:
    """What to try when a search finds nothing: each way it could be widened."""
    out = []
    if form["q"].strip():
        out.append("fewer words, or | between them (refund | return)")
    if form.get("date_from") or form.get("date_to"):
        out.append("a wider range of days")
    if any(form.get(name) for name in ("rule", "tag", "agent", "speaker", "quality", "non_talk_percent",
                                       "agent_interruptions", "min_score", "max_score")):
        out.append("one filter fewer")
    return out or ["words, or a filter alone: a finding, a tag, an agent or a day"]


def focus_view(recording_id: str, t: float, door: Door) -> tuple[dict[str, Any], int]:
    """The recording an audit link opens, logged; or why not (410 erased, 404 unknown)."""
    focus = door.index().recording(recording_id)
    if focus is None:
        missing = door.erased(recording_id)
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
    tag: list[str] = Query([]),  # repeated: calls with every one (the form's empty field adds none)
    sounds_like: str = Query("", pattern=r"^(1|on)?$"),  # a checkbox: "on" (or 1) when ticked, absent when not
    non_talk_percent: str = Query("", pattern=r"^(\d{1,3}(\.\d+)?)?$"),  # a form sends an empty field as ""
    agent_interruptions: str = Query("", pattern=r"^\d{0,6}$"),
    min_score: str = Query("", pattern=r"^(\d{1,3}(\.\d+)?)?$"),
    max_score: str = Query("", pattern=r"^(\d{1,3}(\.\d+)?)?$"),
    after: str = Query("", max_length=MAX_CURSOR_CHARS),
    recording_id: Filter = "",
    t: Second = 0.0,
) -> HTMLResponse:
    """The page: form, hits (or the recording an audit link points at), facets and the player."""
    tags = sorted({t.strip() for t in tag if t.strip()})
    filters = Filters(date_from or None, date_to or None, agent or None, speaker or None, quality or None,
                      float(non_talk_percent) / 100 if non_talk_percent else None,
                      int(agent_interruptions) if agent_interruptions else None, None, rule or None, tuple(tags),
                      bool(sounds_like), float(min_score) if min_score else None,
                      float(max_score) if max_score else None)
    form: Form = {"q": q, **({"sounds_like": "1"} if sounds_like else {}), "date_from": date_from, "date_to": date_to,
                  "agent": agent, "speaker": speaker,
                  "quality": quality, "rule": rule, "non_talk_percent": non_talk_percent,
                  "agent_interruptions": agent_interruptions, "min_score": min_score, "max_score": max_score,
                  "tag": tags}
    view: dict[str, Any] = {"hits": None, "calls": None, "counts": [], "next_after": None, "focus": None,
                            "error": "", "facets": []}
    status = 200
    refusal = checked(q, filters, settings)
    if refusal:
        view["error"], status = refusal, 400
    elif not blank(q):
        found, status = hits_view(q, filters, form, after, door)
        view.update(found)
    elif filters.narrows():
        found, status = calls_view(filters, form, after, door)
        view.update(found)
    elif recording_id:
        found, status = focus_view(recording_id, t, door)
        view.update(found)
    back = form_query(form, after=after)
    return render_page(request, "search.html", status, here="search", form=form, speakers=speakers(settings),
                       rules=sorted({*(rid for rid, r in audit_rules(settings).items() if r.tag is None),
                                     *([rule] if rule else [])}), query=q, t=t,
                       page_size=PAGE_SIZE, clock=clock, marked=highlighted, asked=asked(form), tries=tries(form),
                       call_query=lambda t: urlencode({"q": q, **({"sounds_like": "1"} if sounds_like else {}),
                                                       "t": f"{t:.1f}", "back": back}),
                       export_query=export_query(q, filters),
                       watch_query=form_query({k: v for k, v in form.items() if k in WATCHED and v}),
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
             detail="api, a later page" if after else "api")
    hits = [{**h.to_dict(), "highlight": escaped_highlight(h.highlight, "<em>", "</em>")} for h in result.hits]
    return {"hits": hits, "next_after": result.next_after}


@router.get("/api/counts")
def api_counts(q: CheckedQuery, filters: SearchFilters, door: CallDoor) -> list[dict[str, Any]]:
    """Matching segments and recordings per agent and day."""
    counts = door.index().counts(q, filters)
    door.log("search", query=q, filters=asdict(filters), hits=sum(c.segments for c in counts), detail="api counts")
    return [c.to_dict() for c in counts]
