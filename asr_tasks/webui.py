"""The search page: find what was said, see who said it and when, and hear it from that second.

A FastAPI app over the configured index and object store. It runs on its own
(``asr ui``) or inside Airflow's API server as a plugin (``plugins/search_page.py``),
which adds Airflow's authentication as an app-wide dependency. Every URL in the
page is relative to ``<base href>``, so the same page works at ``/`` and under a
plugin prefix such as ``/search/``.

Audio: a store that can sign an HTTP URL (MinIO) is redirected to; otherwise the
recording is served here with HTTP Range support, which the browser needs to
start playback in the middle of a file.

Everything an uploader controls is treated as hostile: only recordings that the
pipeline decoded are served, with a media type read from the file's first bytes
(never from its name) and as an attachment; every response carries a
Content-Security-Policy (scripts and styles only with the page's own nonce),
``nosniff`` and a frame ban; inputs out of range answer 4xx with a message.
"""

from __future__ import annotations

import getpass
import html
import secrets
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import asdict
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Annotated, Any, Sequence
from urllib.parse import urlencode

from fastapi import Depends, FastAPI, HTTPException, Query, Request, params
from fastapi import Path as PathParam
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response, StreamingResponse
from markupsafe import Markup
from pydantic import BaseModel, ConfigDict
from starlette.background import BackgroundTask
from starlette.middleware.trustedhost import TrustedHostMiddleware

from asr_tasks.access_log import AccessLog
from asr_tasks.call_page import EXPORT_FORMATS, export_transcript, marked, query_terms, timeline_svg, turns
from asr_tasks.artefacts import gated_key_for, redacted_audio_key, unredacted_key_for, version_prefix
from asr_tasks.config import Settings, get_settings
from asr_tasks.erasure import Eraser, select_keys
from asr_tasks.export import FORMATS as EXPORT_HIT_FORMATS
from asr_tasks.export import export
from asr_tasks.holds import HoldError, Holds, Scope
from asr_tasks.index import CursorError, Filters, IndexBackendError, TranscriptIndex, open_index
from asr_tasks.index.query import HL_CLOSE, HL_OPEN, clock
from asr_tasks.ledger import GONE_STATES, open_ledger
from asr_tasks.models import Segment
from asr_tasks.permissions import PERMISSIONS
from asr_tasks.progress import finished_per_hour, first_day, progress
from asr_tasks.storage import ObjectStore, get_json, open_store
from asr_tasks.templates import render

PAGE_SIZE = 20
PRESIGN_EXPIRES = timedelta(minutes=15)
MAX_QUERY_CHARS = 1000
# Audio containers by their first bytes: (offset, magic) -> media type. Anything else is not served.
MAGIC: list[tuple[int, bytes, str]] = [
    (8, b"WAVE", "audio/wav"), (0, b"fLaC", "audio/flac"), (0, b"OggS", "audio/ogg"), (0, b"ID3", "audio/mpeg"),
    (4, b"ftyp", "audio/mp4"), (0, b"#!AMR", "audio/amr"), (0, b"\x1a\x45\xdf\xa3", "audio/webm"),
    (0, b".snd", "audio/basic"), (8, b"AIFF", "audio/aiff"), (0, b"riff", "audio/wav"),  # Wave64
]


def audio_media_type(head: bytes) -> str | None:
    """The media type of an audio file from its first bytes (MPEG audio and ADTS by their frame sync)."""
    for offset, magic, media_type in MAGIC:
        if head[offset : offset + len(magic)] == magic:
            return media_type
    if len(head) >= 2 and head[0] == 0xFF and head[1] & 0xF6 == 0xF0:
        return "audio/aac"  # ADTS: sync word, layer 0
    if len(head) >= 2 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0:
        return "audio/mpeg"  # an MPEG audio frame without an ID3 tag
    return None


def security_headers(nonce: str) -> dict[str, str]:
    """What every response carries: the page may run only its own script and style, and nothing may frame it."""
    return {
        "Content-Security-Policy": (
            f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; media-src 'self' https: "
            "blob:; img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'self'; "
            "frame-ancestors 'none'"
        ),
        "X-Content-Type-Options": "nosniff",
        "X-Frame-Options": "DENY",
        "Referrer-Policy": "no-referrer",
    }


def _marked(highlight: str) -> Markup:
    """Escaped text with the index's highlight markers as <mark>: the transcript can never inject markup."""
    return Markup(html.escape(highlight).replace(HL_OPEN, "<mark>").replace(HL_CLOSE, "</mark>"))


