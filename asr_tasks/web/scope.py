"""Whose calls a user may see, and an index that answers only with those.

A user who holds the Call Team Lead permission (``read_team``) and not the Call
Reader's sees the calls of the agents of the teams they lead (``records.teams``)
and nothing else, on every route: the door (``door.py``) hands each route a
``ScopedIndex`` whose every query carries the agents as a filter and whose every
read of one call, its words or a day's findings leaves out the calls of other
agents, so a call of another team is unknown (404) wherever it is asked for.
Everyone else's scope is every call their permissions reach.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from fastapi import Request

from asr_tasks.index.base import TranscriptIndex
from asr_tasks.index.query import AgentDayCount, CallsPage, Filters, SearchPage
from asr_tasks.models import Quarantine, Segment, Transcript
from asr_tasks.records.teams import Teams
from asr_tasks.web.pages import held


def scope_of(request: Request, user: str, teams: Teams) -> frozenset[str] | None:
    """The agents whose calls the user may see: None for all (a Call Reader, or a role that reads no calls of its
    own), the agents of the teams they lead for a Team Lead (none where they lead none)."""
    reader: bool | None = getattr(request.state, "asr_reader", None)  # what the route's guard found, if it asked
    if reader is None:
        permissions = held(request)
        reader = "read" in permissions or "read_team" not in permissions
    return None if reader else teams.led_by(user)


class ScopedIndex(TranscriptIndex):
    """An index that answers with the calls of ``agents`` only; writes go through as they are."""

    def __init__(self, index: TranscriptIndex, agents: frozenset[str]) -> None:
        self.index, self.agents = index, agents

    def _narrowed(self, filters: Filters) -> Filters:
        return replace(filters, agents=self.agents if filters.agents is None else filters.agents & self.agents)

    def _sees(self, doc: dict[str, Any] | None) -> bool:
        return doc is not None and doc.get("agent_id") in self.agents

    def replace_recording(self, transcript: Transcript) -> int:
        return self.index.replace_recording(transcript)

    def record_quarantine(self, quarantine: Quarantine) -> None:
        self.index.record_quarantine(quarantine)

    def delete_recording(self, bucket: str, key: str) -> int:
        return self.index.delete_recording(bucket, key)

    def purge_deleted(self) -> None:
        self.index.purge_deleted()

    def segments(self, recording_id: str) -> list[Segment]:
        return self.index.segments(recording_id) if self.recording(recording_id) is not None else []

    def search_page(self, query: str, filters: Filters = Filters(), size: int = 20, after: str | None = None,
                    open_tag: str = "<em>", close_tag: str = "</em>") -> SearchPage:
        return self.index.search_page(query, self._narrowed(filters), size, after, open_tag, close_tag)

    def calls(self, query: str, filters: Filters = Filters(), size: int = 20, after: str | None = None) -> CallsPage:
        return self.index.calls(query, self._narrowed(filters), size, after)

    def counts(self, query: str, filters: Filters = Filters()) -> list[AgentDayCount]:
        return self.index.counts(query, self._narrowed(filters))

    def rule_counts(self, query: str, filters: Filters = Filters()) -> dict[str, int]:
        return self.index.rule_counts(query, self._narrowed(filters))

    def tag_counts(self, query: str, filters: Filters = Filters()) -> dict[str, int]:
        return self.index.tag_counts(query, self._narrowed(filters))

    def score_counts(self, query: str, filters: Filters = Filters()) -> dict[str, int]:
        return self.index.score_counts(query, self._narrowed(filters))

    def recording(self, recording_id: str) -> dict[str, Any] | None:
        rec = self.index.recording(recording_id)
        return rec if self._sees(rec) else None

    def recordings(self, call_date: str | None = None) -> list[dict[str, Any]]:
        return [r for r in self.index.recordings(call_date) if self.recording(str(r["recording_id"])) is not None]

    def replace_findings(self, call_date: str, findings: list[dict[str, Any]]) -> None:
        self.index.replace_findings(call_date, findings)

    def findings(self, call_date: str) -> list[dict[str, Any]]:
        return [f for f in self.index.findings(call_date) if self._sees(f)]

    def replace_tags(self, call_date: str, tags: dict[str, list[str]]) -> None:
        self.index.replace_tags(call_date, tags)

    def replace_scores(self, call_date: str, scores: dict[str, float | None]) -> None:
        self.index.replace_scores(call_date, scores)
