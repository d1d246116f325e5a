"""Opening the configured index backend: SQLite FTS5 embedded, Elasticsearch in production."""

from __future__ import annotations

from asr_tasks.config import IndexSettings
from asr_tasks.index.base import TranscriptIndex


def open_index(settings: IndexSettings) -> TranscriptIndex:
    """The configured backend: ``index_backend`` is ``sqlite`` (embedded) or ``elasticsearch``."""
    if settings.index_backend == "sqlite":
        from asr_tasks.index.sqlite import SqliteIndex

        return SqliteIndex(settings.path("index_path"))
    if settings.index_backend == "elasticsearch":
        from asr_tasks.index.elasticsearch import ElasticsearchIndex

        return ElasticsearchIndex.from_settings(settings)
    raise ValueError(f"unknown index_backend {settings.index_backend!r} (supported: sqlite, elasticsearch)")

