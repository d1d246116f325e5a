"""A search's whole result as CSV or JSON, streamed page by page: memory stays flat however many hits.

CSV cells are made safe to open in a spreadsheet (``text.spreadsheet_safe``);
JSON is one array, written as it is read.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator

from asr_tasks.index.base import TranscriptIndex
from asr_tasks.index.query import Filters
from asr_tasks.models import SearchHit
from asr_tasks.text.spreadsheet import spreadsheet_safe

EXPORT_PAGE = 2000  # hits per index query: fewer, larger pages (each ranks the whole match), memory still flat
FIELDS = ["recording_id", "key", "call_date", "agent_id", "speaker", "channel", "start", "end", "quality", "confidence",
          "match", "text"]
FORMATS = ("csv", "json")


def all_hits(index: TranscriptIndex, query: str, filters: Filters, page: int = EXPORT_PAGE) -> Iterator[SearchHit]:
    """Every hit of the search, in the search's order, one page at a time."""
    after: str | None = None
    while True:
        result = index.search_page(query, filters, size=page, after=after)
        yield from result.hits
        if not result.next_after:
            return
        after = result.next_after


def as_csv(hits: Iterator[SearchHit]) -> Iterator[str]:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=FIELDS, extrasaction="ignore")
    writer.writeheader()
    for n, hit in enumerate(hits, 1):
        writer.writerow({k: spreadsheet_safe(v) for k, v in hit.to_dict().items() if k in FIELDS})
        if n % 200 == 0:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()


def as_json(hits: Iterator[SearchHit]) -> Iterator[str]:
    yield "["
    for n, hit in enumerate(hits):
        row = {k: v for k, v in hit.to_dict().items() if k in FIELDS}
        yield ("," if n else "") + "\n" + json.dumps(row, ensure_ascii=False)
    yield "\n]\n"


def export(index: TranscriptIndex, query: str, filters: Filters, fmt: str) -> Iterator[str]:
    """The search's hits in ``fmt`` (csv or json), as pieces of text to write or send one after another."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r} (formats: {', '.join(FORMATS)})")
    hits = all_hits(index, query, filters)
    return as_csv(hits) if fmt == "csv" else as_json(hits)

