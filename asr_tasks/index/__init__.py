"""Where transcripts are indexed and searched: SQLite FTS5 embedded, Elasticsearch in production."""

from __future__ import annotations

from typing import Any, Protocol

from asr_tasks.config import Settings
from asr_tasks.index.query import AgentDayCount, CursorError, Filters, IndexBackendError, SearchPage
from asr_tasks.models import Quarantine, SearchHit, Transcript

__all__ = ["AgentDayCount", "CursorError", "Filters", "IndexBackendError", "SearchPage", "TranscriptIndex", "open_index"]


class TranscriptIndex(Protocol):
    """What the pipeline, the CLI and the search page need from an index; every backend answers alike."""

    def replace_recording(self, transcript: Transcript) -> int: ...

    def record_quarantine(self, quarantine: Quarantine) -> None: ...

    def current_state(self, recording_id: str, model: str, pipeline_version: str) -> str | None: ...

    def search(
        self,
        query: str,
        date_from: str | None = None,
        date_to: str | None = None,
        agent: str | None = None,
        speaker: str | None = None,
        quality: str | None = None,
        limit: int = 20,
    ) -> list[SearchHit]: ...

    def search_page(
        self,
        query: str,
        filters: Filters = Filters(),
        size: int = 20,
        after: str | None = None,
        open_tag: str = "<em>",
        close_tag: str = "</em>",
    ) -> SearchPage: ...

    def counts(self, query: str, filters: Filters = Filters()) -> list[AgentDayCount]: ...

    def recording(self, recording_id: str) -> dict[str, Any] | None: ...

    def states(self, call_date: str | None = None) -> list[dict[str, Any]]: ...

    def transcripts_for_date(self, call_date: str) -> list[Transcript]: ...

    def replace_findings(self, call_date: str, findings: list[dict[str, Any]]) -> None: ...

    def findings(self, call_date: str) -> list[dict[str, Any]]: ...


def open_index(settings: Settings) -> TranscriptIndex:
    """The configured backend: ``index_backend`` is ``sqlite`` (embedded) or ``elasticsearch``."""
    if settings.index_backend == "sqlite":
        from asr_tasks.index.sqlite import SqliteIndex

        return SqliteIndex(settings.path("index_path"))
    if settings.index_backend == "elasticsearch":
        from asr_tasks.index.elasticsearch import ElasticsearchIndex

        return ElasticsearchIndex.from_settings(settings)
    raise ValueError(f"unknown index_backend {settings.index_backend!r} (supported: sqlite, elasticsearch)")
