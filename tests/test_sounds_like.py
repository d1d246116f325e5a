"""Search that finds what was said where the model wrote it wrong: the sound forms, and tolerant terms on both
backends alike (SQLite, and Elasticsearch 9)."""

from __future__ import annotations

import sqlite3

import pytest
from misheard import MISHEARD, UNRELATED
from test_index_contract import _recording, _transcript, es_index  # noqa: F401 (a fixture)

from asr_tasks.config import Settings
from asr_tasks.index.backends import open_index
from asr_tasks.index.base import TranscriptIndex
from asr_tasks.index.query import Filters, Term, parse
from asr_tasks.index.fts5 import match_expression
from asr_tasks.index.sqlite import SqliteIndex
from asr_tasks.text.sounds import Tolerant, budget, english_sound, fold, forms, spans

SAID_KEY = "calls/2026/11/20/said.wav"  # the words as they were said, each in a segment of its own
UNRELATED_KEY = "calls/2026/11/20/unrelated.wav"


def misheard_key(n: int) -> str:
    return f"calls/2026/11/2{n % 2}/misheard_{n:02d}.wav"


def test_english_sounds_fold_what_a_telephone_line_blurs() -> None:
    assert english_sound("safe") == english_sound("faith") == english_sound("face") == "faf"
    assert english_sound("free") == english_sound("three")
    assert english_sound("this") != english_sound("safe") != english_sound("these")
    assert english_sound("four") != english_sound("for") and english_sound("sue") != english_sound("the")
    assert english_sound("knight") == english_sound("night") and english_sound("phone") == english_sound("fone")
    assert english_sound("page")[-1] == "j" and english_sound("cell")[0] == english_sound("sell")[0]
    assert english_sound("a4") == "a4" and english_sound("café") == "café"  # not spelt in English letters


def test_chinese_sounds_are_pinyin_folded_and_tones_keep_the_tone() -> None:
    assert forms("汇报") == {"tokens": "汇 报", "sounds": "hui bao", "tones": "hui4 bao4"}
    assert forms("会报")["sounds"] == forms("汇报")["sounds"] and forms("回报")["tones"] != forms("汇报")["tones"]
    assert [fold(s) for s in ("zhi", "chang", "shen", "nian", "n")] == ["zi", "can", "sen", "lian", "n"]
    assert forms("银行")["tones"] == "yin2 hang2"  # read in context: 行 of 银行 is hang
    # One token per position in each form, whatever the script: a phrase stays a phrase in each.
    mixed = forms("我们的 training 今天 OK 吗？")
    assert {len(f.split()) for f in mixed.values()} == {8}


def test_a_words_budget_grows_with_it_and_inside_a_phrase() -> None:
    assert [budget(w, False) for w in ("go", "bad", "good", "safety", "收益", "a4b")] == [0, 1, 1, 2, 0, 0]
    assert budget("good", True) == 2 and budget("bad", True) == 1


def test_spans_say_how_each_match_was_found() -> None:
    assert [s.kind for s in spans("We offer training.", Tolerant.of("training"))] == ["exact"]  # type: ignore[arg-type]
    assert [s.kind for s in spans("我们会报一下", Tolerant.of("汇报"))] == ["sound"]  # type: ignore[arg-type]
    found = spans("go after noon then", Tolerant.of("good afternoon"))  # type: ignore[arg-type]
    assert [(s.start, s.end, s.kind) for s in found] == [(0, 13, "fuzzy")]
    assert spans("a late fee", Tolerant.of("lose")) == []  # type: ignore[arg-type]  # two edits: one word alone
    assert spans("go on", Tolerant.of("do")) == []  # type: ignore[arg-type]  # two letters: no edit
    assert spans("this and these", Tolerant.of("safe")) == []  # type: ignore[arg-type]


@pytest.mark.parametrize(("query", "text"), [
    ("visa", "This is the one."), ("sue", "The note."), ("~you", "I said so."), ("sofa", "So far, so good."),
    ('"refund it"', "We refund the fee."), ('"refund it"', "A refund, then."), ('"pay it"', "Please pay now."),
    ('"any one"', "Any news?"), ("these", "The fees are waived."),
    ("sorry", "Sorted for you."), ("是", "我认识他。"), ('"fund risk"', "The fund is safe."),
])
def test_a_tolerant_term_does_not_match_its_neighbours(query: str, text: str) -> None:
    """Common short words are their own sound (or ``~sue`` would find every "the", ``~four`` every "for"), a
    lone Chinese character matches as written, and two words heard as one keep both (``refund it`` is not
    ``refund``)."""
    assert spans(text, Tolerant.of(query.lstrip("~").strip('"'))) == []  # type: ignore[arg-type]


def test_the_query_language_marks_tolerant_terms() -> None:
    node = parse('~"good afternoon" | risk -~fees')
    assert node is not None and "tolerant=True" in repr(node)
    assert parse("收益 风险", sounds_like=True) == parse("~收益 ~风险")
    assert parse("e~mail") == Term("e~mail") and parse("~") is None
    assert match_expression("~收益").startswith('(body : "收 益" OR tones : "shou10 yi40" OR sounds : "sou0 yi0"')


