"""How Elasticsearch's answers become the index's: a segment hit as a ``SearchHit``, a recording document as
a row shaped like the SQLite index's, and the composite aggregations the calls list and the facets page through.
"""

from __future__ import annotations

from typing import Any

from asr_tasks.index.query import Node, confidence
from asr_tasks.index.tolerant import marked
from asr_tasks.models import SearchHit

HIGHLIGHT_FIELD = "text.en"
_DAY = {"date_histogram": {"field": "call_date", "calendar_interval": "1d", "format": "yyyy-MM-dd",
                           "missing_bucket": True}}
CALL_SOURCES = [{"day": _DAY}, {"key": {"terms": {"field": "key"}}}, {"call": {"terms": {"field": "recording_id"}}}]
AGENT_DAY_SOURCES = [{"agent": {"terms": {"field": "agent_id", "missing_bucket": True}}}, {"day": _DAY}]


def search_hit(hit: dict[str, Any], node: Node | None, open_tag: str, close_tag: str) -> SearchHit:
    """A segment hit, its highlight (from ``text.en``, and where the query's tolerant terms matched) mapped back
    onto the segment's own text."""
    src = hit["_source"]
    exact = (hit.get("highlight", {}).get(HIGHLIGHT_FIELD) or [src["text"]])[0]
    highlight, match = marked(src["text"], exact, node, open_tag, close_tag)
    return SearchHit(
        recording_id=src["recording_id"], key=src["key"], call_date=src.get("call_date") or "",
        speaker=src["speaker"], channel=src["channel"], start=src["start"], end=src["end"], text=src["text"],
        highlight=highlight, agent_id=src.get("agent_id"), score=round(float(hit.get("_score") or 0.0), 4),
        quality=src.get("quality"), confidence=confidence(src.get("avg_logprob")), match=match,
    )


def row(src: dict[str, Any]) -> dict[str, Any]:
    """A recording document in the shape of the SQLite index's rows (failures as one comma-separated string, tags
    a list even where no audit tagged it, a score None where none scored it)."""
    shaped = dict(src)
    shaped["quality_failures"] = ",".join(src.get("quality_failures") or []) or None
    shaped["tags"] = src.get("tags") or []
    shaped["score"] = src.get("score")
    return shaped
