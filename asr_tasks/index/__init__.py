"""Where transcripts are indexed and searched: SQLite FTS5 embedded, Elasticsearch in production."""

from __future__ import annotations

from typing import Any, Protocol

from asr_tasks.config import Settings
from asr_tasks.models import Quarantine, SearchHit, Transcript


class TranscriptIndex(Protocol):
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
        limit: int = 20,
    ) -> list[SearchHit]: ...

    def states(self, call_date: str | None = None) -> list[dict[str, Any]]: ...


def open_index(settings: Settings) -> TranscriptIndex:
    if settings.index_backend == "sqlite":
        from asr_tasks.index.sqlite import SqliteIndex

        return SqliteIndex(settings.path("index_path"))
    raise ValueError(f"unknown index_backend {settings.index_backend!r} (supported: sqlite)")