def audio_response(path: Path, media_type: str, resources: ExitStack) -> Response:
    """The file with HTTP Range support (Starlette's), as browsers' media elements ask for it; the store's
    local copy in ``resources`` is released once the response is sent."""
    return FileResponse(path, media_type=media_type, background=BackgroundTask(resources.close))


class HoldRequest(BaseModel):
    """A legal hold placed from the page's API: what it covers, and why."""

    model_config = ConfigDict(extra="forbid")
    scope: Scope
    value: str | None = None
    date_from: str | None = None
    date_to: str | None = None
    why: str


class Reason(BaseModel):
    model_config = ConfigDict(extra="forbid")
    why: str


class EraseRequest(BaseModel):
    """An erasure asked through the page's API: one of key, recording, customer or before, and why."""

    model_config = ConfigDict(extra="forbid")
    key: str | None = None
    recording_id: str | None = None
    customer: str | None = None
    before: str | None = None
    why: str


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


DAY_PATTERN = r"^(\d{4}-\d{2}-\d{2})?$"


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


def query_filters(
    date_from: str | None = None,
    date_to: str | None = None,
    agent: str | None = None,
    speaker: str | None = None,
    quality: str | None = None,
    min_non_talk_share: float | None = Query(None, ge=0.0, le=1.0, allow_inf_nan=False),
    min_agent_interruptions: int | None = Query(None, ge=0),
    min_customer_interruptions: int | None = Query(None, ge=0),
    rule: str | None = None,
) -> Filters:
    """The filters of the JSON API, from the query string (shares 0-1: ``min_non_talk_share=0.3`` is 30 %)."""
    return Filters(date_from, date_to, agent, speaker, quality, min_non_talk_share, min_agent_interruptions,
                   min_customer_interruptions, rule)


Authorize = Callable[[str], Callable[..., str]]


def single_user(permission: str) -> Callable[..., str]:
    """``asr ui`` on loopback: one user, the account that started it, who may do everything."""
    if permission not in PERMISSIONS:
        raise ValueError(f"unknown permission {permission!r}")
    user = getpass.getuser()
    return lambda: user