@pytest.fixture
def misheard_index(index_backend: TranscriptIndex) -> TranscriptIndex:
    """Each misrecognition a recording of its own, the words as said in another, unrelated lines in a third."""
    idx = index_backend
    for n, (_, written, _) in enumerate(MISHEARD):
        idx.replace_recording(_transcript(_recording(misheard_key(n), agent=f"AG-{n}"),
                                          [("agent", 1.0, 4.0, written)]))
    said = [query.strip('"') for query, _, _ in MISHEARD]
    idx.replace_recording(_transcript(_recording(SAID_KEY), [("agent", 5.0 * n, 5.0 * n + 4, text)
                                                              for n, text in enumerate(said)]))
    idx.replace_recording(_transcript(_recording(UNRELATED_KEY), [("customer", 5.0 * n, 5.0 * n + 4, text)
                                                                   for n, text in enumerate(UNRELATED)]))
    return idx


@pytest.fixture(params=["sqlite", pytest.param("elasticsearch", marks=pytest.mark.elasticsearch)])
def index_backend(request: pytest.FixtureRequest, settings: Settings) -> TranscriptIndex:
    return open_index(settings.index) if request.param == "sqlite" else request.getfixturevalue("es_index")


@pytest.mark.parametrize(("n", "query", "kind"), [(n, q, kind) for n, (q, _, kind) in enumerate(MISHEARD)])
def test_a_tolerant_query_finds_what_the_model_wrote_wrong(misheard_index: TranscriptIndex, n: int, query: str,
                                                          kind: str) -> None:
    exact = {h.key for h in misheard_index.search(query, limit=100)}
    assert misheard_key(n) not in exact and SAID_KEY in exact  # exact search: as before

    for hits in (misheard_index.search(f"~{query}", limit=100),
                 misheard_index.search_page(query, Filters(sounds_like=True), size=100).hits):
        keys = [h.key for h in hits]
        assert misheard_key(n) in keys and UNRELATED_KEY not in keys, keys
        assert keys[0] == SAID_KEY and hits[0].match == "exact"  # exact hits first
        assert {h.match for h in hits if h.key != SAID_KEY} <= {"sound", "fuzzy"}
        hit = next(h for h in hits if h.key == misheard_key(n))
        assert hit.match == kind and "<em>" in hit.highlight, hit


def test_tolerant_terms_combine_with_the_rest_of_the_syntax(misheard_index: TranscriptIndex) -> None:
    def keys(query: str, **filters: str) -> set[str]:
        return {h.key for h in misheard_index.search(query, limit=100, **filters)}

    assert keys("~汇报 | ~training") == {SAID_KEY, misheard_key(0), misheard_key(7)}
    assert keys("~汇报 季度") == {misheard_key(0)}
    assert keys("~汇报 -季度") == {SAID_KEY}
    # a sounds-like search widens what it asks for, not what it excludes: -会报 hides the one that wrote it so
    widened = misheard_index.search_page("汇报 -会报", Filters(sounds_like=True), size=100).hits
    assert {h.key for h in widened} == {SAID_KEY}
    assert not misheard_index.search_page("汇报 -~会报", Filters(sounds_like=True), size=100).hits
    assert keys('~"refund it"') == keys('~"the visa"') == keys('~"lovely fund"') == set()  # neighbours in letters or sound of nothing asked
    # a hit says how the query matched it: by either side of an OR, the surer
    either = {h.key: h.match for h in misheard_index.search("季度 | ~training", limit=100)}
    assert either == {misheard_key(0): "exact", misheard_key(7): "fuzzy", SAID_KEY: "exact"}
    assert keys("~training", agent="AG-7") == {misheard_key(7)}
    counts = misheard_index.counts("~保证收益")
    assert sum(c.recordings for c in counts) == 2 and sum(c.segments for c in counts) == 2
    calls = misheard_index.calls("~保证收益", Filters(date_from="2026-11-21"))
    assert [c["key"] for c in calls.calls] == [misheard_key(1)]


def test_pages_of_a_tolerant_search_cover_every_hit_once(misheard_index: TranscriptIndex) -> None:
    query, filters = "汇报 | training | safe | 收益 | afternoon", Filters(sounds_like=True)
    everything = [(h.key, h.start) for h in misheard_index.search_page(query, filters, size=100).hits]
    seen, after = [], None
    while True:
        page = misheard_index.search_page(query, filters, size=2, after=after)
        seen += [(h.key, h.start) for h in page.hits]
        if not page.next_after:
            break
        after = page.next_after
    assert seen == everything and len(set(seen)) == len(seen) >= 8


def test_a_misheard_words_spelling_leaves_with_its_last_segment(settings: Settings) -> None:
    index = open_index(settings.index)
    assert isinstance(index, SqliteIndex)
    rec = _recording("calls/2026/11/27/zanzibar.wav")
    index.replace_recording(_transcript(rec, [("agent", 0.0, 1.0, "the zanzibarian trading desk")]))
    assert [h.key for h in index.search("~zanzibarians")] == [rec.key]
    index.delete_recording(rec.bucket, rec.key)
    with sqlite3.connect(index.path) as db:
        assert db.execute("SELECT count(*) FROM vocabulary WHERE word LIKE 'zanzibar%'").fetchone() == (0,)
        assert db.execute("SELECT segments FROM vocabulary WHERE word = 'trading'").fetchone() is None
    assert index.search("~zanzibarians") == []
