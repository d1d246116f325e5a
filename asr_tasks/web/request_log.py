"""What a server's own request log may print of this app's requests: the method, the path and the status, never
the query string.

The app takes what people type in a POST's body, never in a URL; this is the defence behind that: a query string
someone puts in an address by hand (or a link from elsewhere) is printed as ``?…`` by the request log of the
server that serves the app. ``asr ui`` runs uvicorn, whose access log is the standard logger ``uvicorn.access``;
Airflow's API server logs requests its own way, and ``plugins/search_page.py`` hides them there with
``hidden_query``.
"""

from __future__ import annotations

import logging

HIDDEN = "…"  # what a request log prints for a query string of the app's paths
ACCESS_LOGGERS = ("uvicorn.access", "gunicorn.access")


def under(path: str, prefix: str) -> bool:
    """Whether ``path`` is one of the app's, mounted at ``prefix`` ("/": every path)."""
    root = prefix.rstrip("/")
    return not root or path == root or path.startswith(root + "/")


def hidden_query(path: str, prefix: str = "/") -> str:
    """A request's path with its query string, as a log may print it: ``/call/x?…`` for a path of the app."""
    base, asked, query = path.partition("?")
    return f"{base}?{HIDDEN}" if asked and query and under(base, prefix) else path


class HiddenQueryStrings(logging.Filter):
    """A filter for uvicorn's access logger, whose records carry the path with its query string as their third
    argument (client, method, path, HTTP version, status)."""

    def __init__(self, prefix: str = "/") -> None:
        super().__init__()
        self.prefix = prefix

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            record.args = (*args[:2], hidden_query(args[2], self.prefix), *args[3:])
        return True


def hide_query_strings(prefix: str = "/") -> None:
    """Install the filter on the access loggers of uvicorn and gunicorn (once: a second call adds nothing)."""
    for name in ACCESS_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, HiddenQueryStrings) and f.prefix == prefix for f in logger.filters):
            logger.addFilter(HiddenQueryStrings(prefix))
