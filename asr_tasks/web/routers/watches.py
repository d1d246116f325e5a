"""Saved searches from the page: an auditor's own searches that the nightly audit runs over each new day
(``audit.saved_searches``), listed, saved and removed under the signed-in user's name."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse
from pydantic import BaseModel, ConfigDict, Field

from asr_tasks.audit.rules import SEVERITIES
from asr_tasks.audit.saved_searches import SavedSearchError, SavedSearches
from asr_tasks.index.query import MAX_QUERY_CHARS, MAX_TAG_FILTERS, Filters
from asr_tasks.inputs import MAX_TEXT_CHARS, speaker_names
from asr_tasks.text.masking import configured_policy
from asr_tasks.config import Settings
from asr_tasks.web.deps import AppLedger, AppSettings, User
from asr_tasks.web.door import CallDoor
from asr_tasks.web.pages import render_page
from asr_tasks.web.routers.search import PostedSearch, SearchForm

PERMISSION = "read"

router = APIRouter()


class WatchRequest(BaseModel):
    """A search to save: its name, words, filters and whether it sounds like."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(max_length=MAX_TEXT_CHARS)
    q: str = Field(max_length=MAX_QUERY_CHARS)
    sounds_like: bool = False
    agent: str | None = Field(None, max_length=MAX_TEXT_CHARS)
    speaker: str | None = Field(None, max_length=MAX_TEXT_CHARS)
    quality: str | None = Field(None, max_length=MAX_TEXT_CHARS)
    min_non_talk_share: float | None = None
    min_agent_interruptions: int | None = None
    min_customer_interruptions: int | None = None
    min_score: float | None = None
    max_score: float | None = None
    rule: str | None = Field(None, max_length=MAX_TEXT_CHARS)
    tag: list[str] = Field(default_factory=list, max_length=MAX_TAG_FILTERS)
    severity: str = "medium"


def saved(ledger: AppLedger, settings: AppSettings) -> SavedSearches:
    """The ledger's saved searches, which keep what people typed masked."""
    return SavedSearches(ledger, configured_policy(settings))


Saved = Annotated[SavedSearches, Depends(saved)]


def watches_view(request: Request, user: str, searches: SavedSearches, settings: Settings,
                 asked: SearchForm) -> HTMLResponse:
    """The user's saved searches, each with a remove button, and a form to save one (filled from ``asked``, with
    every filter of it but its days)."""
    form = {"q": asked.q, "sounds_like": bool(asked.sounds_like), "agent": asked.agent, "speaker": asked.speaker,
            "quality": asked.quality, "rule": asked.rule, "non_talk_percent": asked.non_talk_percent,
            "agent_interruptions": asked.agent_interruptions,
            "tag": ", ".join(t.strip() for t in asked.tag if t.strip())}
    return render_page(request, "watches.html", here="watches", searches=searches.listed(user), form=form,
                       severities=SEVERITIES, speakers=speaker_names(settings.audio))


@router.get("/watches", response_class=HTMLResponse)
def watches_page(request: Request, user: User, searches: Saved, settings: AppSettings) -> HTMLResponse:
    """The user's saved searches, and an empty form to save one."""
    return watches_view(request, user, searches, settings, SearchForm())


@router.post("/watches", response_class=HTMLResponse)
def watch_this_search(request: Request, user: User, searches: Saved, settings: AppSettings,
                      asked: PostedSearch) -> HTMLResponse:
    """The user's saved searches, and the form to save one filled from the search the page posted ("watch this
    search"): its words travel in the body, as every search's do."""
    return watches_view(request, user, searches, settings, asked)


@router.get("/api/watches")
def list_watches(user: User, searches: Saved) -> list[dict[str, Any]]:
    """The user's saved searches."""
    return [s.to_dict() for s in searches.listed(user)]


@router.post("/api/watches", status_code=201)
def add_watch(body: WatchRequest, user: User, searches: Saved, settings: AppSettings,
              door: CallDoor) -> dict[str, Any]:
    """Save a search under the user's name; refused (400) as ``asr watch add`` refuses it. A Team Lead's runs
    over the calls of the teams they lead, and names no agent of another team."""
    filters = Filters(None, None, body.agent or None, body.speaker or None, body.quality or None,
                      body.min_non_talk_share, body.min_agent_interruptions, body.min_customer_interruptions,
                      body.rule or None, tuple(sorted({t.strip() for t in body.tag if t.strip()})), body.sounds_like,
                      body.min_score, body.max_score)
    if door.scope is not None and body.agent and body.agent not in door.scope:
        raise HTTPException(status_code=400, detail=f"agent {body.agent!r} is not an agent of the teams you lead")
    try:
        return searches.add(user, body.name, body.q, filters, speaker_names(settings.audio), body.severity,
                            within_teams=door.scope is not None).to_dict()
    except SavedSearchError as exc:
        raise HTTPException(status_code=400, detail=str(exc)) from exc


class Named(BaseModel):
    """Which of the user's saved searches: its name, in the body (a name may be a customer's: never in a URL)."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(max_length=MAX_TEXT_CHARS)


@router.delete("/api/watches")
def remove_watch(body: Named, user: User, searches: Saved) -> dict[str, Any]:
    """Remove one of the user's saved searches (404: the user has none of that name)."""
    try:
        return searches.remove(user, body.name).to_dict()
    except SavedSearchError as exc:
        raise HTTPException(status_code=404, detail=str(exc)) from exc
