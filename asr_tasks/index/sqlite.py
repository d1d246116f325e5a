"""The embedded index: SQLite with FTS5, searching Chinese and English alike.

Every CJK character is a token of its own and each query term a phrase, so a
consecutive run of characters matches exactly like a substring, whether it is a
two-character word or a long phrase; English goes through the porter stemmer, so
"returns" finds "return". A segment's words sound like what its columns of sounds
and tones say, and its English words are counted in a vocabulary, for tolerant
terms (``fts5.py``).
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from asr_tasks.wal import write_ahead
from asr_tasks.index.base import TranscriptIndex, recording_fields, tag_list, transcript_summary
from asr_tasks.index.fts5 import FORM_WEIGHTS, FTS_COLUMNS, forget_words, insert_words, match_expression
from asr_tasks.index.query import (
    HL_CLOSE,
    HL_OPEN,
    SCORE_BANDS,
    AgentDayCount,
    CallsPage,
    Filters,
    SearchPage,
    blank,
    confidence,
    decode_cursor,
    encode_cursor,
)
from asr_tasks.index.query import parse as parse_query
from asr_tasks.index.tolerant import marked
from asr_tasks.models import Quarantine, SearchHit, Segment, Transcript

_RECORDINGS_COLUMN = re.compile(r"\br\.")  # a filter clause that reads the recordings table (alias r)
SCHEMA = """
CREATE TABLE IF NOT EXISTS recordings (
    recording_id TEXT PRIMARY KEY,
    bucket TEXT NOT NULL,
    key TEXT NOT NULL,
    etag TEXT NOT NULL,
    size INTEGER,
    call_id TEXT,
    call_date TEXT,
    agent_id TEXT,
    customer_id TEXT,
    direction TEXT,
    started_at TEXT,
    duration REAL,
    speech_seconds REAL,
    language TEXT,
    model TEXT,
    pipeline_version TEXT,
    state TEXT NOT NULL,
    reason TEXT,
    quality TEXT,
    quality_failures TEXT,
    segments INTEGER NOT NULL DEFAULT 0,
    analytics TEXT,
    non_talk_share REAL,
    agent_interruptions INTEGER,
    customer_interruptions INTEGER,
    tags TEXT,
    score REAL,
    updated_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS recordings_key ON recordings(bucket, key);
CREATE INDEX IF NOT EXISTS recordings_date ON recordings(call_date);
CREATE TABLE IF NOT EXISTS segments (
    segment_id TEXT PRIMARY KEY,
    recording_id TEXT NOT NULL REFERENCES recordings(recording_id),
    seq INTEGER NOT NULL,
    channel INTEGER NOT NULL,
    speaker TEXT NOT NULL,
    start REAL NOT NULL,
    "end" REAL NOT NULL,
    text TEXT NOT NULL,
    avg_logprob REAL,
    no_speech_prob REAL,
    language TEXT
);
CREATE INDEX IF NOT EXISTS segments_recording ON segments(recording_id);
CREATE TABLE IF NOT EXISTS findings (
    finding_id TEXT PRIMARY KEY,
    call_date TEXT NOT NULL,
    recording_id TEXT NOT NULL,
    rule_id TEXT NOT NULL,
    doc TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS findings_date ON findings(call_date);
CREATE VIRTUAL TABLE IF NOT EXISTS segments_fts USING fts5(
    body, tokens, sounds, tones, tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TABLE IF NOT EXISTS vocabulary (word TEXT PRIMARY KEY, segments INTEGER NOT NULL) WITHOUT ROWID;
"""
# Columns of recordings added after index files were first written, and their types.
ADDED_COLUMNS = {"size": "INTEGER", "quality": "TEXT", "quality_failures": "TEXT", "analytics": "TEXT",
                 "non_talk_share": "REAL", "agent_interruptions": "INTEGER", "customer_interruptions": "INTEGER",
                 "tags": "TEXT", "score": "REAL"}


def _recording_row(row: sqlite3.Row) -> dict[str, Any]:
    """A recording's row as the view gives it, its analytics and tags decoded."""
    found = dict(row)
    found["analytics"] = json.loads(found["analytics"]) if found.get("analytics") else None
    found["tags"] = json.loads(found["tags"]) if found.get("tags") else []
    return found


def _stored_tags(tags: list[str]) -> str | None:
    """A recording's tags as its ``tags`` column holds them: a JSON array, NULL for none."""
    return json.dumps(tag_list(tags), ensure_ascii=False) if tags else None


class SqliteIndex(TranscriptIndex):
    """Segments and recordings in one SQLite file; safe to reopen, idempotent to rewrite."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with closing(self._connect()) as db, db:
            write_ahead(db, str(self.path))
            db.executescript(SCHEMA)
            have = {r[1] for r in db.execute("PRAGMA table_info(recordings)")}
            for name, kind in ADDED_COLUMNS.items():  # an index file written before these columns existed
                if name not in have:
                    db.execute(f"ALTER TABLE recordings ADD COLUMN {name} {kind}")
            if [r[1] for r in db.execute("PRAGMA table_info(segments_fts)")] != FTS_COLUMNS:
                self._rebuild_words(db)

    @staticmethod
    def _rebuild_words(db: sqlite3.Connection) -> None:
        """An index file written before the tokens, sounds and tones were: its full-text table and vocabulary
        written anew from its segments."""
        db.execute("DROP TABLE segments_fts")
        db.execute("DELETE FROM vocabulary")
        db.executescript(SCHEMA)
        for rowid, text in db.execute("SELECT rowid, text FROM segments").fetchall():
            insert_words(db, rowid, text)

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=60)
        db.row_factory = sqlite3.Row
        db.execute("PRAGMA secure_delete = ON")  # a deleted row's bytes are overwritten, not left in a free page
        return db

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction that holds the write lock from its first statement: what it reads to replace
        (an object's earlier versions) cannot change under it, so concurrent indexers never collide."""
        db = self._connect()
        db.isolation_level = None  # transactions by hand: BEGIN IMMEDIATE takes the lock before the first read
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        finally:
            db.close()

    @staticmethod
    def _delete_versions(db: sqlite3.Connection, bucket: str, key: str, recording_id: str = "") -> int:
        """Drop every version of the object (any ETag), and the recording with this id; how many went."""
        old = [r[0] for r in db.execute(
            "SELECT recording_id FROM recordings WHERE (bucket = ? AND key = ?) OR recording_id = ?",
            (bucket, key, recording_id),
        )]
        for rid in old:
            forget_words(db, [text for (text,) in db.execute("SELECT text FROM segments WHERE recording_id = ?",
                                                             (rid,))])
            db.execute("DELETE FROM segments_fts WHERE rowid IN (SELECT rowid FROM segments WHERE recording_id = ?)",
                       (rid,))
            db.execute("DELETE FROM segments WHERE recording_id = ?", (rid,))
            db.execute("DELETE FROM recordings WHERE recording_id = ?", (rid,))
        return len(old)

    def _replace_recording_row(self, db: sqlite3.Connection, row: dict[str, Any]) -> None:
        """Drop every earlier version of the same object (any ETag), then write this one, with the QA tags and
        score this version had (a reindex keeps them; another version has none until its audit)."""
        kept = db.execute("SELECT tags, score FROM recordings WHERE recording_id = ?",
                          (row["recording_id"],)).fetchone()
        row["tags"], row["score"] = (kept["tags"], kept["score"]) if kept else (None, None)
        self._delete_versions(db, row["bucket"], row["key"], row["recording_id"])
        row["updated_at"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
        cols = ", ".join(f'"{c}"' for c in row)
        db.execute(f"INSERT INTO recordings ({cols}) VALUES ({', '.join('?' * len(row))})", list(row.values()))

    def replace_recording(self, transcript: Transcript) -> int:
        """Index one recording's segments, replacing whatever was indexed for it before."""
        rec = transcript.recording
        row = {**recording_fields(rec), **transcript_summary(transcript)}
        row["quality_failures"] = ",".join(row["quality_failures"]) or None
        row["analytics"] = json.dumps(row["analytics"], ensure_ascii=False) if row["analytics"] else None
        with self._write() as db:
            self._replace_recording_row(db, row)
            for seq, seg in enumerate(transcript.segments):
                cur = db.execute(
                    'INSERT INTO segments (segment_id, recording_id, seq, channel, speaker, start, "end", text,'
                    " avg_logprob, no_speech_prob, language) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                    (f"{rec.recording_id}-{seq:05d}", rec.recording_id, seq, seg.channel, seg.speaker,
                     seg.start, seg.end, seg.text, seg.avg_logprob, seg.no_speech_prob, seg.language),
                )
                insert_words(db, int(cur.lastrowid or 0), seg.text)
        return len(transcript.segments)

    def record_quarantine(self, quarantine: Quarantine) -> None:
        row = {
            **recording_fields(quarantine.recording),
            "pipeline_version": quarantine.pipeline_version,
            "state": quarantine.state,
            "reason": quarantine.reason,
        }
        with self._write() as db:
            self._replace_recording_row(db, row)

    def search_page(
        self,
        query: str,
        filters: Filters = Filters(),
        size: int = 20,
        after: str | None = None,
        open_tag: str = "<em>",
        close_tag: str = "</em>",
    ) -> SearchPage:
        """Hits by relevance (bm25, ties in index order; filters alone: index order); keyset-paged, so deep
        pages stay cheap.

        The page is chosen on the FTS table alone (joined only for the filters in use); text,
        recording and highlight are then read for its rows only.
        """
        matched = self._matching(query, filters, joins=False)
        if matched is None:
            return SearchPage([])
        sql, params, expression = matched
        ranked = (f"segments_fts.rowid AS rowid, bm25(segments_fts, {FORM_WEIGHTS})" if expression
                  else "s.rowid AS rowid, 0.0")
        page_sql = f"SELECT rowid, score FROM (SELECT {ranked} AS score {sql})"
        if after is not None:
            page_sql += " WHERE (score, rowid) > (?, ?)"
            params = [*params, *decode_cursor(after, 2)]
        page_sql += " ORDER BY score, rowid LIMIT ?"
        with closing(self._connect()) as db:
            keys = db.execute(page_sql, [*params, size + 1]).fetchall()
            more = len(keys) > size
            keys = keys[:size]
            rows = self._hit_rows(db, [k["rowid"] for k in keys], expression) if keys else {}
        hits = []
        node = parse_query(query, filters.sounds_like) if expression else None
        for k in keys:
            row = rows[k["rowid"]]
            highlight, match = marked(row["text"], row["hl"], node, open_tag, close_tag)
            hits.append(SearchHit(
                recording_id=row["recording_id"],
                key=row["key"],
                call_date=row["call_date"] or "",
                speaker=row["speaker"],
                channel=row["channel"],
                start=row["start"],
                end=row["end"],
                text=row["text"],
                highlight=highlight,
                match=match,
                agent_id=row["agent_id"],
                score=round(-k["score"], 4),
                quality=row["quality"],
                confidence=confidence(row["avg_logprob"]),
            ))
        cursor = encode_cursor([keys[-1]["score"], keys[-1]["rowid"]]) if more and keys else None
        return SearchPage(hits, cursor)

    @staticmethod
    def _hit_rows(db: sqlite3.Connection, rowids: list[int], expression: str | None) -> dict[int, sqlite3.Row]:
        """A page's segments with their recording's fields and highlight (none without words), by rowid."""
        if expression:
            source = "segments_fts JOIN segments s ON s.rowid = segments_fts.rowid"
            marks, where = f"highlight(segments_fts, 0, '{HL_OPEN}', '{HL_CLOSE}')", "segments_fts MATCH ? AND segments_fts"
        else:
            source, marks, where = "segments s", "s.text", "s"
        return {row["rowid"]: row for row in db.execute(
            f"SELECT s.rowid AS rowid, s.*, r.key, r.call_date, r.agent_id, r.quality, {marks} AS hl FROM {source}"
            f" JOIN recordings r ON r.recording_id = s.recording_id WHERE {where}.rowid IN ({', '.join('?' * len(rowids))})",
            [*([expression] if expression else []), *rowids],
        )}

    def calls(self, query: str, filters: Filters = Filters(), size: int = 20, after: str | None = None) -> CallsPage:
        """The matching calls' recording rows by day, key and id (keyset-paged), each with its matching hits."""
        matched = self._matching(query, filters)
        if matched is None:
            return CallsPage([])
        sql, params, _ = matched
        order = "coalesce(r.call_date, ''), r.key, r.recording_id"
        page_sql = (f"SELECT r.*, m.hits FROM recordings r JOIN (SELECT s.recording_id AS rid, count(*) AS hits {sql}"
                    " GROUP BY s.recording_id) m ON m.rid = r.recording_id")
        if after is not None:
            page_sql += f" WHERE ({order}) > (?, ?, ?)"
            params = [*params, *decode_cursor(after, 3)]
        with closing(self._connect()) as db:
            rows = [_recording_row(r) for r in db.execute(f"{page_sql} ORDER BY {order} LIMIT ?", [*params, size + 1])]
        more, rows = len(rows) > size, rows[:size]
        last = rows[-1] if rows else {}
        cursor = encode_cursor([last["call_date"] or "", last["key"], last["recording_id"]]) if more and rows else None
        return CallsPage(rows, cursor)

    def counts(self, query: str, filters: Filters = Filters()) -> list[AgentDayCount]:
        """Matching segments and recordings per agent and day, for "who said it, and when"."""
        matched = self._matching(query, filters)
        if matched is None:
            return []
        sql, params, _ = matched
        with closing(self._connect()) as db:
            rows = db.execute(
                "SELECT r.agent_id, r.call_date, count(*) AS segments, count(DISTINCT s.recording_id) AS recordings"
                f" {sql} GROUP BY r.agent_id, r.call_date ORDER BY r.agent_id, r.call_date",
                params,
            ).fetchall()
        return [AgentDayCount(r["agent_id"], r["call_date"], r["segments"], r["recordings"]) for r in rows]

    def rule_counts(self, query: str, filters: Filters = Filters()) -> dict[str, int]:
        return self._per_call(query, filters, "SELECT f.rule_id, count(DISTINCT f.recording_id) FROM findings f"
                              " WHERE f.recording_id IN ({calls}) GROUP BY f.rule_id ORDER BY f.rule_id")

    def tag_counts(self, query: str, filters: Filters = Filters()) -> dict[str, int]:
        return self._per_call(query, filters, "SELECT t.value, count(*) FROM recordings c, json_each(c.tags) t"
                              " WHERE c.recording_id IN ({calls}) GROUP BY t.value ORDER BY t.value")

    def score_counts(self, query: str, filters: Filters = Filters()) -> dict[str, int]:
        bands = " ".join(f"WHEN c.score >= {low} THEN '{name}'" for name, low in SCORE_BANDS)
        return self._per_call(query, filters, f"SELECT CASE {bands} END AS band, count(*) FROM recordings c"
                              " WHERE c.recording_id IN ({calls}) AND c.score IS NOT NULL GROUP BY band")

    def _per_call(self, query: str, filters: Filters, counting: str) -> dict[str, int]:
        """A facet of the calls the search matches: ``counting`` selects (name, calls) rows from ``{calls}``, the
        ids of those calls."""
        matched = self._matching(query, filters)
        if matched is None:
            return {}
        sql, params, _ = matched
        with closing(self._connect()) as db:
            rows = db.execute(counting.format(calls=f"SELECT s.recording_id {sql}"), params).fetchall()
        return {r[0]: r[1] for r in rows}

    def _matching(self, query: str, filters: Filters,
                  joins: bool = True) -> tuple[str, list[Any], str | None] | None:
        """FROM/WHERE of the segments matching the query and filters, its parameters (the MATCH expression
        first), and that expression: None for a blank query with filters, which matches every segment they let
        through (no full-text table then).

        ``joins=False`` joins segments (s) and recordings (r) only as far as the filters need them.
        """
        with closing(self._connect()) as db:
            expression = match_expression(query, filters.sounds_like, db)
        if expression is None and not (blank(query) and filters.narrows()):
            return None
        where = ["segments_fts MATCH ?"] if expression else []
        params: list[Any] = [expression] if expression else []
        for clause, value in (("r.call_date >= ?", filters.date_from), ("r.call_date <= ?", filters.date_to),
                              ("r.agent_id = ?", filters.agent), ("s.speaker = ?", filters.speaker),
                              ("r.quality = ?", filters.quality),
                              ("r.non_talk_share >= ?", filters.min_non_talk_share),
                              ("r.agent_interruptions >= ?", filters.min_agent_interruptions),
                              ("r.customer_interruptions >= ?", filters.min_customer_interruptions),
                              ("EXISTS (SELECT 1 FROM findings f WHERE f.recording_id = s.recording_id"
                               " AND f.rule_id = ?)", filters.rule),
                              ("r.score >= ?", filters.min_score), ("r.score <= ?", filters.max_score),
                              *(("EXISTS (SELECT 1 FROM json_each(r.tags) t WHERE t.value = ?)", tag)
                                for tag in filters.tags)):
            if value is not None and value != "":
                where.append(clause)
                params.append(value)
        if filters.agents is not None:  # the calls one may see: none at all where no agent is theirs
            where.append(f"r.agent_id IN ({', '.join('?' * len(filters.agents)) or 'NULL'})")
            params.extend(sorted(filters.agents))
        if expression is None:
            return (f"FROM segments s JOIN recordings r ON r.recording_id = s.recording_id WHERE {' AND '.join(where)}",
                    params, None)
        tables = "FROM segments_fts"
        if joins or len(where) > 1:
            tables += " JOIN segments s ON s.rowid = segments_fts.rowid"
        if joins or any(_RECORDINGS_COLUMN.search(clause) for clause in where):
            tables += " JOIN recordings r ON r.recording_id = s.recording_id"
        return f"{tables} WHERE {' AND '.join(where)}", params, expression

    def recording(self, recording_id: str) -> dict[str, Any] | None:
        """One recording's row (bucket, key, call date, state, ...), e.g. to play its audio."""
        with closing(self._connect()) as db:
            row = db.execute("SELECT * FROM recordings WHERE recording_id = ?", (recording_id,)).fetchone()
        return None if row is None else _recording_row(row)

    def delete_recording(self, bucket: str, key: str) -> int:
        with self._write() as db:
            return self._delete_versions(db, bucket, key)

    def purge_deleted(self) -> None:
        """FTS5 keeps a deleted row's terms in its b-tree until its segments merge: merge them all, then copy
        the write-ahead log into the file and empty it (it holds the pages as they were)."""
        with self._write() as db:
            db.execute("INSERT INTO segments_fts(segments_fts) VALUES ('optimize')")
        with closing(self._connect()) as db:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def segments(self, recording_id: str) -> list[Segment]:
        with closing(self._connect()) as db:
            rows = db.execute('SELECT recording_id, channel, speaker, start, "end", text, avg_logprob, no_speech_prob,'
                              " language FROM segments WHERE recording_id = ? ORDER BY seq", (recording_id,))
            return [Segment(**dict(row)) for row in rows]

    def recordings(self, call_date: str | None = None) -> list[dict[str, Any]]:
        """The day's recording documents, as the view shows them (quality, state and reason copied from the gate)."""
        sql = ("SELECT recording_id, key, call_date, state, reason, quality, quality_failures, segments, model,"
               " pipeline_version FROM recordings")
        params: list[Any] = []
        if call_date:
            sql += " WHERE call_date = ?"
            params.append(call_date)
        with closing(self._connect()) as db:
            return [dict(r) for r in db.execute(sql + " ORDER BY key", params)]

    def replace_findings(self, call_date: str, findings: list[dict[str, Any]]) -> None:
        """The day's audit findings, replacing any earlier audit of that day."""
        with self._write() as db:
            db.execute("DELETE FROM findings WHERE call_date = ?", (call_date,))
            db.executemany(
                "INSERT INTO findings (finding_id, call_date, recording_id, rule_id, doc) VALUES (?,?,?,?,?)",
                [(f["finding_id"], call_date, f["recording_id"], f["rule_id"], json.dumps(f, ensure_ascii=False))
                 for f in findings],
            )

    def findings(self, call_date: str) -> list[dict[str, Any]]:
        with closing(self._connect()) as db:
            rows = db.execute("SELECT doc FROM findings WHERE call_date = ? ORDER BY rowid", (call_date,)).fetchall()
        return [json.loads(r["doc"]) for r in rows]

    def replace_tags(self, call_date: str, tags: dict[str, list[str]]) -> None:
        """The day's audit tags on its recordings' rows, replacing any earlier audit of that day."""
        with self._write() as db:
            ids = [r[0] for r in db.execute("SELECT recording_id FROM recordings WHERE call_date = ?", (call_date,))]
            db.executemany("UPDATE recordings SET tags = ? WHERE recording_id = ?",
                           [(_stored_tags(tags.get(rid, [])), rid) for rid in ids])

    def replace_scores(self, call_date: str, scores: dict[str, float | None]) -> None:
        """The day's scores on its recordings' rows, replacing any earlier audit of that day."""
        with self._write() as db:
            ids = [r[0] for r in db.execute("SELECT recording_id FROM recordings WHERE call_date = ?", (call_date,))]
            db.executemany("UPDATE recordings SET score = ? WHERE recording_id = ?",
                           [(scores.get(rid), rid) for rid in ids])

    def segment_count(self) -> int:
        with closing(self._connect()) as db:
            return int(db.execute("SELECT count(*) FROM segments").fetchone()[0])
