"""What the pipeline stored, read as what it is: the text a person said, apart from the ids, hashes and times.

A check for numbers in clear must neither pass nor fail by luck. An ETag (an
MD5 in hex) of a file with random bytes (an Ogg serial number) holds a run of
eleven decimal digits now and then, and a timestamp is a run of digits too; so
the fields that hold ids, hashes and times are known by name and by the shape
of their values (a value of another shape in such a field is read as text), and
their values are taken out of the texts that quote them (paths, reasons, logs)
before they are read. Every other string, number and key, in JSON artefacts,
database rows and logs, is read.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Fields whose values are ids, hashes or times (artefacts, reports, index, ledger), with the shape of their values.
_TIME = r"\d{4}-\d\d-\d\d(?:[T ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d:?\d\d)?)?"
ID_SHAPES = {
    "etag": re.compile(r"[0-9a-f]{32}(?:-\d{1,5})?"),  # MD5, or MinIO's multipart form
    "recording_id": re.compile(r"[0-9a-f]{24}"), "finding_id": re.compile(r"[0-9a-f]{24}"),
    "segment_id": re.compile(r"[0-9a-f]{24}-\d{5}"), "pii_policy": re.compile(r"[0-9a-f]{12}"),
    "id": re.compile(r"\d{1,9}"),  # a row number
    "hash": re.compile(r"[0-9a-f]{64}"), "row_hash": re.compile(r"[0-9a-f]{64}"),  # the access log's SHA-256
    "call_date": re.compile(_TIME), "date": re.compile(_TIME), "started_at": re.compile(_TIME),
}
TIME_SUFFIX = "_at"  # sensed_at, updated_at, erased_at, indexed_at, ...
AUDIO_SUFFIXES = frozenset({".pcm", ".flac", ".wav", ".ogg", ".mp3", ".m4a", ".opus"})
# A number as a transcript writes one: digits, alone or in groups split as the PII policy splits them
# ("4, 1, 1, 1", "4111.1111", "4111-1111", "4111 1111"): a card, an account, a mobile phone (11 digits).
SPOKEN_NUMBER = re.compile(r"\d(?:(?:, ?|[ .-])?\d){10,}")
# In free text (logs, CSV, HTML) commas and dots part columns and decimals: only spaces and dashes join digits.
LONG_NUMBER = re.compile(r"\d(?:[ -]?\d){10,}")
# In free text (a log), ids and times have formats of their own: UUIDs (Airflow's task instances) and ISO times.
FREE_TEXT_IDS = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"
                           r"|\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d(?:[.,]\d+)?)?(?:Z|[+-]\d\d:?\d\d)?")


def is_id(name: str | None, value: object) -> bool:
    """True for a value of an id, hash or time field that has that field's shape: never words someone said."""
    if name is None or not isinstance(value, (str, int)) or isinstance(value, bool):
        return False
    name = name.lower()
    shape = ID_SHAPES.get(name) or (ID_SHAPES["started_at"] if name.endswith(TIME_SUFFIX) else None)
    return shape is not None and shape.fullmatch(str(value)) is not None


@dataclass
class StoredText:
    """Every text the pipeline stored, by where it was found, and the id and hash values seen on the way.

    ``texts`` are the values of fields, read with the separators of spoken numbers;
    ``free`` are logs and other files, where commas and dots part columns.
    """

    texts: dict[str, list[str]] = field(default_factory=dict)
    free: dict[str, list[str]] = field(default_factory=dict)
    ids: set[str] = field(default_factory=set)

    def add_value(self, where: str, value: Any) -> None:
        """A JSON value: its id fields' values remembered, every other leaf and every key kept as text."""
        for name, leaf in leaves(value):
            if is_id(name, leaf):
                self.ids.add(str(leaf))
            elif leaf is not None and not isinstance(leaf, bool):
                self.texts.setdefault(where, []).append(str(leaf))

    def add_json_file(self, path: Path, where: str) -> None:
        self.add_value(where, json.loads(path.read_text(encoding="utf-8")))

    def add_text(self, where: str, text: str) -> None:
        """Words as a transcript holds them (read like a field's value)."""
        self.texts.setdefault(where, []).append(text)

    def add_free_text(self, where: str, text: str) -> None:
        """A log or a file of another format."""
        self.free.setdefault(where, []).append(text)

    def add_store(self, root: Path) -> None:
        """Every object under ``root`` but audio: JSON by its fields, any other file as free text."""
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            if path.suffix.lower() in AUDIO_SUFFIXES:
                continue
            where = str(path.relative_to(root))
            if path.suffix == ".json":
                self.add_json_file(path, where)
            else:
                self.add_free_text(where, path.read_text(errors="replace"))

    def add_sqlite(self, db: Path, tables: Iterable[str]) -> None:
        """Every row of the tables, column by column, the id and time columns known by name."""
        with sqlite3.connect(db) as conn:
            for table in tables:
                cursor = conn.execute(f"SELECT * FROM {table}")
                names = [d[0] for d in cursor.description]
                for row in cursor:
                    self.add_value(f"{db.name} {table}", dict(zip(names, row)))

    def clear_numbers(self) -> dict[str, list[str]]:
        """Where a run of digits that reads as a number shows, the known ids and times taken out first."""
        found: dict[str, list[str]] = {}
        for texts, pattern in ((self.texts, SPOKEN_NUMBER), (self.free, LONG_NUMBER)):
            for where, values in texts.items():
                for text in values:
                    hits = pattern.findall(without_ids(text, self.ids))
                    if hits:
                        found.setdefault(where, []).extend(hits)
        return found


def leaves(value: Any, name: str | None = None) -> Iterator[tuple[str | None, Any]]:
    """(field name, value) of every scalar and every key (named None) in a JSON value; list items take their
    list's name."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield None, str(key)
            yield from leaves(item, str(key))
    elif isinstance(value, list):
        for item in value:
            yield from leaves(item, name)
    else:
        yield name, value


def without_ids(text: str, ids: set[str]) -> str:
    """The text with every known id or hash value and every UUID and ISO time replaced by a space."""
    for value in sorted((v for v in ids if len(v) >= 6), key=len, reverse=True):
        text = text.replace(value, " ")
    return FREE_TEXT_IDS.sub(" ", text)
