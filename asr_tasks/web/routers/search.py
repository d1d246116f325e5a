"""The search page and its JSON API: hits with their highlights, facets and counts, the calls a search by
filters alone lists (a finding rule, a tag, an agent, a day: no words), and the recording an audit link points
at. Every search and every recording opened goes to the access log (``door.py``).

A search travels in a POST's body, never in a URL (a server's request log, a browser's history and a proxy keep
URLs): the page's form, its next page, its facets and its exports post the search again from a hidden form
(``search_fields``, ``export_fields``), and the API takes it as JSON or as a form's fields (``Searched``)."""

from __future__ import annotations

import html
from dataclasses import asdict
from typing import Annotated, Any, Callable, Sequence
from urllib.parse import parse_qsl, urlencode

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse
from markupsafe import Markup
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict, Field, ValidationError

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
from asr_tasks.inputs import DEFAULT_PAGE_SIZE, MAX_TEXT_CHARS, InputError, page_size, speaker_names
from asr_tasks.web.deps import AppSettings, Filter, Searched, Second, posted, refused
from asr_tasks.web.door import CallDoor, Door
from asr_tasks.web.pages import render_page

PERMISSION = "read"
PAGE_SIZE = 20

MAX_CURSOR_CHARS = 512  # a page cursor is a few sort values; anything longer is not one
MAX_NARROW_CHARS = 2000  # a facet's narrowing: a few fields of the form
PERCENT = r"^(\d{1,3}(\.\d+)?)?$"  # a form sends an empty field as ""
router = APIRouter()


class SearchForm(BaseModel):
    """The page's search form as the browser posts it (never in the URL: a server's request log prints the query
    string), each field bounded; what cannot be answered as meant the page says (``checked``). ``after`` is the
    page of hits asked for, and ``narrow`` a facet's change to the search: the fields it sets, as a query string."""

    model_config = ConfigDict(extra="forbid")
    q: str = ""
    sounds_like: str = Field(default="", pattern=r"^(1|on|true)?$")  # a checkbox: "1" when ticked, absent when not
    date_from: str = Field(default="", max_length=MAX_TEXT_CHARS)
    date_to: str = Field(default="", max_length=MAX_TEXT_CHARS)
    agent: str = Field(default="", max_length=MAX_TEXT_CHARS)
    speaker: str = Field(default="", max_length=MAX_TEXT_CHARS)
    quality: str = Field(default="", max_length=MAX_TEXT_CHARS)
    rule: str = Field(default="", max_length=MAX_TEXT_CHARS)
    tag: list[str] = []  # repeated: calls with every one (the form's empty field adds none)
    non_talk_percent: str = Field(default="", pattern=PERCENT)
    agent_interruptions: str = Field(default="", pattern=r"^\d{0,6}$")
    min_score: str = Field(default="", pattern=PERCENT)
    max_score: str = Field(default="", pattern=PERCENT)
    after: str = Field(default="", max_length=MAX_CURSOR_CHARS)
    narrow: str = Field(default="", max_length=MAX_NARROW_CHARS)

    def narrowed(self) -> SearchForm:
        """The search with a facet's change made (its first page); a field the form does not have is ignored, and
        a value its field refuses is refused as a posted one is (422)."""
        if not self.narrow:
            return self
        change: dict[str, Any] = {}
        for name, value in parse_qsl(self.narrow, keep_blank_values=True):
            if name == "tag":
                change.setdefault("tag", []).append(value)
            elif name in NARROWS:
                change[name] = value
        try:
            return SearchForm.model_validate({**self.model_dump(), **change, "after": "", "narrow": ""})
        except ValidationError as exc:
            raise RequestValidationError(exc.errors(include_url=False, include_context=False)) from exc

    def filters(self) -> Filters:
        """The filters as the index takes them (the form's percent a share, its empty fields none)."""
        return Filters(self.date_from or None, self.date_to or None, self.agent or None, self.speaker or None,
                       self.quality or None, float(self.non_talk_percent) / 100 if self.non_talk_percent else None,
                       int(self.agent_interruptions) if self.agent_interruptions else None, None, self.rule or None,
                       tuple(sorted({t.strip() for t in self.tag if t.strip()})), bool(self.sounds_like),
                       float(self.min_score) if self.min_score else None,
                       float(self.max_score) if self.max_score else None)

    def shown(self) -> Form:
        """The search as the page shows it in its form: each field's text, the tags asked for as a list."""
        return {**self.model_dump(exclude={"after", "narrow", "tag"}),
                "sounds_like": "1" if self.sounds_like else "", "tag": sorted({t.strip() for t in self.tag
                                                                                if t.strip()})}


NARROWS = set(SearchForm.model_fields) - {"q", "after", "narrow"}  # what a facet may change: the filters
PostedSearch = Annotated[SearchForm, Depends(posted(SearchForm))]

# The page's form as its fields came: text for each, and the list of tags asked for under "tag".
Form = dict[str, Any]