def create_app(
    settings: Settings | None = None,
    dependencies: Sequence[params.Depends] = (),
    index: TranscriptIndex | None = None,
    store: ObjectStore | None = None,
    allowed_hosts: Sequence[str] | None = None,
    authorize: Authorize = single_user,
) -> FastAPI:
    """The search app; ``dependencies`` guard every route (Airflow passes its authentication).

    ``authorize(permission)`` is a dependency that answers the signed-in user's name, or 403
    when they lack the permission (``permissions.py``); every route asks for its own, and
    what a user searched and played goes to the access log under that name.
    ``allowed_hosts`` (``asr ui``: the loopback names) refuses any other Host header, so a page
    on another site cannot reach this one through DNS rebinding. No schema or docs routes.
    """
    settings = settings or get_settings()
    app = FastAPI(title="Call transcript search", dependencies=list(dependencies), docs_url=None, redoc_url=None,
                  openapi_url=None)
    state: dict[str, Any] = {"index": index, "store": store}
    access = AccessLog(open_ledger(settings.ledger))
    # each route's permission, as a dependency that answers the user's name (defaults, not Annotated aliases:
    # FastAPI reads a route's annotations from the module, and these are built per app)
    reader = Depends(authorize("read"))
    unredacted_reader = Depends(authorize("read_unredacted"))
    auditor = Depends(authorize("access_log"))
    records_officer = Depends(authorize("erase_hold"))

    @app.middleware("http")
    async def headers(request: Request, call_next: Any) -> Response:
        request.state.nonce = secrets.token_urlsafe(16)
        response: Response = await call_next(request)
        for name, value in security_headers(request.state.nonce).items():
            response.headers.setdefault(name, value)
        return response

    if allowed_hosts:
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts))

    def get_index() -> TranscriptIndex:
        if state["index"] is None:
            state["index"] = open_index(settings.index)
        return state["index"]

    def get_store() -> ObjectStore:
        if state["store"] is None:
            state["store"] = open_store(settings.storage)
        return state["store"]

    speakers = sorted({*settings.audio.channel_speakers.values(), settings.audio.mono_speaker})

    def erased(recording_id: str) -> HTTPException | None:
        """410 for a recording that was erased (the ledger's tombstone): it existed, and is gone for good."""
        if open_ledger(settings.ledger).state(recording_id) in GONE_STATES:
            return HTTPException(status_code=410, detail=f"recording {recording_id} was erased")
        return None

    def playable(rec: dict[str, Any], store: ObjectStore) -> tuple[str, str]:
        """Where the recording's audio is played from: the redacted rendition when personal data was said in it."""
        redacted = redacted_audio_key(version_prefix(rec.get("call_date"), rec["recording_id"]))
        if store.exists(settings.storage.artefacts_bucket, redacted):
            return settings.storage.artefacts_bucket, redacted
        gated = gated_key_for(version_prefix(rec.get("call_date"), rec["recording_id"]), str(rec.get("model")))
        if store.exists(settings.storage.artefacts_bucket, gated) and get_json(
                store, settings.storage.artefacts_bucket, gated).get("pii"):
            raise HTTPException(status_code=409, detail=f"recording {rec['recording_id']}: its redacted audio is "
                                                        "not ready; the original is not served")
        return rec["bucket"], rec["key"]

    @app.get("/", response_class=HTMLResponse)
    def page(
        request: Request,
        user: str = reader,
        q: str = "",
        date_from: str = "",
        date_to: str = "",
        agent: str = "",
        speaker: str = "",
        quality: str = "",
        rule: str = "",
        non_talk_percent: str = Query("", pattern=r"^(\d{1,3}(\.\d+)?)?$"),  # a form sends an empty field as ""
        agent_interruptions: str = Query("", pattern=r"^\d{0,6}$"),
        after: str = "",
        recording_id: str = "",
        t: float = Query(0.0, ge=0.0, le=86400.0, allow_inf_nan=False),
    ) -> HTMLResponse:
        """The page: form, hits (or the recording an audit link points at), facets and the player."""
        filters = Filters(date_from or None, date_to or None, agent or None, speaker or None, quality or None,
                          float(non_talk_percent) / 100 if non_talk_percent else None,
                          int(agent_interruptions) if agent_interruptions else None, None, rule or None)
        form = {"q": q, "date_from": date_from, "date_to": date_to, "agent": agent, "speaker": speaker,
                "quality": quality, "rule": rule, "non_talk_percent": non_talk_percent,
                "agent_interruptions": agent_interruptions}
        view: dict[str, Any] = {"hits": None, "counts": [], "next_after": None, "focus": None, "error": "",
                                "facets": {}}
        status = 200
        if len(q) > MAX_QUERY_CHARS:
            view["error"], status = f"the query is longer than {MAX_QUERY_CHARS} characters", 400
        elif q.strip():
            try:
                result = get_index().search_page(q, filters, size=PAGE_SIZE, after=after or None,
                                                 open_tag=HL_OPEN, close_tag=HL_CLOSE)
                counts = [] if after else get_index().counts(q, filters)
                rules = {} if after else get_index().rule_counts(q, filters)
            except (CursorError, ValueError) as exc:
                view["error"], status = str(exc), 400
            except IndexBackendError as exc:
                view["error"], status = str(exc), 503
            else:
                view.update(hits=result.hits, counts=counts, next_after=result.next_after,
                            next_query=urlencode({**form, "after": result.next_after or ""}),
                            facets=facets(form, counts, rules))
                access.append(user, "search", query=q, filters=asdict(filters),
                              hits=sum(c.segments for c in counts) if counts else len(result.hits),
                              detail=f"page after {after}" if after else None)
        elif recording_id:
            view["focus"] = get_index().recording(recording_id)
            if view["focus"] is None:
                gone = erased(recording_id)
                view["error"], status = (gone.detail, 410) if gone else (f"no recording {recording_id}", 404)
            else:
                access.append(user, "read", recording_id=recording_id, detail=f"opened at {t:.1f} s")
        base = request.scope.get("root_path", "").rstrip("/") + "/"
        return HTMLResponse(render("search.html", base=base, form=form, speakers=speakers, query=q, t=t,
                                   page_size=PAGE_SIZE, clock=clock, marked=_marked, nonce=request.state.nonce,
                                   call_query=lambda h: urlencode({"q": q, "t": f"{h.start:.1f}"}),
                                   export_query=urlencode({"q": q, **{k: v for k, v in asdict(filters).items()
                                                                      if v is not None}}), **view),
                            status_code=status)

    @app.get("/api/search")
    def api_search(
        q: Annotated[str, Query(max_length=MAX_QUERY_CHARS)],
        filters: Annotated[Filters, Depends(query_filters)],
        size: int = Query(PAGE_SIZE, ge=1, le=500),
        after: str | None = None,
        user: str = reader,
    ) -> dict[str, Any]:
        """Hits as JSON (highlights as <em>), with the cursor of the next page."""
        try:
            result = get_index().search_page(q, filters, size, after)
        except CursorError as exc:
            raise HTTPException(status_code=400, detail=str(exc)) from exc
        except IndexBackendError as exc:
            raise HTTPException(status_code=503, detail=str(exc)) from exc
        access.append(user, "search", query=q, filters=asdict(filters), hits=len(result.hits),
                      detail=f"api page after {after}" if after else "api")
        return {"hits": [h.to_dict() for h in result.hits], "next_after": result.next_after}

    @app.get("/api/counts")
    def api_counts(q: Annotated[str, Query(max_length=MAX_QUERY_CHARS)],
                   filters: Annotated[Filters, Depends(query_filters)], user: str = reader) -> list[dict[str, Any]]:
        """Matching segments and recordings per agent and day."""
        counts = get_index().counts(q, filters)
        access.append(user, "search", query=q, filters=asdict(filters), hits=sum(c.segments for c in counts),
                      detail="api counts")
        return [c.to_dict() for c in counts]

    @app.get("/audio/{recording_id}", name="audio")
    def audio(recording_id: str, request: Request, user: str = reader,
              t: float = Query(0.0, ge=0.0, le=86400.0, allow_inf_nan=False)) -> Response:
        """The recording as the page plays it: its redacted rendition where personal data was said in it."""
        return serve_audio(recording_id, request, user, t, original=False)

    @app.get("/audio/{recording_id}/original", name="original_audio")
    def original_audio(recording_id: str, request: Request, user: str = unredacted_reader,
                       t: float = Query(0.0, ge=0.0, le=86400.0, allow_inf_nan=False)) -> Response:
        """The recording as it was uploaded, personal data and all: only with the unredacted permission."""
        return serve_audio(recording_id, request, user, t, original=True)

    @app.get("/access-log", response_class=HTMLResponse)
    def access_log_page(request: Request, user: str = auditor, days: int = Query(7, ge=1, le=3660),
                        who: str = "", recording: str = "") -> HTMLResponse:
        """Who searched, played, exported, erased or held what, newest last."""
        since = datetime.now(timezone.utc) - timedelta(days=days)
        entries = access.entries(since=since, user=who or None, recording_id=recording or None, limit=5000)
        base = request.scope.get("root_path", "").rstrip("/") + "/"
        return HTMLResponse(render("access_log.html", base=base, entries=entries, days=days, who=who,
                                   recording=recording, nonce=request.state.nonce))

    exporter = Depends(authorize("export"))

    def call_parts(recording_id: str) -> tuple[dict[str, Any], list[Segment]]:
        rec = get_index().recording(recording_id)
        if rec is None:
            raise erased(recording_id) or HTTPException(status_code=404, detail=f"no recording {recording_id}")
        return rec, get_index().segments(recording_id)

    @app.get("/call/{recording_id}", response_class=HTMLResponse)
    def call(request: Request, recording_id: str, q: str = Query("", max_length=MAX_QUERY_CHARS),
             t: float = Query(0.0, ge=0.0, le=86400.0, allow_inf_nan=False), user: str = reader) -> HTMLResponse:
        """The whole conversation with its audio, findings, analytics and timeline; ``q`` marks a search's terms."""
        rec, segments = call_parts(recording_id)
        findings = sorted((f for f in get_index().findings(rec.get("call_date") or "")
                           if f["recording_id"] == recording_id), key=lambda f: float(f["start"]))
        speakers = [name for _, name in sorted({(s.channel, s.speaker) for s in segments})]
        analytics = rec.get("analytics") or {}
        terms = query_terms(q)

        def flag(seg: Segment) -> str:
            return "; ".join(f"{f['rule_id']}: {f['description']}" for f in findings
                             if float(f["start"]) < seg.end and seg.start < float(f["end"]) and f["matched_text"])

        languages = {s.language for s in segments if s.language} or {rec.get("language") or "en"}
        access.append(user, "read", recording_id=recording_id, detail=f"call page at {t:.1f} s" + (
            f", from a search for {q!r}" if q else ""))
        base = request.scope.get("root_path", "").rstrip("/") + "/"
        return HTMLResponse(render(
            "call.html", base=base, rec=rec, turns=turns(segments), findings=findings, analytics=analytics,
            timeline=timeline_svg(float(rec.get("duration") or 0.0), analytics, findings, speakers),
            channels=len(analytics.get("speech") or {}) or len(speakers), failures=[
                f for f in (rec.get("quality_failures") or "").split(",") if f],
            terms=terms, mark=lambda text: marked(text, terms), flag=flag, clock=clock, t=t,
            formats=EXPORT_FORMATS, lang=languages.pop() if len(languages) == 1 else "en", nonce=request.state.nonce))

    @app.get("/api/export")
    def export_hits(q: Annotated[str, Query(max_length=MAX_QUERY_CHARS)],
                    filters: Annotated[Filters, Depends(query_filters)], format: str = "csv",
                    user: str = exporter) -> StreamingResponse:
        """Every hit of the search (all pages), streamed as CSV or JSON."""
        if format not in EXPORT_HIT_FORMATS:
            raise HTTPException(status_code=400, detail=f"format {format!r}: csv or json")
        access.append(user, "export", query=q, filters=asdict(filters), detail=f"search results as {format}")
        media = "text/csv" if format == "csv" else "application/json"
        return StreamingResponse(export(get_index(), q, filters, format), media_type=f"{media}; charset=utf-8",
                                 headers={"Content-Disposition": f'attachment; filename="search.{format}"'})

    @app.get("/call/{recording_id}/transcript.{fmt}")
    def transcript_export(recording_id: str, fmt: str, user: str = exporter) -> Response:
        """The call's transcript as TXT, SRT, WebVTT or JSON, as a download."""
        if fmt not in EXPORT_FORMATS:
            raise HTTPException(status_code=404, detail=f"no transcript format {fmt!r} ({', '.join(EXPORT_FORMATS)})")
        rec, segments = call_parts(recording_id)
        access.append(user, "export", recording_id=recording_id, detail=f"transcript.{fmt}")
        media = {"txt": "text/plain", "srt": "application/x-subrip", "vtt": "text/vtt", "json": "application/json"}
        return Response(export_transcript(fmt, rec, segments), media_type=f"{media[fmt]}; charset=utf-8",
                        headers={"Content-Disposition": f'attachment; filename="{recording_id}.{fmt}"'})

    @app.get("/progress", response_class=HTMLResponse)
    def progress_page(request: Request, date_from: str = Query("", pattern=DAY_PATTERN),
                      date_to: str = Query("", pattern=DAY_PATTERN), user: str = reader) -> HTMLResponse:
        """The operator's view: a bar per year and month, finished audio per hour, failures by reason."""
        ledger = open_ledger(settings.ledger)
        now = datetime.now(timezone.utc)
        last = date_to or now.date().isoformat()
        report = progress(ledger, date_from or first_day(ledger) or last, last, "month", now)
        years: dict[str, list[Any]] = {}
        for p in report.periods:
            years.setdefault(p.period[:4], []).append(p)
        rows = [(year, months, sum(p.share_done * p.recordings for p in months) / max(1, sum(p.recordings
                                                                                          for p in months)),
                 sum(p.recordings for p in months)) for year, months in sorted(years.items())]
        base = request.scope.get("root_path", "").rstrip("/") + "/"
        return HTMLResponse(render("progress.html", base=base, report=report, years=rows, nonce=request.state.nonce,
                                   chart=throughput_svg(finished_per_hour(ledger, now)),
                                   day_of=lambda key: "-".join(key.split("/")[-4:-1])))

    @app.get("/progress/day/{day}", response_class=HTMLResponse)
    def progress_day(request: Request, day: str = PathParam(pattern=DAY_PATTERN), user: str = reader) -> HTMLResponse:
        """One day's recordings from the ledger, as ``asr status`` prints them."""
        rows = [r for r in open_ledger(settings.ledger).rows(day) if r["state"] != "superseded"]
        counts: dict[str, int] = {}
        for r in rows:
            counts[r["state"]] = counts.get(r["state"], 0) + 1
        base = request.scope.get("root_path", "").rstrip("/") + "/"
        return HTMLResponse(render("progress_day.html", base=base, day=day, rows=rows, counts=counts,
                                   nonce=request.state.nonce))

    @app.get("/api/recordings/{recording_id}/unredacted")
    def unredacted(recording_id: str, user: str = unredacted_reader) -> dict[str, Any]:
        """The transcript as it was before masking, where ``keep_unredacted`` kept it: never indexed, read here only."""
        rec = get_index().recording(recording_id)
        if rec is None:
            raise erased(recording_id) or HTTPException(status_code=404, detail=f"no recording {recording_id}")
        key = unredacted_key_for(version_prefix(rec.get("call_date"), recording_id), str(rec.get("model")))
        if not get_store().exists(settings.storage.artefacts_bucket, key):
            raise HTTPException(status_code=404, detail=f"recording {recording_id}: no unredacted transcript is "
                                                        "kept (keep_unredacted)")
        access.append(user, "read", recording_id=recording_id, detail="unredacted transcript")
        return get_json(get_store(), settings.storage.artefacts_bucket, key)

    @app.get("/api/holds")
    def list_holds(include_released: bool = False, user: str = records_officer) -> list[dict[str, Any]]:
        return [h.to_dict() for h in holds().listed(include_released=include_released)]

    @app.post("/api/holds", status_code=201)
    def place_hold(body: HoldRequest, user: str = records_officer) -> dict[str, Any]:
        """A legal hold: nothing erases what it covers until it is released."""
        try:
            return holds().place(body.scope, body.why, user, value=body.value, date_from=body.date_from,
                                 date_to=body.date_to).to_dict()
        except HoldError as exc:
            raise HTTPException(status_code=400, detail=str(exc)) from exc

    @app.post("/api/holds/{hold_id}/release")
    def release_hold(hold_id: int, body: Reason, user: str = records_officer) -> dict[str, Any]:
        try:
            return holds().release(hold_id, body.why, user).to_dict()
        except HoldError as exc:
            raise HTTPException(status_code=400, detail=str(exc)) from exc

    @app.post("/api/erase")
    def erase(body: EraseRequest, user: str = records_officer) -> dict[str, Any]:
        """Erase every version of the chosen keys (``asr erase``); held keys are left and their holds named."""
        ledger = open_ledger(settings.ledger)
        try:
            keys = select_keys(ledger, key=body.key, recording_id=body.recording_id, customer=body.customer,
                               before=body.before)
            return Eraser(settings, ledger, get_store(), get_index(), access).erase(keys, body.why, user).to_dict()
        except ValueError as exc:
            raise HTTPException(status_code=400, detail=str(exc)) from exc

    def holds() -> Holds:
        return Holds(open_ledger(settings.ledger), access)

    def serve_audio(recording_id: str, request: Request, user: str, t: float, original: bool) -> Response:
        """A signed store URL when there is one, else the file served here; the first request of a play is logged."""
        rec = get_index().recording(recording_id)
        if rec is None:
            raise erased(recording_id) or HTTPException(status_code=404, detail=f"no recording {recording_id}")
        if rec.get("state") == "quarantined":
            raise HTTPException(status_code=404, detail=f"recording {recording_id} is quarantined: not served")
        store = get_store()
        bucket, key = (rec["bucket"], rec["key"]) if original else playable(rec, store)
        if request.headers.get("range", "bytes=0-").startswith("bytes=0-"):  # not the browser's later ranges
            access.append(user, "play", recording_id=recording_id,
                          detail=f"{'original' if original else 'redacted' if key != rec['key'] else 'as uploaded'}"
                                 f" from {t:.1f} s")
        try:
            media_type = audio_media_type(store.head(bucket, key, 16))
        except FileNotFoundError as exc:
            raise HTTPException(status_code=404, detail=f"recording {recording_id}: its audio is not stored") from exc
        if media_type is None:
            raise HTTPException(status_code=415, detail=f"recording {recording_id}: not an audio file by its content")
        disposition = f'attachment; filename="{recording_id}"'
        url = store.presigned_url(bucket, key, PRESIGN_EXPIRES,
                                  {"Content-Type": media_type, "Content-Disposition": disposition})
        if url and url.startswith(("http://", "https://")):
            return RedirectResponse(url, status_code=307)
        resources = ExitStack()
        try:
            path = resources.enter_context(store.local_copy(bucket, key))
        except FileNotFoundError as exc:
            resources.close()
            raise HTTPException(status_code=404, detail=str(exc)) from exc
        response = audio_response(path, media_type, resources)
        response.headers["Content-Disposition"] = disposition
        return response

    return app
