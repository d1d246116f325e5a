"""The transcript search page inside Airflow's API server, at /search/, behind Airflow's login.

Airflow mounts a plugin's FastAPI app as it is and authenticates none of its
routes, so the app is built with Airflow's own "authenticated user" dependency
on every route: the browser's Airflow session cookie (or a bearer token) opens
it, anything else gets 401.

Every Airflow component loads the plugins folder (scheduler, DAG processor,
workers), and only the API server serves this page; the app and Airflow's API
security module are therefore built on the first request, not at import.
"""

from __future__ import annotations

from typing import Any, Callable

from airflow.plugins_manager import AirflowPlugin

URL_PREFIX = "/search"


class LazyApp:
    """An ASGI app that builds the real one when the first request (or lifespan event) arrives."""

    def __init__(self, build: Callable[[], Any]) -> None:
        self.build = build
        self.app: Any = None

    async def __call__(self, scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        if self.app is None:
            self.app = self.build()
        await self.app(scope, receive, send)


def build_search_app() -> Any:
    from airflow.api_fastapi.core_api.security import requires_authenticated
    from fastapi import Depends

    from asr_tasks.webui import create_app

    return create_app(dependencies=[Depends(requires_authenticated())])


class TranscriptSearchPlugin(AirflowPlugin):
    name = "transcript_search"
    fastapi_apps = [{"app": LazyApp(build_search_app), "url_prefix": URL_PREFIX, "name": "Transcript search"}]
    # Relative to Airflow's base URL, so the link also works behind a path prefix.
    external_views = [{"name": "Transcript search", "href": f"{URL_PREFIX.lstrip('/')}/", "destination": "nav",
                       "category": "browse"}]
