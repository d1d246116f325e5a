"""What the command line shows of calls, in the access log.

A command that prints a call's content (a search's hits, a day's findings, a spot check's transcripts) writes
its row before it prints, under the operating-system account that runs it, as the page writes one under the
signed-in user (``web/door.py``). What was typed goes in ``query`` and ``filters``, which the access log keeps
masked and sealed; a row that cannot be written shows nothing.
"""

from __future__ import annotations

from typing import Any, Iterable

from asr_tasks.config import get_settings


def log_access(action: str, *, detail: str, query: str | None = None, filters: dict[str, Any] | None = None,
               hits: int | None = None, subjects: Iterable[str] = ()) -> None:
    """One row naming the account, what it did (``ACTIONS`` of ``records/access_log.py``), what was typed, how
    many hits or rows it was shown and which calls (``subjects``: erasing any of them makes what was typed
    unreadable); ``detail`` says what was read."""
    from sqlalchemy.exc import SQLAlchemyError

    from asr_tasks.records.access_log import open_access_log, os_account

    try:
        open_access_log(get_settings()).append(os_account(), action, query=query, filters=filters, hits=hits,
                                               detail=detail, subjects=subjects)
    except SQLAlchemyError as exc:  # the driver's own words: the statement's parameters hold what was typed
        raise OSError(f"the access log could not be written, so nothing is shown: "
                      f"{getattr(exc, 'orig', None) or type(exc).__name__}") from exc
