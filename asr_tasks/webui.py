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
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from starlette.background import BackgroundTask

from asr_tasks.config import Settings, get_settings
from asr_tasks.index import AgentDayCount, CursorError, Filters, IndexBackendError, TranscriptIndex, open_index
from asr_tasks.index.query import HL_CLOSE, HL_OPEN, clock
from asr_tasks.models import SearchHit
from asr_tasks.storage import ObjectStore, open_store

PAGE_SIZE = 20
PRESIGN_EXPIRES = timedelta(hours=1)


def _marked(highlight: str) -> str:
    """Escaped text with the index's highlight markers as <mark>: the transcript can never inject markup."""
    return html.escape(highlight).replace(HL_OPEN, "<mark>").replace(HL_CLOSE, "</mark>")


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
            state["index"] = open_index(settings)
        return state["index"]

    def get_store() -> ObjectStore:
        if state["store"] is None:
            state["store"] = open_store(settings)
        return state["store"]

    speakers = sorted({*settings.channel_speakers.values(), settings.mono_speaker})

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
        body, error = "", ""
        if q.strip():
            try:
                result = get_index().search_page(q, filters, size=PAGE_SIZE, after=after or None,
                                                 open_tag=HL_OPEN, close_tag=HL_CLOSE)
            except (CursorError, IndexBackendError) as exc:
                error = str(exc)
            else:
                body = _hits_html(result.hits, q)
                if result.next_after:
                    more = html.escape(urlencode({**form, "after": result.next_after}))
                    body += f'<p class="more"><a href="?{more}">Next {PAGE_SIZE} hits</a></p>'
                if not after:
                    body = _counts_html(get_index().counts(q, filters)) + body
        elif recording_id:
            rec = get_index().recording(recording_id)
            if rec is None:
                error = f"no recording {recording_id}"
            else:
                body = _focus_html(rec, t)
        return HTMLResponse(_page_html(request, form, speakers, body, error))

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


def _hits_html(hits: list[SearchHit], query: str) -> str:
    if not hits:
        return f'<p class="empty">No hits for {html.escape(query)}.</p>'
    rows = []
    for h in hits:
        label = f"{h.key} at {clock(h.start)}"
        rows.append(
            f'<li class="hit" tabindex="0" data-recording="{html.escape(h.recording_id)}" data-start="{h.start:.3f}"'
            f' data-label="{html.escape(label)}">'
            f'<span class="time">▶ {clock(h.start)}–{clock(h.end)}</span>'
            f' <span class="speaker">{html.escape(h.speaker)}</span>'
            f' <span class="meta">{html.escape(h.call_date or "")} · agent {html.escape(h.agent_id or "-")}'
            f' · {html.escape(h.key)}</span>'
            f'<div class="text">{_marked(h.highlight)}</div></li>'
        )
    return '<ol class="hits">' + "".join(rows) + "</ol>"


def _focus_html(rec: dict[str, Any], t: float) -> str:
    """The recording an audit link points at, played from second ``t`` when the page opens."""
    label = f"{rec['key']} at {clock(t)}"
    return (f'<ol class="hits"><li class="hit" id="focus" tabindex="0"'
            f' data-recording="{html.escape(rec["recording_id"])}" data-start="{t:.3f}" data-label="{html.escape(label)}">'
            f'<span class="time">▶ {clock(t)}</span> <span class="meta">{html.escape(rec.get("call_date") or "")}'
            f' · agent {html.escape(rec.get("agent_id") or "-")} · {html.escape(rec["key"])}</span></li></ol>')


def _counts_html(counts: list[AgentDayCount]) -> str:
    if not counts:
        return ""
    rows = "".join(
        f"<tr><td>{html.escape(c.agent_id or '-')}</td><td>{html.escape(c.call_date or '-')}</td>"
        f"<td>{c.segments}</td><td>{c.recordings}</td></tr>"
        for c in counts
    )
    return ('<details class="counts"><summary>Hits per agent and day</summary><table><thead><tr><th>Agent</th>'
            f"<th>Day</th><th>Segments</th><th>Calls</th></tr></thead><tbody>{rows}</tbody></table></details>")


def _options(values: Sequence[str], chosen: str, any_label: str) -> str:
    out = [f'<option value="">{any_label}</option>']
    for v in values:
        selected = " selected" if v == chosen else ""
        out.append(f'<option value="{html.escape(v)}"{selected}>{html.escape(v)}</option>')
    return "".join(out)


