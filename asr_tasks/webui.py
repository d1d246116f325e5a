"""The search page: find what was said, see who said it and when, and hear it from that second.

A FastAPI app over the configured index and object store. It runs on its own
(``asr ui``) or inside Airflow's API server as a plugin (``plugins/search_page.py``),
which adds Airflow's authentication as an app-wide dependency. Every URL in the
page is relative to ``<base href>``, so the same page works at ``/`` and under a
plugin prefix such as ``/search/``.

Audio: a store that can sign an HTTP URL (MinIO) is redirected to; otherwise the
recording is served here with HTTP Range support, which the browser needs to
start playback in the middle of a file.
"""

from __future__ import annotations

import html
import mimetypes
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Sequence
from urllib.parse import urlencode

from fastapi import Depends, FastAPI, HTTPException, Query, Request, params
from markupsafe import Markup
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from starlette.background import BackgroundTask

from asr_tasks.config import Settings, get_settings
from asr_tasks.index import CursorError, Filters, IndexBackendError, TranscriptIndex, open_index
from asr_tasks.index.query import HL_CLOSE, HL_OPEN, clock
from asr_tasks.storage import ObjectStore, open_store
from asr_tasks.templates import render

PAGE_SIZE = 20
PRESIGN_EXPIRES = timedelta(hours=1)


def _marked(highlight: str) -> Markup:
    """Escaped text with the index's highlight markers as <mark>: the transcript can never inject markup."""
    return Markup(html.escape(highlight).replace(HL_OPEN, "<mark>").replace(HL_CLOSE, "</mark>"))


def audio_response(path: Path, media_type: str, resources: ExitStack) -> Response:
    """The file with HTTP Range support (Starlette's), as browsers' media elements ask for it; the store's
    local copy in ``resources`` is released once the response is sent."""
    return FileResponse(path, media_type=media_type, background=BackgroundTask(resources.close))


def query_filters(
    date_from: str | None = None,
    date_to: str | None = None,
    agent: str | None = None,
    speaker: str | None = None,
    quality: str | None = None,
) -> Filters:
    """The filters of the JSON API, from the query string."""
    return Filters(date_from, date_to, agent, speaker, quality)


def create_app(
    settings: Settings | None = None,
    dependencies: Sequence[params.Depends] = (),
    index: TranscriptIndex | None = None,
    store: ObjectStore | None = None,
) -> FastAPI:
    """The search app; ``dependencies`` guard every route (Airflow passes its authentication)."""
    settings = settings or get_settings()
    app = FastAPI(title="Call transcript search", dependencies=list(dependencies), docs_url=None, redoc_url=None)
    state: dict[str, Any] = {"index": index, "store": store}

    def get_index() -> TranscriptIndex:
        if state["index"] is None:
            state["index"] = open_index(settings.index)
        return state["index"]

    def get_store() -> ObjectStore:
        if state["store"] is None:
            state["store"] = open_store(settings.storage)
        return state["store"]

    speakers = sorted({*settings.audio.channel_speakers.values(), settings.audio.mono_speaker})

    @app.get("/", response_class=HTMLResponse)
    def page(
        request: Request,
        q: str = "",
        date_from: str = "",
        date_to: str = "",
        agent: str = "",
        speaker: str = "",
        quality: str = "",
        after: str = "",
        recording_id: str = "",
        t: float = Query(0.0, ge=0.0),
    ) -> HTMLResponse:
        """The page: form, hits (or the recording an audit link points at), counts and the player."""
        filters = Filters(date_from or None, date_to or None, agent or None, speaker or None, quality or None)
        form = {"q": q, "date_from": date_from, "date_to": date_to, "agent": agent, "speaker": speaker,
                "quality": quality}
        view: dict[str, Any] = {"hits": None, "counts": [], "next_after": None, "focus": None, "error": ""}
        if q.strip():
            try:
                result = get_index().search_page(q, filters, size=PAGE_SIZE, after=after or None,
                                                 open_tag=HL_OPEN, close_tag=HL_CLOSE)
                counts = [] if after else get_index().counts(q, filters)
            except (CursorError, IndexBackendError) as exc:
                view["error"] = str(exc)
            else:
                view.update(hits=result.hits, counts=counts, next_after=result.next_after,
                            next_query=urlencode({**form, "after": result.next_after or ""}))
        elif recording_id:
            view["focus"] = get_index().recording(recording_id)
            if view["focus"] is None:
                view["error"] = f"no recording {recording_id}"
        base = request.scope.get("root_path", "").rstrip("/") + "/"
        return HTMLResponse(render("search.html", base=base, form=form, speakers=speakers, query=q, t=t,
                                   page_size=PAGE_SIZE, clock=clock, marked=_marked, **view))

    @app.get("/api/search")
    def api_search(
        q: str,
        filters: Annotated[Filters, Depends(query_filters)],
        size: int = Query(PAGE_SIZE, ge=1, le=500),
        after: str | None = None,
    ) -> dict[str, Any]:
        """Hits as JSON (highlights as <em>), with the cursor of the next page."""
        try:
            result = get_index().search_page(q, filters, size, after)
        except CursorError as exc:
            raise HTTPException(status_code=400, detail=str(exc)) from exc
        except IndexBackendError as exc:
            raise HTTPException(status_code=503, detail=str(exc)) from exc
        return {"hits": [h.to_dict() for h in result.hits], "next_after": result.next_after}

    @app.get("/api/counts")
    def api_counts(q: str, filters: Annotated[Filters, Depends(query_filters)]) -> list[dict[str, Any]]:
        """Matching segments and recordings per agent and day."""
        return [c.to_dict() for c in get_index().counts(q, filters)]

    @app.get("/audio/{recording_id}", name="audio")
    def audio(recording_id: str, request: Request) -> Response:
        """The recording's audio: a signed store URL when there is one, else served here with Range."""
        rec = get_index().recording(recording_id)
        if rec is None:
            raise HTTPException(status_code=404, detail=f"no recording {recording_id}")
        store = get_store()
        url = store.presigned_url(rec["bucket"], rec["key"], PRESIGN_EXPIRES)
        if url and url.startswith(("http://", "https://")):
            return RedirectResponse(url, status_code=307)
        media_type = mimetypes.guess_type(rec["key"])[0] or "application/octet-stream"
        resources = ExitStack()
        try:
            path = resources.enter_context(store.local_copy(rec["bucket"], rec["key"]))
        except FileNotFoundError as exc:
            resources.close()
            raise HTTPException(status_code=404, detail=str(exc)) from exc
        return audio_response(path, media_type, resources)

    return app
