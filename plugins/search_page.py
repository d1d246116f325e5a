"""The transcript search page inside Airflow's API server, at /search/, behind Airflow's login.

Airflow mounts a plugin's FastAPI app as it is and authenticates none of its
routes, so the app is built with Airflow's own "authenticated user" dependency
on every route: the browser's Airflow session cookie (or a bearer token) opens
it, anything else gets 401. Each route then asks Airflow's auth manager for its
own permission on the ``Call recordings`` resource (``asr_tasks/records/permissions.py``):
a signed-in user without it gets 403.

Every Airflow component loads the plugins folder (scheduler, DAG processor,
workers), and only the API server serves this page; the app and Airflow's API
security module are therefore built on the first request, not at import.

The API server logs every request (``HttpAccessLogMiddleware``: a structlog
event with the path and the query string as fields, printed on its standard
output); the page takes what people type in a POST's body, and behind that
this module's processor logs the query string of the page's paths as ``…``
(``hide_query_strings``, installed when the plugin is loaded, after Airflow
configured its logging and before the server takes a request).
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any, Callable

import structlog
from airflow.plugins_manager import AirflowPlugin

from asr_tasks.web.request_log import HIDDEN, hide_query_strings as hide_uvicorn_query_strings, under

URL_PREFIX = "/search"


def hidden_query_string(logger: Any, method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """A structlog processor: the query string of a request to the page, in Airflow's request log, as ``…``."""
    path = event.get("path")
    if event.get("query") and isinstance(path, str) and under(path, URL_PREFIX):
        event["query"] = HIDDEN
    return event


def hide_query_strings() -> None:
    """Put ``hidden_query_string`` first in structlog's processors (once), and hide the page's query strings in
    uvicorn's and gunicorn's own access logs too, should a deployment turn them on."""
    processors = list(structlog.get_config()["processors"])
    if hidden_query_string not in processors:
        structlog.configure(processors=[hidden_query_string, *processors])
    hide_uvicorn_query_strings(URL_PREFIX)


class LazyApp:
    """An ASGI app that builds the real one when the first request (or lifespan event) arrives."""

    def __init__(self, build: Callable[[], Any]) -> None:
        self.build = build
        self.app: Any = None

    async def __call__(self, scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        if self.app is None:
            self.app = self.build()
        await self.app(scope, receive, send)


def airflow_permission(permission: str) -> Callable[..., str]:
    """A dependency that answers the signed-in user's name if Airflow's auth manager grants them ``permission``."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.core_api.security import get_user
    from fastapi import Depends, HTTPException

    from asr_tasks.records.permissions import PERMISSIONS, RESOURCE

    wanted = PERMISSIONS[permission]
    signed_in = Depends(get_user)  # a default, not an annotation: this module's annotations stay strings

    def check(user: Any = signed_in) -> str:
        if not get_auth_manager().is_authorized_custom_view(method=wanted.action, resource_name=RESOURCE, user=user):
            raise HTTPException(status_code=403, detail=f"{user.get_name()} may not {wanted.allows} "
                                                        f"(the role {wanted.role!r} grants it)")
        return str(user.get_name())

    return check


def build_search_app() -> Any:
    from airflow.api_fastapi.core_api.security import requires_authenticated
    from fastapi import Depends

    from asr_tasks.web.app import create_app

    hide_query_strings()  # again, should the server have configured its logging anew since the plugin was loaded
    return create_app(dependencies=[Depends(requires_authenticated())], authorize=airflow_permission)


def permission_views() -> list[dict[str, Any]]:
    """Under the FAB auth manager, a view that declares the page's permissions on their resource.

    FAB creates a view's resource and actions when it syncs permissions
    (``airflow sync-perm``, and an API server's start), so the roles of
    ``[fab] custom_roles`` can grant them. The view itself only leads to the page.
    """
    try:
        from flask import redirect
        from flask_appbuilder import BaseView, expose
    except ImportError:  # no FAB provider: Airflow's own auth manager needs no declared resources
        return []

    from asr_tasks.records.permissions import PERMISSIONS, RESOURCE

    class CallRecordingsView(BaseView):  # type: ignore[misc]
        route_base = "/call-recordings"
        class_permission_name = RESOURCE
        base_permissions = [p.action for p in PERMISSIONS.values()]
        default_view = "index"

        @expose("/")
        def index(self) -> Any:
            return redirect(f"{URL_PREFIX}/")

    return [{"view": CallRecordingsView()}]


hide_query_strings()


class TranscriptSearchPlugin(AirflowPlugin):
    name = "transcript_search"
    fastapi_apps = [{"app": LazyApp(build_search_app), "url_prefix": URL_PREFIX, "name": "Transcript search"}]
    appbuilder_views = permission_views()
    # Relative to Airflow's base URL, so the link also works behind a path prefix.
    external_views = [{"name": "Transcript search", "href": f"{URL_PREFIX.lstrip('/')}/", "destination": "nav",
                       "category": "browse"}]
