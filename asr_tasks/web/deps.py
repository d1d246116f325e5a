"""What a route takes from its app, as FastAPI dependencies: the settings, the index, the store, the ledger and
the access log (all on ``app.state``, set up by ``create_app``), the signed-in user, and the search that several
routes take in their body (``Searched``: what people type never travels in a URL).

The index and the store come as openers that a route calls where it first needs them, and the app keeps what
they opened: a request that needs neither (the bare search form, an unknown recording's audio, a refused
format) opens neither, so a backend that cannot be reached breaks only the answers that use it. The ledger is
``open_ledger``'s, which keeps one per process.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Annotated, Any, TypeVar, get_origin

from fastapi import Depends, HTTPException, Query, Request, params
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict, ValidationError
from starlette.datastructures import State

from asr_tasks.config import Settings
from asr_tasks.index.backends import open_index
from asr_tasks.index.base import TranscriptIndex
from asr_tasks.index.query import Filters, check_query, checked_filters
from asr_tasks.inputs import MAX_TEXT_CHARS, InputError, speaker_names
from asr_tasks.intake.stores import ObjectStore, open_store
from asr_tasks.records.access_log import AccessLog, os_account
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
    user = os_account()
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
    """422 with the message the command line prints for the same value (the field named as the request names it)."""
    return HTTPException(status_code=422, detail=str(exc))


class Searched(BaseModel):
    """A search as the JSON API takes it, in the request's body (JSON, or a form's fields; never the URL, whose
    query string a server's request log prints): its words and its filters, named as ``asr search``'s options
    are (shares 0-1: ``min_non_talk_share`` 0.3 is 30 %; ``tag`` a list: calls with every one)."""

    model_config = ConfigDict(extra="forbid")
    q: str = ""  # none: a search by its filters alone
    date_from: str | None = None
    date_to: str | None = None
    agent: str | None = None
    speaker: str | None = None
    quality: str | None = None
    min_non_talk_share: float | None = None
    min_agent_interruptions: int | None = None
    min_customer_interruptions: int | None = None
    rule: str | None = None
    tag: list[str] = []
    sounds_like: bool = False
    min_score: float | None = None
    max_score: float | None = None

    def filters(self, settings: Settings) -> Filters:
        """The filters, checked as ``asr search`` checks its options (422 with the same words)."""
        filters = Filters(self.date_from, self.date_to, self.agent, self.speaker, self.quality,
                          self.min_non_talk_share, self.min_agent_interruptions, self.min_customer_interruptions,
                          self.rule, tuple(self.tag), self.sounds_like, self.min_score, self.max_score)
        try:
            return checked_filters(filters, speaker_names(settings.audio))
        except InputError as exc:
            raise refused(exc) from exc

    def query(self) -> str:
        """The words, checked as ``asr search`` checks them (length, nesting, something to look for)."""
        return search_query(self.q)


FORMS = ("application/x-www-form-urlencoded", "multipart/form-data")
Asked = TypeVar("Asked", bound=BaseModel)


def _is_list(model: type[BaseModel], name: str) -> bool:
    field = model.model_fields.get(name)
    return field is not None and get_origin(field.annotation) is list


async def body_fields(request: Request, model: type[BaseModel]) -> dict[str, Any]:
    """The request's body as fields: a JSON object, or a form's fields (an empty field left out, as not given;
    a list field from its repeated name). 415 for anything else, 400 for a body that is not what it says."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind == "application/json":
        try:
            data = await request.json()
        except ValueError:
            raise HTTPException(status_code=400, detail="the body is not JSON") from None
        if not isinstance(data, dict):
            raise HTTPException(status_code=400, detail="the body is not a JSON object")
        return data
    if kind in FORMS:
        form = await request.form()
        fields: dict[str, Any] = {}
        for name in form:
            values = [v for v in form.getlist(name) if isinstance(v, str) and v != ""]
            if _is_list(model, name):
                fields[name] = values
            elif values:
                fields[name] = values[-1]
        return fields
    raise HTTPException(status_code=415, detail="send the fields in the body, as JSON or as a form's fields")


def posted(model: type[Asked]) -> Callable[[Request], Awaitable[Asked]]:
    """A dependency that answers ``model`` from the request's body (``body_fields``); 422 naming what is wrong, as
    FastAPI answers for a parameter."""

    async def read(request: Request) -> Asked:
        try:
            return model.model_validate(await body_fields(request, model))
        except ValidationError as exc:
            raise RequestValidationError(exc.errors(include_url=False, include_context=False)) from exc

    return read


def search_query(q: str) -> str:
    """A search's query, checked as ``asr search`` checks it (length, nesting, something to look for)."""
    try:
        return check_query(q, "q")
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
Filter = Annotated[str, Query(max_length=MAX_TEXT_CHARS)]  # a filter of the page's form ("" when left empty)
Second = Annotated[float, Query(ge=0.0, le=86400.0, allow_inf_nan=False)]  # where in a recording to start
