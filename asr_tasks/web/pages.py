"""Every HTML page of the app answered the same way: its template, its context, what every page needs to
load under the app's Content-Security-Policy at any mount point (the base URL and the response's nonce), and
the header that leads to the app's other pages, each shown only to a user whose permission opens it.

Which permissions the signed-in user holds is asked of the same checks the routers' guards use
(``authorize(permission)``, Airflow's auth manager inside Airflow): ``permission_probe`` resolves what each
check depends on with the request, and a page runs the checks only when it draws its header, so audio and
API requests cost no more than their own guard.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from fastapi import Depends, HTTPException, Request, params
from fastapi.responses import HTMLResponse

from asr_tasks.records.permissions import PERMISSIONS
from asr_tasks.templates import render
from asr_tasks.web.deps import Authorize, page_base


@dataclass(frozen=True)
class Link:
    """One entry of the header: where it leads (relative to ``<base href>``) and what opens it."""

    name: str
    href: str
    label: str
    permissions: tuple[str, ...]  # any of which opens it


READERS = ("read", "read_team")  # a Call Reader, or a Team Lead within their teams
HEADER = (Link("search", "./", "Search", READERS), Link("findings", "reports/qa", "Findings", READERS),
          Link("trends", "trends", "Trends", READERS), Link("progress", "progress", "Progress", ("read",)),
          Link("watches", "watches", "Saved searches", READERS), Link("reviews", "reviews", "Reviews", ("review",)),
          Link("access-log", "access-log", "Access log", ("access_log",)))


def _holds(check: Callable[..., Any], values: dict[str, Any]) -> bool:
    """Whether the check lets the user through (it answers their name, or refuses with an HTTP error)."""
    try:
        check(**values)
    except HTTPException:
        return False
    return True


def _deferred(check: Callable[..., Any]) -> Callable[..., Any]:
    """A dependency with ``check``'s own parameters (so FastAPI resolves what the check needs, e.g. Airflow's
    signed-in user, once per request) that answers a call running the check later; a coroutine check runs now."""
    if inspect.iscoroutinefunction(check):
        async def attempt(**values: Any) -> Callable[[], bool]:
            try:
                await check(**values)
            except HTTPException:
                return lambda: False
            return lambda: True
    else:
        async def attempt(**values: Any) -> Callable[[], bool]:
            return partial(_holds, check, values)
    attempt.__signature__ = inspect.signature(check, eval_str=True)  # type: ignore[attr-defined]
    return attempt


def _answered(check: Callable[..., Any]) -> Callable[..., Any]:
    """A dependency with ``check``'s own parameters that answers a call running it (a coroutine check runs now)
    and giving the user's name, or the refusal it raised."""
    def run(values: dict[str, Any]) -> str | HTTPException:
        try:
            return str(check(**values))
        except HTTPException as exc:
            return exc

    if inspect.iscoroutinefunction(check):
        async def attempt(**values: Any) -> Callable[[], str | HTTPException]:
            try:
                answer: str | HTTPException = str(await check(**values))
            except HTTPException as exc:
                answer = exc
            return lambda: answer
    else:
        async def attempt(**values: Any) -> Callable[[], str | HTTPException]:
            return partial(run, values)
    attempt.__signature__ = inspect.signature(check, eval_str=True)  # type: ignore[attr-defined]
    return attempt


def reader_guard(authorize: Authorize) -> params.Depends:
    """The guard of the routes that read calls: a Call Reader, or else a Team Lead (``read_team``), whose door
    then opens onto their teams' calls only (``scope.py``); anyone else is refused as the reader's check refuses.
    The lead's check runs only for a user who is not a reader."""
    as_reader, as_lead = Depends(_answered(authorize("read"))), Depends(_answered(authorize("read_team")))

    async def signed_in(request: Request, reader: Callable[[], str | HTTPException] = as_reader,
                        lead: Callable[[], str | HTTPException] = as_lead) -> None:
        refused = reader()
        answer = refused if isinstance(refused, str) else lead()
        if isinstance(answer, HTTPException):
            raise refused if isinstance(refused, HTTPException) else answer
        request.state.asr_user, request.state.asr_reader = answer, isinstance(refused, str)

    return Depends(signed_in)


def permission_probe(authorize: Authorize) -> params.Depends:
    """A dependency that keeps, on the request, a way to ask whether the user holds each permission."""
    tries = {name: Depends(_deferred(authorize(name))) for name in PERMISSIONS}

    async def probe(request: Request, **asked: Callable[[], bool]) -> None:
        request.state.asr_permission_tries = asked

    probe.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("request", inspect.Parameter.KEYWORD_ONLY, annotation=Request)]
        + [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=check) for name, check in tries.items()])
    return Depends(probe)


def held(request: Request) -> frozenset[str]:
    """The permissions the signed-in user holds (none where the app set no probe), asked once per request."""
    known: frozenset[str] | None = getattr(request.state, "asr_permissions", None)
    if known is None:
        tries: dict[str, Callable[[], bool]] = getattr(request.state, "asr_permission_tries", {})
        known = frozenset(name for name, holds in tries.items() if holds())
        request.state.asr_permissions = known
    return known


def header(request: Request, here: str) -> list[dict[str, Any]]:
    """The header's entries the user may open, the page they are on marked."""
    permissions = held(request)
    return [{"href": link.href, "label": link.label, "here": link.name == here} for link in HEADER
            if permissions & set(link.permissions)]


def render_page(request: Request, template: str, status_code: int = 200, here: str = "",
                **context: Any) -> HTMLResponse:
    """``template`` filled with ``context``, its ``base``, its ``nonce`` (the one the security headers name) and
    its header (``here``: which entry is this page); ``can`` is what the user holds, so that a page offers no
    control its user may not use."""
    html = render(template, base=page_base(request), nonce=request.state.nonce, header=header(request, here),
                  can=held(request), **context)
    return HTMLResponse(html, status_code=status_code)
