"""The SQLite FTS5 index: Chinese and English search, filters, highlights, idempotent rewrites."""

from __future__ import annotations

from pathlib import Path

import pytest

from asr_tasks.index.query import restore_highlight
from asr_tasks.index.fts5 import index_text, match_expression
from asr_tasks.index.sqlite import SqliteIndex
from asr_tasks.models import Quarantine, Recording, Segment, Transcript, recording_id_for
from asr_tasks.states import RecordingState


def _recording(key: str, etag: str = "e1", day: str = "2026-11-27", agent: str | None = "AG-1") -> Recording:
    return Recording(
        recording_id=recording_id_for("recordings", key, etag), bucket="recordings", key=key, etag=etag,
        size=1, call_id=key.rsplit("/", 1)[-1].split(".")[0], call_date=day, agent_id=agent,
    )


def _transcript(rec: Recording, lines: list[tuple[str, float, float, str]]) -> Transcript:
    segments = [
        Segment(rec.recording_id, 0 if who == "agent" else 1, who, start, end, text)
        for who, start, end, text in lines
    ]
    return Transcript(recording=rec, duration=60.0, segments=segments, language="zh", model="m", pipeline_version="1")


@pytest.fixture
def index(tmp_path: Path) -> SqliteIndex:
    idx = SqliteIndex(tmp_path / "index.sqlite")
    zh = _recording("calls/2026/11/27/zh_call.wav", agent="AG-1")
    idx.replace_recording(_transcript(zh, [
        ("agent", 1.0, 4.5, "您好，这款理财产品保证收益，年化百分之十二。"),
        ("customer", 5.0, 7.0, "那风险大吗？"),
        ("agent", 7.5, 12.25, "稳赚不赔，您放心。"),
    ]))
    en = _recording("calls/2026/11/28/en_call.mp3", day="2026-11-28", agent="AG-2")
    idx.replace_recording(_transcript(en, [
        ("agent", 0.5, 6.0, "I can guarantee a return of twelve percent every year."),
        ("customer", 6.5, 8.0, "What returns did the fund make last year?"),
    ]))
    return idx


def test_two_character_chinese_words_are_found(index: SqliteIndex) -> None:
    hits = index.search("收益")
    assert [(h.key, h.speaker, h.start, h.end) for h in hits] == [
        ("calls/2026/11/27/zh_call.wav", "agent", 1.0, 4.5)
    ]
    assert hits[0].highlight == "您好，这款理财产品保证<em>收益</em>，年化百分之十二。"
    assert index.search("风险")[0].speaker == "customer"


def test_chinese_phrase_matches_only_consecutive_characters(index: SqliteIndex) -> None:
    assert len(index.search("保证收益")) == 1
    assert index.search("收益保证") == []  # same characters, wrong order
    assert [h.start for h in index.search("稳赚不赔")] == [7.5]


def test_english_words_stemming_and_phrases(index: SqliteIndex) -> None:
    assert {h.start for h in index.search("returns")} == {0.5, 6.5}  # porter: return ~ returns
    hits = index.search('"guarantee a return"')
    assert [h.start for h in hits] == [0.5]
    assert "<em>guarantee a return</em>" in hits[0].highlight
    assert index.search('"return guarantee"') == []
    assert index.search("GUARANTEE twelve")[0].start == 0.5  # case-insensitive, terms ANDed


def test_filters(index: SqliteIndex) -> None:
    assert {h.key for h in index.search("returns", agent="AG-2")} == {"calls/2026/11/28/en_call.mp3"}
    assert index.search("returns", agent="AG-1") == []
    assert index.search("保证", date_from="2026-11-28") == []
    assert len(index.search("保证", date_from="2026-11-27", date_to="2026-11-27")) == 1
    assert [h.speaker for h in index.search("returns", speaker="customer")] == ["customer"]


def test_query_syntax_never_errors(index: SqliteIndex) -> None:
    for query in ['"unbalanced', "AND OR NOT", "(", "*", "col:val", "NEAR(a b)", "'", "  ", "。，！"]:
        index.search(query)  # must not raise
    assert index.search("   ") == []
    assert match_expression('guarantee "a return" 收益') == 'body : "guarantee" AND body : "a return" AND body : "收 益"'


def test_rewriting_a_recording_never_duplicates(index: SqliteIndex) -> None:
    before = index.segment_count()
    rec = _recording("calls/2026/11/27/zh_call.wav", agent="AG-1")
    for _ in range(3):
        index.replace_recording(_transcript(rec, [("agent", 1.0, 4.5, "保证收益")]))
    assert index.segment_count() == before - 2
    assert len(index.search("收益")) == 1


