"""What a route takes from its app, as FastAPI dependencies: the settings, the index, the store, the ledger and
the access log (all on ``app.state``, set up by ``create_app``), the signed-in user, and the query parameters
several routes share.

The index and the store come as openers that a route calls where it first needs them, and the app keeps what
they opened: a request that needs neither (the bare search form, an unknown recording's audio, a refused
format) opens neither, so a backend that cannot be reached breaks only the answers that use it. The ledger is
``open_ledger``'s, which keeps one per process.
"""

from __future__ import annotations

import getpass
from collections.abc import Callable
from functools import partial
from typing import Annotated

from fastapi import Depends, HTTPException, Query, Request, params
from starlette.datastructures import State

from asr_tasks.config import Settings
from asr_tasks.index.backends import open_index
from asr_tasks.index.base import TranscriptIndex
from asr_tasks.index.query import MAX_QUERY_CHARS, Filters, check_query, checked_filters
from asr_tasks.inputs import DEFAULT_PAGE_SIZE, MAX_TEXT_CHARS, InputError, page_size, speaker_names
from asr_tasks.intake.stores import ObjectStore, open_store
from asr_tasks.records.access_log import AccessLog
from asr_tasks.records.ledger import Ledger, open_ledger
from asr_tasks.records.permissions import PERMISSIONS
from asr_tasks.states import GONE_STATES

RECORDING_ID = r"^([0-9a-f]{24})?$"  # a recording id as the pipeline makes them (``recording_id_for``), or none

# ``authorize(permission)`` is a dependency that answers the signed-in user's name, or refuses (403).
Authorize = Callable[[str], Callable[..., str]]


def single_user(permission: str) -> Callable[..., str]:
    """``asr ui`` on loopback: one user, the account that started it, who may do everything."""
    if permission not in PERMISSIONS:
        raise ValueError(f"unknown permission {permission!r}")
    user = getpass.getuser()
    return lambda: user


def guard(check: Callable[..., str]) -> params.Depends:
    """A router's permission, ``check`` being ``authorize(permission)``: it answers the user's name or refuses,
    and the name is kept on the request for the routes (``User``), which write it to the access log.

    ``check`` is a default, not an ``Annotated`` alias: FastAPI reads annotations from the module, and each app
    builds its own checks."""

    async def signed_in(request: Request, user: str = Depends(check)) -> None:
        request.state.asr_user = user

    return Depends(signed_in)


async def signed_in_user(request: Request) -> str:
    """The name that the router's permission check answered (``guard``)."""
    user: str = request.state.asr_user
    return user


async def app_settings(request: Request) -> Settings:
    """The settings the app was built with (``create_app``), not the environment's at request time."""
    settings: Settings = request.app.state.settings
    return settings


def _index(state: State) -> TranscriptIndex:
    """The app's index, opened from its settings the first time and kept for every later request."""
    if state.index is None:
        state.index = open_index(state.settings.index)
    index: TranscriptIndex = state.index
    return index


def _store(state: State) -> ObjectStore:
    """The app's store, opened from its settings the first time and kept for every later request."""
    if state.store is None:
        state.store = open_store(state.settings.storage)
    store: ObjectStore = state.store
    return store


async def index_opener(request: Request) -> Callable[[], TranscriptIndex]:
    """The app's index, opened by the first call that needs it (``create_app`` may have been given one)."""
    return partial(_index, request.app.state)


async def store_opener(request: Request) -> Callable[[], ObjectStore]:
    """The app's object store, opened by the first call that needs it (``create_app`` may have been given one)."""
    return partial(_store, request.app.state)


def ledger(request: Request) -> Ledger:
    """The configured ledger, as ``open_ledger`` keeps it per process (a forked worker opens its own)."""
    return open_ledger(request.app.state.settings.ledger)


async def access_log(request: Request) -> AccessLog:
    """Where every search, play, export, erasure and hold is written, under the signed-in user's name."""
    access: AccessLog = request.app.state.access
    return access


def refused(exc: InputError) -> HTTPException:
    """422 with the message the command line prints for the same value (the parameter named as in the URL)."""
    return HTTPException(status_code=422, detail=str(exc))


def query_filters(
    settings: Settings = Depends(app_settings),
    date_from: str | None = None,
    date_to: str | None = None,
    agent: str | None = None,
    speaker: str | None = None,
    quality: str | None = None,
    min_non_talk_share: float | None = None,
    min_agent_interruptions: int | None = None,
    min_customer_interruptions: int | None = None,
    rule: str | None = None,
    tag: list[str] = Query([]),
    sounds_like: bool = False,
    min_score: float | None = None,
    max_score: float | None = None,
) -> Filters:
    """The filters of the JSON API, from the query string (shares 0-1: ``min_non_talk_share=0.3`` is 30 %; ``tag``
    repeated: calls with every one), checked as ``asr search`` checks its options."""
    filters = Filters(date_from, date_to, agent, speaker, quality, min_non_talk_share, min_agent_interruptions,
                      min_customer_interruptions, rule, tuple(tag), sounds_like, min_score, max_score)
    try:
        return checked_filters(filters, speaker_names(settings.audio))
    except InputError as exc:
        raise refused(exc) from exc


def search_query(q: str) -> str:
    """A search's query, checked as ``asr search`` checks it (length, nesting, something to look for)."""
    try:
        return check_query(q, "q")
    except InputError as exc:
        raise refused(exc) from exc


def hits_per_page(size: int = DEFAULT_PAGE_SIZE) -> int:
    """Hits per page, bounded as ``asr search --limit`` is."""
    try:
        return page_size(size, "size")
    except InputError as exc:
        raise refused(exc) from exc


def page_base(request: Request) -> str:
    """The page's ``<base href>``: where the app is mounted (``/``, or ``/search/`` inside Airflow), so that every
    URL in a page can be relative."""
    root: str = request.scope.get("root_path", "")
    return root.rstrip("/") + "/"


def gone(ledger: Ledger, recording_id: str) -> HTTPException | None:
    """410 for a recording that was erased (the ledger's tombstone): it existed, and is gone for good."""
    if ledger.state(recording_id) in GONE_STATES:
        return HTTPException(status_code=410, detail=f"recording {recording_id} was erased")
    return None


User = Annotated[str, Depends(signed_in_user)]
AppSettings = Annotated[Settings, Depends(app_settings)]
IndexOpener = Annotated[Callable[[], TranscriptIndex], Depends(index_opener)]
StoreOpener = Annotated[Callable[[], ObjectStore], Depends(store_opener)]
AppLedger = Annotated[Ledger, Depends(ledger)]
Access = Annotated[AccessLog, Depends(access_log)]
SearchFilters = Annotated[Filters, Depends(query_filters)]
CheckedQuery = Annotated[str, Depends(search_query)]  # a search's query, refused with why (422)
PageSize = Annotated[int, Depends(hits_per_page)]
SearchQuery = Annotated[str, Query(max_length=MAX_QUERY_CHARS)]  # the words a call page marks
Filter = Annotated[str, Query(max_length=MAX_TEXT_CHARS)]  # a filter of the page's form ("" when left empty)
Second = Annotated[float, Query(ge=0.0, le=86400.0, allow_inf_nan=False)]  # where in a recording to start