def _page_html(request: Request, form: dict[str, str], speakers: list[str], body: str, error: str) -> str:
    base = request.scope.get("root_path", "").rstrip("/") + "/"
    value = {k: html.escape(v, quote=True) for k, v in form.items()}
    notice = f'<p class="error">{html.escape(error)}</p>' if error else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><base href="{html.escape(base)}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Call transcript search</title>
<style>
body {{ font: 15px/1.45 system-ui, sans-serif; margin: 0; color: #1d2433; background: #f6f7f9; }}
header {{ position: sticky; top: 0; background: #fff; border-bottom: 1px solid #d8dce3; padding: .8rem 1.2rem; }}
h1 {{ font-size: 1.1rem; margin: 0 0 .5rem; }}
form {{ display: flex; flex-wrap: wrap; gap: .5rem; align-items: end; }}
label {{ display: flex; flex-direction: column; font-size: .75rem; color: #5b6475; }}
input, select, button {{ font: inherit; padding: .3rem .45rem; border: 1px solid #b9c0cc; border-radius: 4px; }}
input[name=q] {{ width: 22rem; }}
button {{ background: #1f5fbf; color: #fff; border-color: #1f5fbf; cursor: pointer; }}
.player {{ display: flex; gap: .8rem; align-items: center; margin-top: .6rem; }}
.player audio {{ width: 28rem; }}
#now {{ font-size: .85rem; color: #5b6475; }}
main {{ padding: .8rem 1.2rem; }}
ol.hits {{ list-style: none; padding: 0; margin: 0; }}
.hit {{ background: #fff; border: 1px solid #d8dce3; border-radius: 6px; padding: .55rem .8rem; margin-bottom: .5rem; cursor: pointer; }}
.hit:hover, .hit:focus {{ border-color: #1f5fbf; outline: none; }}
.hit.playing {{ border-color: #1f5fbf; box-shadow: 0 0 0 2px #c9dbf6; }}
.time {{ font-variant-numeric: tabular-nums; color: #1f5fbf; font-weight: 600; }}
.speaker {{ background: #eef1f6; border-radius: 3px; padding: 0 .35rem; font-size: .8rem; }}
.meta {{ color: #5b6475; font-size: .8rem; }}
.text {{ margin-top: .25rem; }}
mark {{ background: #ffe28a; padding: 0 .1rem; }}
.error {{ color: #a11; }}
.counts table {{ border-collapse: collapse; margin: .4rem 0 .8rem; background: #fff; }}
.counts td, .counts th {{ border: 1px solid #d8dce3; padding: .2rem .6rem; text-align: left; }}
</style></head>
<body>
<header>
<h1>Call transcript search</h1>
<form method="get" action="./" id="search">
<label>Words, "phrases", a | b, -not<input name="q" value="{value['q']}" autofocus placeholder='保证收益 | "guaranteed return"'></label>
<label>From<input type="date" name="date_from" value="{value['date_from']}"></label>
<label>To<input type="date" name="date_to" value="{value['date_to']}"></label>
<label>Agent<input name="agent" value="{value['agent']}" size="9"></label>
<label>Speaker<select name="speaker">{_options(speakers, form['speaker'], 'any')}</select></label>
<label>Quality<select name="quality">{_options(['pass', 'needs_review'], form['quality'], 'any')}</select></label>
<button type="submit">Search</button>
</form>
<div class="player"><audio id="player" controls preload="none"></audio><span id="now">Click a hit to play it from its first second.</span></div>
</header>
<main>{notice}{body}</main>
<script>
const player = document.getElementById("player");
function play(hit) {{
  const start = parseFloat(hit.dataset.start);
  document.querySelectorAll(".hit.playing").forEach(h => h.classList.remove("playing"));
  hit.classList.add("playing");
  document.getElementById("now").textContent = hit.dataset.label;
  const seek = () => {{ player.currentTime = start; player.play().catch(() => {{}}); }};
  if (player.dataset.recording === hit.dataset.recording && player.readyState >= 1) {{ seek(); return; }}
  player.dataset.recording = hit.dataset.recording;
  player.addEventListener("loadedmetadata", seek, {{once: true}});
  player.src = "audio/" + encodeURIComponent(hit.dataset.recording);
  player.load();
}}
document.querySelectorAll(".hit").forEach(hit => {{
  hit.addEventListener("click", () => play(hit));
  hit.addEventListener("keydown", e => {{ if (e.key === "Enter" || e.key === " ") {{ e.preventDefault(); play(hit); }} }});
}});
const focus = document.getElementById("focus");
if (focus) play(focus);
</script>
</body></html>"""
