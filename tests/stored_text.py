"""What the pipeline stored, read as what it is: the text a person said, apart from the ids, hashes and times.

A check for numbers in clear must neither pass nor fail by luck. An ETag (an
MD5 in hex) of a file with random bytes (an Ogg serial number) holds a run of
eleven decimal digits now and then, and a timestamp is a run of digits too; so
the fields that hold ids, hashes and times are known by name and left out,
and their values are taken out of every free text (paths, logs) before it is
read. Every other string and number, in JSON artefacts, database rows and
logs, is read.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Fields whose values are ids, hashes or times, in the artefacts, the reports, the index and the ledger.
HASH_FIELDS = frozenset({"etag", "recording_id", "segment_id", "pii_policy", "id", "finding_id", "run_id",
                         "sha256", "hash", "prev_hash"})
TIME_FIELDS = frozenset({"call_date", "date", "started_at"})
TIME_SUFFIXES = ("_at", "_time")
AUDIO_SUFFIXES = frozenset({".pcm", ".flac", ".wav", ".ogg", ".mp3", ".m4a", ".opus"})
# A number as a transcript writes one: digits, alone or in groups split by a space or a dash.
LONG_NUMBER = re.compile(r"\d(?:[ -]?\d){10,}")  # a card, an account, a mobile phone (11 digits)
# In free text (a log), ids and times have formats of their own: UUIDs (Airflow's task instances) and ISO times.
FREE_TEXT_IDS = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"
                           r"|\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d(?:[.,]\d+)?)?(?:Z|[+-]\d\d:?\d\d)?")


def is_id_field(name: str) -> bool:
    """True for a field that holds an id, a hash or a time, never words someone said."""
    name = name.lower()
    return name in HASH_FIELDS or name in TIME_FIELDS or name.endswith(TIME_SUFFIXES)


@dataclass
class StoredText:
    """Every text the pipeline stored, by where it was found, and the id and hash values seen on the way."""

    texts: dict[str, list[str]] = field(default_factory=dict)
    ids: set[str] = field(default_factory=set)

    def add_value(self, where: str, value: Any) -> None:
        """A JSON value: its id fields' values remembered, every other leaf kept as text."""
        for name, leaf in leaves(value):
            if name is not None and is_id_field(name):
                self.ids.add(str(leaf))
            elif leaf is not None and not isinstance(leaf, bool):
                self.texts.setdefault(where, []).append(str(leaf))

    def add_json_file(self, path: Path, where: str) -> None:
        self.add_value(where, json.loads(path.read_text(encoding="utf-8")))

    def add_text(self, where: str, text: str) -> None:
        self.texts.setdefault(where, []).append(text)

    def add_store(self, root: Path) -> None:
        """Every object under ``root`` but audio: JSON by its fields, any other file as free text."""
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            if path.suffix.lower() in AUDIO_SUFFIXES:
                continue
            where = str(path.relative_to(root))
            if path.suffix == ".json":
                self.add_json_file(path, where)
            else:
                self.add_text(where, path.read_text(errors="replace"))

    def add_sqlite(self, db: Path, tables: Iterable[str]) -> None:
        """Every row of the tables, column by column, the id and time columns known by name."""
        with sqlite3.connect(db) as conn:
            for table in tables:
                cursor = conn.execute(f"SELECT * FROM {table}")
                names = [d[0] for d in cursor.description]
                for row in cursor:
                    self.add_value(f"{db.name} {table}", dict(zip(names, row)))

    def clear_numbers(self, pattern: re.Pattern[str] = LONG_NUMBER) -> dict[str, list[str]]:
        """Where a run of digits the pattern calls a number shows, the known ids and times taken out first."""
        found: dict[str, list[str]] = {}
        for where, texts in self.texts.items():
            for text in texts:
                hits = pattern.findall(without_ids(text, self.ids))
                if hits:
                    found.setdefault(where, []).extend(hits)
        return found


def leaves(value: Any, name: str | None = None) -> Iterator[tuple[str | None, Any]]:
    """(field name, value) of every scalar in a JSON value; list items take their list's name."""
    if isinstance(value, dict):
        for key, item in value.items():
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
