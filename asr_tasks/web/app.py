"""The search page: find what was said, see who said it and when, and hear it from that second.

A FastAPI app over the configured index and object store. It runs on its own
(``asr ui``) or inside Airflow's API server as a plugin (``plugins/search_page.py``),
which adds Airflow's authentication as an app-wide dependency. Every URL in the
page is relative to ``<base href>``, so the same page works at ``/`` and under a
plugin prefix such as ``/search/``.

The routes live in ``routers/``, one router per area and permission; what they
share from the app (settings, index, store, ledger, the signed-in user) is in
``deps.py``, and every HTML page is rendered by ``pages.py``.

Everything an uploader controls is treated as hostile (``routers/audio.py``);
every response carries a Content-Security-Policy (scripts and styles only with
the page's own nonce), ``nosniff`` and a frame ban; inputs out of range answer
4xx with a message.

Another site's page cannot act in a user's name (``same_site``): every route that
changes something or is posted to, and every route of a router that downloads a
call's content (``DOWNLOADS``), refuses a cross-site request with 403 before
anything is read or logged. ``asr ui`` answers only whoever holds the token it
printed (``only_the_holder``), as notebook servers do.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from typing import Sequence
from urllib.parse import urlencode, urlsplit

from fastapi import Depends, FastAPI, HTTPException, Request, params
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.middleware.trustedhost import TrustedHostMiddleware

from asr_tasks.config import Settings, get_settings
from asr_tasks.index.base import TranscriptIndex
from asr_tasks.intake.stores import ObjectStore
from asr_tasks.records.access_log import open_access_log
from asr_tasks.records.permissions import PERMISSIONS
from asr_tasks.web.deps import Authorize, guard, single_user
from asr_tasks.web.pages import permission_probe, reader_guard
from asr_tasks.web.routers import (
    access_log,
    audio,
    call,
    exports,
    production,
    progress,
    records,
    reports,
    reviews,
    scores,
    search,
    trends,
    unredacted,
    watches,
)

# Each router's routes ask for its PERMISSION.
ROUTERS = (search, audio, unredacted, access_log, call, exports, production, progress, records, reports, watches,
           reviews, scores, trends)


def security_headers(nonce: str) -> dict[str, str]:
    """What every response carries: the page may run only its own script and style, nothing may frame it, and no
    browser or proxy keeps a copy (a call's words or audio in a cache would outlive its erasure)."""
    return {
        "Content-Security-Policy": (
            f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; media-src 'self' https: "
            "blob:; img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'self'; "
            "frame-ancestors 'none'"
        ),
        "X-Content-Type-Options": "nosniff",
        "X-Frame-Options": "DENY",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-store",
    }


async def with_security_headers(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
    """A fresh nonce per request (the page's template writes it on its script and style), and the headers."""
    request.state.nonce = secrets.token_urlsafe(16)
    response = await call_next(request)
    for name, value in security_headers(request.state.nonce).items():
        response.headers.setdefault(name, value)
    return response


SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def cross_site(request: Request) -> bool:
    """Whether another origin's page made the request: the browser says so (``Sec-Fetch-Site``), or it names an
    origin whose host is not this one's. (Our own pages send ``Origin: null`` with what they post: their referrer
    policy is ``no-referrer``; ``Sec-Fetch-Site`` still says ``same-origin`` of them.)"""
    if request.headers.get("sec-fetch-site", "same-origin").lower() not in ("same-origin", "none"):
        return True  # cross-site, or same-site: another port of this host, or another subdomain
    origin = request.headers.get("origin", "null")
    return origin != "null" and urlsplit(origin).netloc.lower() != request.headers.get("host", "").lower()


def same_site(downloads: bool) -> params.Depends:
    """A router's refusal of what another site's page asks in the signed-in user's name (their cookie goes with
    it): anything but a GET, and with ``downloads`` a GET too (a link to an export would write its row in their
    name). 403, before the route reads or logs anything; a link from elsewhere to a page still opens it."""

    async def from_this_site(request: Request) -> None:
        if (downloads or request.method not in SAFE_METHODS) and cross_site(request):
            raise HTTPException(status_code=403, detail="a request from another site's page: refused")

    return Depends(from_this_site)


HOLDER_PAGE = ("<!doctype html><title>Call transcript search</title><p>This page answers only the account that "
               "started <code>asr ui</code>: open the address it printed (with its <code>?token=</code>) in this "
               "browser, then <a href=\"\">this page</a> again.</p>")


def only_the_holder(token: str) -> Callable[[Request, Callable[[Request], Awaitable[Response]]],
                                            Awaitable[Response]]:
    """A middleware for ``asr ui``: the address it printed carries ``token``, which is exchanged for an HttpOnly,
    SameSite=Strict cookie and taken out of the address by a redirect; a request without the cookie (or with
    another token) is refused (401, 403) before any route runs, so it reads and logs nothing. Another account on
    the machine can reach the port, not the token."""
    expected = token.encode()

    async def holder(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        cookie = f"asr-ui-{request.url.port or 80}"  # one per port: two servers on one machine hold two tokens
        given = request.query_params.get("token")
        if given is not None:
            if not secrets.compare_digest(given.encode(), expected):
                return HTMLResponse(HOLDER_PAGE, status_code=403)
            kept = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            answer = RedirectResponse(request.url.path + (f"?{urlencode(kept)}" if kept else ""), status_code=303)
            answer.set_cookie(cookie, token, httponly=True, samesite="strict", path="/")
            return answer
        if secrets.compare_digest(request.cookies.get(cookie, "").encode(), expected):
            return await call_next(request)
        return HTMLResponse(HOLDER_PAGE, status_code=401)

    return holder


async def refused_input(request: Request, exc: Exception) -> Response:
    """A 422 that names the field and says what it takes, without the value refused: what was typed (a card
    number in a filter) is not sent back, where a proxy or a browser's tools could keep it."""
    errors = exc.errors() if isinstance(exc, RequestValidationError) else []
    return JSONResponse(status_code=422, content={"detail": jsonable_encoder(
        [{k: v for k, v in error.items() if k not in ("input", "ctx", "url")} for error in errors])})


def create_app(
    settings: Settings | None = None,
    dependencies: Sequence[params.Depends] = (),
    index: TranscriptIndex | None = None,
    store: ObjectStore | None = None,
    allowed_hosts: Sequence[str] | None = None,
    authorize: Authorize = single_user,
    token: str | None = None,
) -> FastAPI:
    """The search app; ``dependencies`` guard every route (Airflow passes its authentication).

    ``authorize(permission)`` is a dependency that answers the signed-in user's name, or 403
    when they lack the permission (``permissions.py``); every route asks for its own, and
    what a user searched and played goes to the access log under that name.
    ``allowed_hosts`` (``asr ui``: the loopback names) refuses any other Host header, so a page
    on another site cannot reach this one through DNS rebinding; ``token`` (``asr ui``'s, printed in the address
    it gives) is what a browser must hold to be answered at all. No schema or docs routes.
    ``index`` and ``store``, when not given, are opened from ``settings`` by the first request that needs them.
    """
    settings = settings or get_settings()
    app = FastAPI(title="Call transcript search", dependencies=list(dependencies), docs_url=None, redoc_url=None,
                  openapi_url=None)
    app.state.settings = settings
    app.state.index = index
    app.state.store = store
    app.state.access = open_access_log(settings)
    app.add_exception_handler(RequestValidationError, refused_input)
    if token is not None:
        app.middleware("http")(only_the_holder(token))  # inside the headers: its refusals carry them too
    app.middleware("http")(with_security_headers)
    if allowed_hosts:
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts))
    guards = {permission: guard(authorize(permission)) for permission in PERMISSIONS}
    readers = reader_guard(authorize)  # a Call Reader, or a Team Lead within their teams
    probe = permission_probe(authorize)  # what the user holds, for the pages' header and the door's scope
    for area in ROUTERS:
        opens = readers if area.PERMISSION == "read" and getattr(area, "TEAM_LEADS", True) else guards[area.PERMISSION]
        app.include_router(area.router, dependencies=[same_site(getattr(area, "DOWNLOADS", False)), opens, probe])
    return app