def test_new_version_of_an_object_replaces_the_old_one(index: SqliteIndex) -> None:
    new = _recording("calls/2026/11/27/zh_call.wav", etag="e2", agent="AG-1")
    index.replace_recording(_transcript(new, [("agent", 2.0, 3.0, "没有任何承诺")]))
    assert index.search("保证收益") == []
    assert [h.recording_id for h in index.search("承诺")] == [new.recording_id]
    assert [r["recording_id"] for r in index.recordings("2026-11-27")] == [new.recording_id]


def test_states_and_quarantine(index: SqliteIndex) -> None:
    bad = _recording("calls/2026/11/27/broken.wav")
    index.record_quarantine(Quarantine(recording=bad, reason="empty file (0 bytes)", pipeline_version="1"))
    silent = _recording("calls/2026/11/27/silent.wav")
    index.replace_recording(Transcript(recording=silent, duration=20.0, segments=[], language=None, model="m",
                                       pipeline_version="1", state=RecordingState.NEEDS_REVIEW, reason="no speech detected"))
    states = {r["key"]: (r["state"], r["reason"]) for r in index.recordings("2026-11-27")}
    assert states["calls/2026/11/27/broken.wav"] == (RecordingState.QUARANTINED, "empty file (0 bytes)")
    assert states["calls/2026/11/27/silent.wav"] == (RecordingState.NEEDS_REVIEW, "no speech detected")


def test_highlight_restoration_keeps_original_spacing() -> None:
    original = "Call 保证 收益 now"
    body = index_text(original)
    highlighted = body.replace("收", "\x02收").replace("益", "益\x03")
    assert restore_highlight(original, highlighted, "[", "]") == "Call 保证 [收益] now"


def test_adjacent_matches_are_highlighted_as_one_span(index: SqliteIndex) -> None:
    [hit] = index.search("guarantee return twelve")
    assert hit.highlight == "I can <em>guarantee</em> a <em>return</em> of <em>twelve</em> percent every year."
    [hit] = index.search("every year twelve percent")
    assert hit.highlight == "I can guarantee a return of <em>twelve percent every year</em>."


def test_concurrent_indexers_of_one_object_never_collide(tmp_path: Path) -> None:
    """Processes indexing one object (the same version, and others) at once: one wins, none raises."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    with context.Pool(4) as pool:
        outcomes = pool.starmap(_index_versions, [(str(tmp_path / "index.sqlite"), worker) for worker in range(4)])
    assert outcomes == ["ok"] * 4
    rows = SqliteIndex(tmp_path / "index.sqlite").recordings("2026-11-27")
    assert len(rows) == 1  # one object, one version in the view


def test_new_index_files_opened_by_many_processes_at_once_all_open_in_wal(tmp_path: Path) -> None:
    """Switching a new file to WAL does not wait on SQLite's busy timeout: processes opening one new file at once
    (a day's workers) are retried until it is switched, instead of failing with "database is locked"."""
    import multiprocessing
    import sqlite3

    paths = [str(tmp_path / f"{n}.sqlite") for n in range(15)]
    with multiprocessing.get_context("fork").Pool(6) as pool:
        for path in paths:
            assert pool.map(_open_index, [path] * 6) == ["ok"] * 6
    for path in paths:
        assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone() == ("wal",)


def _open_index(path: str) -> str:
    SqliteIndex(Path(path))
    return "ok"


def _index_versions(path: str, worker: int) -> str:
    index = SqliteIndex(Path(path))
    for n in range(40):  # the same version (a task and its retry) and other versions, from every worker
        version = n % 2 * (worker + 1)
        rec = Recording(recording_id=f"r{version}", bucket="recordings", key="calls/2026/11/27/c.wav",
                        etag=f"e{version}", size=1, call_id="c", call_date="2026-11-27")
        index.replace_recording(Transcript(recording=rec, duration=1.0, language="en", model="m", pipeline_version="1",
                                           segments=[Segment(rec.recording_id, 0, "agent", 0.0, 1.0, "hello")]))
    return "ok"


def test_an_index_file_from_before_tags_gets_the_column(tmp_path: Path) -> None:
    """A file written before the QA tags existed is migrated in place when opened: its calls have no tags until
    an audit sets them."""
    import sqlite3
    from contextlib import closing

    path = tmp_path / "index.sqlite"
    rec = _recording("calls/2026/11/27/old.wav")
    SqliteIndex(path).replace_recording(_transcript(rec, [("agent", 1.0, 2.0, "保证收益")]))
    with closing(sqlite3.connect(path)) as db, db:
        db.execute("ALTER TABLE recordings DROP COLUMN tags")
    index = SqliteIndex(path)
    assert index.recording(rec.recording_id)["tags"] == []  # type: ignore[index]
    index.replace_tags("2026-11-27", {rec.recording_id: ["complaint"]})
    assert index.recording(rec.recording_id)["tags"] == ["complaint"]  # type: ignore[index]
