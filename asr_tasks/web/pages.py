"""Every HTML page of the app answered the same way: its template, its context, and what every page needs to
load under the app's Content-Security-Policy at any mount point (the base URL and the response's nonce)."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse

from asr_tasks.templates import render
from asr_tasks.web.deps import page_base


def render_page(request: Request, template: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    """``template`` filled with ``context``, its ``base`` and its ``nonce`` (the one the security headers name)."""
    html = render(template, base=page_base(request), nonce=request.state.nonce, **context)
    return HTMLResponse(html, status_code=status_code)