def fields(form: Form, **change: Any) -> list[tuple[str, str]]:
    """The search (changed as asked) as the fields of a form that posts it again, each tag a field of its own and
    an empty field left out."""
    out: list[tuple[str, str]] = []
    for name, value in {**form, **change}.items():
        out += [(name, str(v)) for v in (value if isinstance(value, list) else [value]) if v not in ("", None)]
    return out


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
    finding rule, per tag and per band of score, each titled with what it counts and each entry with the change
    that narrows the search to it (``SearchForm.narrow``; a tag is added to those the search already asks for)."""
    def narrowed(**change: Any) -> str:
        return urlencode(change, doseq=True)

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


def export_fields(q: str, filters: Filters) -> list[tuple[str, str]]:
    """The search as the export API's body takes it (``Searched``), as a form's fields: its filters by their names
    there, each tag a field of its own."""
    named = {k: v for k, v in asdict(filters).items() if v is not None and v is not False and k not in ("tags",
                                                                                                     "agents")}
    return [("q", q), *((k, "true" if v is True else str(v)) for k, v in named.items()),
            *(("tag", t) for t in filters.tags)]


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
                "facets": facets(form, counts, rules, tags, scores)}

    view, status = answered(ask)
    if status == 200:
        door.log("search", query=q, filters=asdict(filters), hits=sum(c.segments for c in view["counts"])
                 if view["counts"] else len(view["hits"]), detail="a later page" if after else None,
                 subjects=[h.recording_id for h in view["hits"]])
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
                "facets": facets(form, counts, rules, tags, scores, "calls")}

    view, status = answered(ask)
    if status == 200:
        door.log("search", query="", filters=asdict(filters), hits=sum(c.recordings for c in view["counts"])
                 if view["counts"] else len(view["calls"]), detail="calls" + (", a later page" if after else ""),
                 subjects=[c["recording_id"] for c in view["calls"]])
    return view, status


def asked_in_words(form: Form) -> str:
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


def search_page(request: Request, settings: Settings, door: Door, asked: SearchForm, recording_id: str = "",
                t: float = 0.0) -> HTMLResponse:
    """The page: form, hits (or the recording an audit link points at), facets and the player."""
    asked = asked.narrowed()
    form, filters, q, after = asked.shown(), asked.filters(), asked.q, asked.after
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
    return render_page(request, "search.html", status, here="search", form=form, speakers=speakers(settings),
                       rules=sorted({*(rid for rid, r in audit_rules(settings).items() if r.tag is None),
                                     *([asked.rule] if asked.rule else [])}), query=q, t=t,
                       page_size=PAGE_SIZE, clock=clock, marked=highlighted, asked=asked_in_words(form),
                       tries=tries(form), search_fields=fields(form), page_after=after,
                       export_fields=export_fields(q, filters), **view)


@router.get("/", response_class=HTMLResponse)
def page(request: Request, settings: AppSettings, door: CallDoor, recording_id: Filter = "",
         t: Second = 0.0) -> HTMLResponse:
    """The page with its empty form, or the recording an audit link points at (``recording_id``, at second
    ``t``); a search is posted (``searched``)."""
    return search_page(request, settings, door, SearchForm(), recording_id, t)


@router.post("/", response_class=HTMLResponse)
def searched(request: Request, settings: AppSettings, door: CallDoor, asked: PostedSearch) -> HTMLResponse:
    """The search the form posted: its hits (or its calls, by filters alone), a page at a time, with facets."""
    return search_page(request, settings, door, asked)


class ApiSearch(Searched):
    """A search of the JSON API: its words and filters, a page of ``size`` hits after the cursor ``after``."""

    size: int = DEFAULT_PAGE_SIZE
    after: str | None = Field(default=None, max_length=MAX_CURSOR_CHARS)

    def page_size(self) -> int:
        """Hits per page, bounded as ``asr search --limit`` is."""
        try:
            return page_size(self.size, "size")
        except InputError as exc:
            raise refused(exc) from exc


@router.post("/api/search")
def api_search(door: CallDoor, settings: AppSettings,
               asked: Annotated[ApiSearch, Depends(posted(ApiSearch))]) -> dict[str, Any]:
    """Hits as JSON (highlights escaped, their matches in <em>), with the cursor of the next page."""
    q, filters, size, after = asked.query(), asked.filters(settings), asked.page_size(), asked.after
    try:
        result = door.index().search_page(q, filters, size, after, open_tag=HL_OPEN, close_tag=HL_CLOSE)
    except CursorError as exc:
        raise HTTPException(status_code=400, detail=str(exc)) from exc
    except IndexBackendError as exc:
        raise HTTPException(status_code=503, detail=str(exc)) from exc
    door.log("search", query=q, filters=asdict(filters), hits=len(result.hits),
             detail="api, a later page" if after else "api", subjects=[h.recording_id for h in result.hits])
    hits = [{**h.to_dict(), "highlight": escaped_highlight(h.highlight, "<em>", "</em>")} for h in result.hits]
    return {"hits": hits, "next_after": result.next_after}


@router.post("/api/counts")
def api_counts(door: CallDoor, settings: AppSettings,
               asked: Annotated[Searched, Depends(posted(Searched))]) -> list[dict[str, Any]]:
    """Matching segments and recordings per agent and day."""
    q, filters = asked.query(), asked.filters(settings)
    counts = door.index().counts(q, filters)
    door.log("search", query=q, filters=asdict(filters), hits=sum(c.segments for c in counts), detail="api counts")
    return [c.to_dict() for c in counts]
