"""One contract for every TranscriptIndex: SQLite, and Elasticsearch 9 (a node the tests start, or ES_URL's cluster).

The same questions must get the same answers from both backends: words and
phrases in Chinese and English, AND/OR/NOT, filters, highlights, pages, counts,
states, and rewrites that replace instead of duplicating.
"""

from __future__ import annotations

import json
import math
import os
import uuid
from typing import Any, Iterator

import pytest
from conftest import EsCluster

from asr_tasks.config import IndexSettings, Settings
from asr_tasks.index.backends import open_index
from asr_tasks.index.base import TranscriptIndex
from asr_tasks.index.elasticsearch import ElasticsearchIndex, ElasticsearchIndexError
from asr_tasks.index.export import export
from asr_tasks.index.query import CursorError, Filters
from asr_tasks.models import Quarantine, Recording, Segment, Transcript, recording_id_for
from asr_tasks.states import RecordingState

ZH_KEY = "calls/2026/11/27/zh_call.wav"
EN_KEY = "calls/2026/11/28/en_call.mp3"
OLD_KEY = "calls/2025/12/31/old_call.wav"


def _recording(key: str, etag: str = "e1", agent: str | None = "AG-1") -> Recording:
    day = "-".join(key.split("/")[1:4])
    return Recording(
        recording_id=recording_id_for("recordings", key, etag), bucket="recordings", key=key, etag=etag,
        size=1, call_id=key.rsplit("/", 1)[-1].split(".")[0], call_date=day, agent_id=agent,
    )


def _transcript(rec: Recording, lines: list[tuple[str, float, float, str]], quality: str = "pass") -> Transcript:
    segments = [Segment(rec.recording_id, 0 if who == "agent" else 1, who, start, end, text)
                for who, start, end, text in lines]
    return Transcript(recording=rec, duration=60.0, segments=segments, language="zh", model="m",
                      pipeline_version="1", quality=quality)


def _fill(idx: TranscriptIndex) -> None:
    idx.replace_recording(_transcript(_recording(ZH_KEY, agent="AG-1"), [
        ("agent", 1.0, 4.5, "您好，这款理财产品保证收益，年化百分之十二。"),
        ("customer", 5.0, 7.0, "那风险大吗？"),
        ("agent", 7.5, 12.25, "稳赚不赔，您放心。"),
    ]))
    idx.replace_recording(_transcript(_recording(EN_KEY, agent="AG-2"), [
        ("agent", 0.5, 6.0, "I can guarantee a return of twelve percent every year."),
        ("customer", 6.5, 8.0, "What returns did the fund make last year?"),
    ], quality="needs_review"))
    idx.replace_recording(_transcript(_recording(OLD_KEY, agent="AG-1"), [
        ("agent", 3.0, 5.0, "我们不保证收益，投资有风险。"),
    ]))


@pytest.fixture
def es_index(settings: Settings, es_cluster: EsCluster) -> Iterator[ElasticsearchIndex]:
    """An empty index with a prefix of its own on the test cluster, deleted afterwards."""
    prefix = f"asrtest-{uuid.uuid4().hex[:10]}"
    idx = open_index(es_cluster.settings(settings, prefix).index)
    assert isinstance(idx, ElasticsearchIndex)
    try:
        yield idx
    finally:
        client = idx.client
        names = list(client.indices.get(index=f"{prefix}-*", allow_no_indices=True))
        if names:  # by name: clusters refuse wildcard deletes (action.destructive_requires_name)
            client.indices.delete(index=",".join(names))
        for kind in ("segments", "recordings", "findings"):
            client.options(ignore_status=404).indices.delete_index_template(name=f"{prefix}-{kind}")


@pytest.fixture(params=["sqlite", pytest.param("elasticsearch", marks=pytest.mark.elasticsearch)])
def index(request: pytest.FixtureRequest, settings: Settings) -> TranscriptIndex:
    idx = open_index(settings.index) if request.param == "sqlite" else request.getfixturevalue("es_index")
    _fill(idx)
    return idx


def spans(idx: TranscriptIndex, query: str, **filters: str) -> set[tuple[str, float]]:
    return {(h.key, h.start) for h in idx.search(query, **filters, limit=100)}


def test_two_character_chinese_words_and_highlight(index: TranscriptIndex) -> None:
    hits = index.search("收益", date_from="2026-01-01")
    assert [(h.key, h.speaker, h.channel, h.start, h.end) for h in hits] == [(ZH_KEY, "agent", 0, 1.0, 4.5)]
    assert hits[0].highlight == "您好，这款理财产品保证<em>收益</em>，年化百分之十二。"
    assert hits[0].call_date == "2026-11-27" and hits[0].agent_id == "AG-1"
    assert [h.speaker for h in index.search("风险", date_from="2026-01-01")] == ["customer"]


def test_chinese_phrases_match_consecutive_characters_only(index: TranscriptIndex) -> None:
    assert spans(index, "保证收益") == {(ZH_KEY, 1.0), (OLD_KEY, 3.0)}
    assert index.search("收益保证") == []
    assert spans(index, "稳赚不赔") == {(ZH_KEY, 7.5)}


def test_a_one_character_chinese_word_inside_a_run_is_found(index: TranscriptIndex) -> None:
    """On the default analysis: a word of one character inside a longer run, at either end and in the middle."""
    if isinstance(index, ElasticsearchIndex) and index.analyzer != "standard":
        pytest.skip(f"ES_URL's cluster runs es_analyzer {index.analyzer}, whose tokens are not one per character")
    key = "calls/2026/11/29/zh_money.wav"
    index.replace_recording(_transcript(_recording(key, agent="AG-3"), [
        ("customer", 2.0, 5.0, "我的钱什么时候到账？"),
        ("agent", 6.0, 8.0, "钱已经转出了"),
        ("customer", 9.0, 11.0, "好的，谢谢您帮我查钱"),
    ]))
    assert spans(index, "钱") == {(key, 2.0), (key, 6.0), (key, 9.0)}
    assert spans(index, "的钱") == {(key, 2.0)}
    assert spans(index, "钱的") == set()
    assert spans(index, "查钱 | 转") == {(key, 6.0), (key, 9.0)}
    [hit] = index.search("账")
    assert hit.highlight == "我的钱什么时候到<em>账</em>？"


@pytest.mark.elasticsearch
def test_the_node_runs_the_default_analysis(es_index: ElasticsearchIndex, es_cluster: EsCluster) -> None:
    """The mapping the node holds is the configured default's, and it puts each Chinese character at its own place."""
    if os.environ.get("ES_URL"):
        pytest.skip("ES_URL's cluster runs the analysers ES_ANALYZER names, not necessarily the default")
    assert es_cluster.analyzer == IndexSettings().es_analyzer == "standard"
    _fill(es_index)
    name = f"{es_index.prefix}-segments-2026"
    mapping = es_index.client.indices.get_mapping(index=name)[name]
    assert mapping["mappings"]["properties"]["text"]["analyzer"] == es_cluster.analyzer
    tokens = es_index.client.indices.analyze(index=name, field="text", text="我的钱到账了")["tokens"]
    assert [(t["token"], t["position"]) for t in tokens] == [(c, n) for n, c in enumerate("我的钱到账了")]



@pytest.mark.elasticsearch
def test_every_index_is_green_on_one_node_and_keeps_a_replica_on_more(es_index: ElasticsearchIndex) -> None:
    """A replica no second node can hold keeps a single node yellow for ever (the compose stack's health, every
    monitor's alert); the templates ask for a replica only where there is a node for it."""
    _fill(es_index)
    names = sorted(es_index.client.indices.get(index=f"{es_index.prefix}-*"))
    assert {n.rsplit("-", 2)[1] for n in names} >= {"segments", "recordings"}, names
    for name in names:
        settings = es_index.client.indices.get_settings(index=name)[name]["settings"]["index"]
        assert settings["auto_expand_replicas"] == "0-1", (name, settings)
    health = es_index.client.cluster.health(index=",".join(names), wait_for_status="green", timeout="30s")
    assert health["status"] == "green" and not health["timed_out"], health
    nodes = health["number_of_data_nodes"]
    replicas = {name: int(es_index.client.indices.get_settings(index=name)[name]["settings"]["index"]
                         ["number_of_replicas"]) for name in names}
    assert replicas == dict.fromkeys(names, min(nodes - 1, 1)), (nodes, replicas)


def test_english_stems_phrases_and_case(index: TranscriptIndex) -> None:
    assert spans(index, "returns") == {(EN_KEY, 0.5), (EN_KEY, 6.5)}
    [hit] = index.search('"guarantee a return"')
    assert hit.start == 0.5 and "<em>guarantee a return</em>" in hit.highlight
    assert index.search('"return guarantee"') == []
    assert spans(index, "GUARANTEE twelve") == {(EN_KEY, 0.5)}


def test_or_not_and_groups(index: TranscriptIndex) -> None:
    assert spans(index, "稳赚不赔 | guarantee") == {(ZH_KEY, 7.5), (EN_KEY, 0.5)}
    assert spans(index, "收益 -风险") == {(ZH_KEY, 1.0)}
    assert spans(index, "returns -fund") == {(EN_KEY, 0.5)}
    assert spans(index, '(稳赚不赔 | "twelve percent") -year') == {(ZH_KEY, 7.5)}
    assert spans(index, "保证收益 年化 | 风险") == {(ZH_KEY, 1.0), (ZH_KEY, 5.0), (OLD_KEY, 3.0)}
    assert index.search("-风险") == []  # an exclusion alone finds nothing


def test_filters(index: TranscriptIndex) -> None:
    assert spans(index, "returns", agent="AG-2") == {(EN_KEY, 0.5), (EN_KEY, 6.5)}
    assert index.search("returns", agent="AG-1") == []
    assert spans(index, "保证", date_from="2026-11-28") == set()
    assert spans(index, "保证", date_from="2025-01-01", date_to="2026-11-27") == {(ZH_KEY, 1.0), (OLD_KEY, 3.0)}
    assert spans(index, "保证", date_to="2025-12-31") == {(OLD_KEY, 3.0)}
    assert spans(index, "returns", speaker="customer") == {(EN_KEY, 6.5)}
    assert spans(index, "returns | 收益", quality="needs_review") == {(EN_KEY, 0.5), (EN_KEY, 6.5)}
    assert spans(index, "returns | 收益", quality="pass") == {(ZH_KEY, 1.0), (OLD_KEY, 3.0)}


def test_any_input_is_a_valid_query(index: TranscriptIndex) -> None:
    for query in ['"unbalanced', "AND OR NOT", "(", ")(", "*", "col:val", "NEAR(a b)", "'", "  ", "。，！",
                  "a || b", "--x", "+", '"" | ()', "title:(x", "\\", "收益~2", "return*"]:
        index.search(query)
    assert index.search("   ") == []
    assert spans(index, "收益 | (稳赚") == {(ZH_KEY, 1.0), (OLD_KEY, 3.0), (ZH_KEY, 7.5)}  # ")" closes at the end
    assert spans(index, '"保证收益') == {(ZH_KEY, 1.0), (OLD_KEY, 3.0)}  # so does a quote


def test_adjacent_matches_are_one_highlight(index: TranscriptIndex) -> None:
    [hit] = index.search("guarantee return twelve")
    assert hit.highlight == "I can <em>guarantee</em> a <em>return</em> of <em>twelve</em> percent every year."
    [hit] = index.search("every year twelve percent")
    assert hit.highlight == "I can guarantee a return of <em>twelve percent every year</em>."


def test_pages_cover_every_hit_once(index: TranscriptIndex) -> None:
    query = "returns | 收益 | 风险 | 稳赚不赔"
    everything = index.search_page(query, size=100)
    assert everything.next_after is None and len(everything.hits) == 6
    seen, after, pages = [], None, 0
    while True:
        page = index.search_page(query, size=2, after=after)
        pages += 1
        seen += [(h.recording_id, h.start) for h in page.hits]
        if page.next_after is None:
            break
        after = page.next_after
    assert pages == 3
    assert sorted(seen) == sorted((h.recording_id, h.start) for h in everything.hits)
    assert len(set(seen)) == 6
    with pytest.raises(CursorError):
        index.search_page(query, after="not-a-cursor")


def test_counts_per_agent_and_day(index: TranscriptIndex) -> None:
    counts = [c.to_dict() for c in index.counts("收益 | 风险 | returns")]
    assert counts == [
        {"agent_id": "AG-1", "call_date": "2025-12-31", "segments": 1, "recordings": 1},
        {"agent_id": "AG-1", "call_date": "2026-11-27", "segments": 2, "recordings": 1},
        {"agent_id": "AG-2", "call_date": "2026-11-28", "segments": 2, "recordings": 1},
    ]
    assert [c.segments for c in index.counts("returns", Filters(speaker="customer"))] == [1]
    assert index.counts("-x") == []


def test_rewrites_replace_never_duplicate(index: TranscriptIndex) -> None:
    rec = _recording(ZH_KEY, agent="AG-1")
    for _ in range(3):
        index.replace_recording(_transcript(rec, [("agent", 1.0, 4.5, "保证收益")]))
    assert spans(index, "收益", date_from="2026-01-01") == {(ZH_KEY, 1.0)}
    assert index.search("稳赚不赔") == []  # the earlier run's extra segments are gone
    assert [r["segments"] for r in index.recordings("2026-11-27")] == [1]


def test_new_version_of_an_object_replaces_the_old_one(index: TranscriptIndex) -> None:
    old = _recording(ZH_KEY, agent="AG-1")
    new = _recording(ZH_KEY, etag="e2", agent="AG-1")
    index.replace_recording(_transcript(new, [("agent", 2.0, 3.0, "没有任何承诺")]))
    assert spans(index, "保证收益") == {(OLD_KEY, 3.0)}
    assert [h.recording_id for h in index.search("承诺")] == [new.recording_id]
    assert [r["recording_id"] for r in index.recordings("2026-11-27")] == [new.recording_id]
    assert index.recording(old.recording_id) is None


def test_states_and_quarantine(index: TranscriptIndex) -> None:
    bad = _recording("calls/2026/11/27/broken.wav")
    index.record_quarantine(Quarantine(recording=bad, reason="empty file (0 bytes)", pipeline_version="1"))
    silent = _recording("calls/2026/11/27/silent.wav")
    index.replace_recording(Transcript(recording=silent, duration=20.0, segments=[], language=None, model="m",
                                       pipeline_version="1", state=RecordingState.NEEDS_REVIEW, reason="no speech detected"))
    rows = index.recordings("2026-11-27")
    assert [r["key"] for r in rows] == sorted(r["key"] for r in rows)
    states = {r["key"]: (r["state"], r["reason"], r["segments"]) for r in rows}
    assert states == {
        "calls/2026/11/27/broken.wav": (RecordingState.QUARANTINED, "empty file (0 bytes)", 0),
        "calls/2026/11/27/silent.wav": (RecordingState.NEEDS_REVIEW, "no speech detected", 0),
        ZH_KEY: ("indexed", None, 3),
    }
    assert len(index.recordings()) == 5


def test_recording_lookup_for_playback(index: TranscriptIndex) -> None:
    rec = _recording(EN_KEY, agent="AG-2")
    row = index.recording(rec.recording_id)
    assert row is not None
    assert (row["bucket"], row["key"], row["call_date"], row["agent_id"], row["state"], row["quality"]) == (
        "recordings", EN_KEY, "2026-11-28", "AG-2", "indexed", "needs_review")


def test_findings_of_a_day(index: TranscriptIndex) -> None:
    rec_id = _recording(EN_KEY, agent="AG-2").recording_id
    first = [{"finding_id": f"f{i}", "recording_id": rec_id, "rule_id": f"r{i}", "note": "说了"} for i in range(3)]
    index.replace_findings("2026-11-28", first)
    assert index.findings("2026-11-28") == first
    index.replace_findings("2026-11-28", first[1:2])
    assert index.findings("2026-11-28") == first[1:2]
    assert index.findings("2026-11-27") == []


def test_every_element_of_the_search_syntax_at_once(index: TranscriptIndex) -> None:
    query = ('+保证收益 -投资 | "guarantee a return" twelve | returns -"last year" | 风险 -(投资 | 大吗)'
             ' | (稳赚 | 放心) 您')
    assert spans(index, query) == {(ZH_KEY, 1.0), (EN_KEY, 0.5), (ZH_KEY, 7.5)}
    assert spans(index, "稳赚不赔 guarantee | 风险") == {(ZH_KEY, 5.0), (OLD_KEY, 3.0)}  # AND binds tighter than OR


# -- Elasticsearch only: what has no SQLite counterpart ------------------------------------------------------------


@pytest.mark.elasticsearch
def test_templates_put_yearly_indices_behind_the_aliases(es_index: ElasticsearchIndex, es_cluster: EsCluster) -> None:
    _fill(es_index)
    es_index.replace_findings("2026-11-27", [{"finding_id": "f1", "recording_id": "r", "rule_id": "x"}])
    client, prefix = es_index.client, es_index.prefix
    for kind, years in (("segments", ["2025", "2026"]), ("recordings", ["2025", "2026"]), ("findings", ["2026"])):
        [template] = client.indices.get_index_template(name=f"{prefix}-{kind}")["index_templates"]
        assert template["index_template"]["index_patterns"] == [f"{prefix}-{kind}-*"]
        aliased = client.indices.get_alias(name=f"{prefix}-{kind}")
        assert sorted(aliased) == [f"{prefix}-{kind}-{year}" for year in years]
    mapping = client.indices.get_mapping(index=f"{prefix}-segments-2026")[f"{prefix}-segments-2026"]["mappings"]
    text = mapping["properties"]["text"]
    assert text["analyzer"] == es_cluster.analyzer and text["fields"]["en"]["analyzer"] == "asr_english"
    assert mapping["dynamic"] == "strict"


@pytest.mark.elasticsearch
def test_a_refused_document_fails_the_write_loudly(es_index: ElasticsearchIndex) -> None:
    _fill(es_index)
    rec = _recording(ZH_KEY, etag="e2")
    transcript = _transcript(rec, [("agent", 1.0, 2.0, "第一句"), ("customer", 2.5, 3.0, "第二句")])
    transcript.segments[1] = Segment(rec.recording_id, 70000, "customer", 2.5, 3.0, "第二句")  # a short: ±32767
    with pytest.raises(ElasticsearchIndexError) as err:
        es_index.replace_recording(transcript)
    message = str(err.value)
    assert f"recordings/{ZH_KEY}: 1 of 3 documents failed" in message and "HTTP 400" in message
    assert "[channel]" in message
    # The recording document still names the version whose segments were all accepted, so a retry rewrites it.
    [row] = [r for r in es_index.recordings("2026-11-27")]
    assert (row["recording_id"], row["segments"]) == (_recording(ZH_KEY).recording_id, 3)
    assert spans(es_index, "保证", date_to="2025-12-31") == {(OLD_KEY, 3.0)}  # other recordings untouched


@pytest.mark.elasticsearch
def test_wrong_credentials_and_an_unknown_ca_are_refused(settings: Settings, es_cluster: EsCluster) -> None:
    if es_cluster.username:
        wrong = open_index(es_cluster.settings(settings, "asrtest-auth", es_password="not-the-password").index)
        with pytest.raises(ElasticsearchIndexError, match="401"):
            wrong.recordings()
    if es_cluster.ca_certs:
        untrusted = open_index(es_cluster.settings(settings, "asrtest-tls", es_ca_certs=None).index)
        with pytest.raises(ElasticsearchIndexError, match="unreachable.*certificate verify failed"):
            untrusted.recordings()
    assert es_cluster.username or es_cluster.ca_certs, "the cluster under test has neither users nor TLS"


@pytest.mark.elasticsearch
def test_a_missing_analysis_module_is_named(settings: Settings, es_cluster: EsCluster) -> None:
    if not es_cluster.minimal:
        pytest.skip("ES_URL's cluster has the default distribution's modules")
    for changes, missing in (({"es_analyzer": "cjk"}, "cjk"), ({"es_english_stemmer": "porter"}, "asciifolding")):
        prefix = f"asrtest-{uuid.uuid4().hex[:10]}"
        idx = open_index(es_cluster.settings(settings, prefix, **changes).index)
        assert isinstance(idx, ElasticsearchIndex)
        try:
            with pytest.raises(ElasticsearchIndexError, match=f"{missing} comes with analysis-common"):
                _fill(idx)
        finally:
            for kind in ("segments", "recordings", "findings"):
                idx.client.options(ignore_status=404).indices.delete_index_template(name=f"{prefix}-{kind}")


def test_one_recordings_segments_in_the_order_they_were_said(index: TranscriptIndex) -> None:
    rec = _recording(EN_KEY, agent="AG-2")
    segments = index.segments(rec.recording_id)
    assert [(s.recording_id, s.channel, s.speaker, s.start, s.end, s.text[:5]) for s in segments] == [
        (rec.recording_id, 0, "agent", 0.5, 6.0, "I can"), (rec.recording_id, 1, "customer", 6.5, 8.0, "What ")]
    assert index.segments("0" * 24) == []


def test_a_deleted_recording_leaves_the_view(index: TranscriptIndex) -> None:
    zh = _recording(ZH_KEY, agent="AG-1")
    assert index.delete_recording("recordings", ZH_KEY) == 1
    assert spans(index, "保证收益") == {(OLD_KEY, 3.0)}  # the other recordings stay
    assert index.recording(zh.recording_id) is None and index.segments(zh.recording_id) == []
    assert index.recordings("2026-11-27") == []
    assert index.delete_recording("recordings", ZH_KEY) == 0
    index.purge_deleted()  # the words are merged out of the backend's files; the view is the same
    assert spans(index, "保证收益") == {(OLD_KEY, 3.0)} and index.recording(zh.recording_id) is None


def test_an_erased_recordings_words_leave_the_sqlite_file(settings: Settings) -> None:
    """What the view no longer shows must not linger in the file's pages or its write-ahead log either."""
    index = open_index(settings.index)
    _fill(index)
    secret = _recording("calls/2026/11/27/secret.wav", agent="AG-9")
    index.replace_recording(Transcript(secret, 5.0, [Segment(secret.recording_id, 0, "agent", 0.0, 1.0,
                                                             f"xylophonist zanzibarian {n}") for n in range(40)],
                                       "en", "m", "2"))
    path = settings.index.path("index_path")

    def stored(word: bytes) -> int:
        return sum(p.read_bytes().count(word) for p in path.parent.glob(path.name + "*"))

    assert stored(b"zanzibarian") > 0
    index.delete_recording("recordings", secret.key)
    index.purge_deleted()
    assert stored(b"xylophon") == stored(b"zanzibar") == stored(secret.recording_id.encode()) == 0
    assert spans(index, "保证收益")  # the others are all there


def test_analytics_rules_and_quality_filter_and_facet_alike(index: TranscriptIndex) -> None:
    """Calls by non-talk share and interruptions, by finding rule, and the matching calls counted per rule."""
    zh, en = _recording(ZH_KEY, agent="AG-1"), _recording(EN_KEY, agent="AG-2")
    calm = {"non_talk_share": 0.1, "speakers": {"agent": {"interruptions": 0}, "customer": {"interruptions": 1}}}
    rude = {"non_talk_share": 0.45, "speakers": {"agent": {"interruptions": 4}, "customer": {"interruptions": 0}}}
    for rec, analytics, lines in ((zh, calm, [("agent", 1.0, 4.5, "这款产品保证收益")]),
                                  (en, rude, [("agent", 0.5, 6.0, "I can guarantee a return")])):
        transcript = _transcript(rec, lines)
        transcript.analytics = analytics
        index.replace_recording(transcript)
    index.replace_findings("2026-11-28", [{"finding_id": "f1", "recording_id": en.recording_id,
                                           "rule_id": "promise-of-return"}])
    index.replace_findings("2026-11-27", [{"finding_id": "f2", "recording_id": zh.recording_id,
                                           "rule_id": "promise-of-return"},
                                          {"finding_id": "f3", "recording_id": zh.recording_id, "rule_id": "long-hold"}])
    everything = "\"这款产品\" | guarantee"

    def keys(**filters: Any) -> set[str]:
        return {h.key for h in index.search_page(everything, Filters(**filters), size=50).hits}

    assert keys() == {ZH_KEY, EN_KEY}
    assert keys(min_non_talk_share=0.3) == {EN_KEY}
    assert keys(min_agent_interruptions=3) == {EN_KEY} and keys(min_customer_interruptions=1) == {ZH_KEY}
    assert keys(rule="long-hold") == {ZH_KEY} and keys(rule="promise-of-return") == {ZH_KEY, EN_KEY}
    assert {h.quality for h in index.search_page(everything, size=50).hits} == {"pass"}
    assert index.rule_counts(everything) == {"long-hold": 1, "promise-of-return": 2}
    assert index.rule_counts(everything, Filters(agent="AG-2")) == {"promise-of-return": 1}
    assert index.recording(en.recording_id)["analytics"] == rude  # type: ignore[index]


def test_tags_of_a_day_are_replaced_whole_and_searched(index: TranscriptIndex) -> None:
    """A day's audit sets every recording's tags of that day (sorted, once each; a call left out has none), a
    second audit replaces them, other days keep theirs; searches narrow to calls with every tag asked for, and
    the facet counts the search's own calls only."""
    zh, en, old = _recording(ZH_KEY), _recording(EN_KEY, agent="AG-2"), _recording(OLD_KEY)
    index.replace_tags("2025-12-31", {old.recording_id: ["complaint"]})
    index.replace_tags("2026-11-27", {zh.recording_id: ["product-mortgage", "complaint", "complaint"],
                                      en.recording_id: ["cancellation"]})  # another day's call: not this audit's

    def tags(rec: Recording) -> list[str]:
        row = index.recording(rec.recording_id)
        assert row is not None
        return list(row["tags"])

    assert (tags(zh), tags(en), tags(old)) == (["complaint", "product-mortgage"], [], ["complaint"])
    everything = "收益 | returns"

    def keys(*asked: str, query: str = everything, **filters: Any) -> set[str]:
        return {h.key for h in index.search_page(query, Filters(tags=asked, **filters), size=50).hits}

    assert keys("complaint") == {ZH_KEY, OLD_KEY} and keys("complaint", "product-mortgage") == {ZH_KEY}
    assert keys("complaint", date_from="2026-01-01") == {ZH_KEY} and keys("cancellation") == set()
    assert keys("complaint", query="") == {ZH_KEY, OLD_KEY}  # a tag alone: every segment of its calls
    assert [c["key"] for c in index.calls("", Filters(tags=("product-mortgage",))).calls] == [ZH_KEY]
    assert index.calls("", Filters(tags=("complaint",))).calls[0]["tags"] == ["complaint"]
    assert index.tag_counts(everything) == {"complaint": 2, "product-mortgage": 1}
    assert index.tag_counts("returns") == {}  # the tagged calls are not among its hits: named nowhere
    assert index.tag_counts(everything, Filters(date_to="2025-12-31")) == {"complaint": 1}

    index.replace_tags("2026-11-27", {zh.recording_id: ["vulnerable-customer"]})
    assert (tags(zh), tags(old)) == (["vulnerable-customer"], ["complaint"])
    assert keys("complaint") == {OLD_KEY}
    index.replace_tags("2026-11-27", {})
    assert (tags(zh), tags(old)) == ([], ["complaint"])


def test_a_reindex_keeps_the_tags_and_a_new_version_has_none(index: TranscriptIndex) -> None:
    """Rewriting the version an audit tagged (``asr reindex``) keeps its tags; a new upload under its key is
    another call, untagged until its own audit."""
    zh = _recording(ZH_KEY)
    index.replace_tags("2026-11-27", {zh.recording_id: ["complaint"]})
    index.replace_recording(_transcript(zh, [("agent", 1.0, 4.5, "保证收益")]))
    assert index.recording(zh.recording_id)["tags"] == ["complaint"]  # type: ignore[index]
    assert {h.key for h in index.search_page("收益", Filters(tags=("complaint",))).hits} == {ZH_KEY}
    new = _recording(ZH_KEY, etag="e2")
    index.replace_recording(_transcript(new, [("agent", 1.0, 4.5, "保证收益")]))
    assert index.recording(new.recording_id)["tags"] == []  # type: ignore[index]
    assert index.search_page("收益", Filters(tags=("complaint",))).hits == []


def test_scores_of_a_day_are_replaced_whole_searched_faceted_and_kept_by_a_reindex(index: TranscriptIndex) -> None:
    """A day's audit sets its calls' scorecard scores (a call left out has none), other days keep theirs;
    searches narrow to a range of scores, the facet counts the search's own calls per band, and a reindex of the
    scored version keeps its score while a new version has none."""
    zh, en, old = _recording(ZH_KEY), _recording(EN_KEY, agent="AG-2"), _recording(OLD_KEY)
    index.replace_scores("2025-12-31", {old.recording_id: 95.0})
    index.replace_scores("2026-11-27", {zh.recording_id: 42.5})
    index.replace_scores("2026-11-28", {en.recording_id: 70.0})

    def score(rec: Recording) -> float | None:
        row = index.recording(rec.recording_id)
        assert row is not None
        return row["score"]  # type: ignore[no-any-return]

    assert (score(zh), score(en), score(old)) == (42.5, 70.0, 95.0)
    everything = "收益 | returns"

    def keys(query: str = everything, **filters: Any) -> set[str]:
        return {h.key for h in index.search_page(query, Filters(**filters), size=50).hits}

    assert keys(max_score=69.9) == {ZH_KEY} and keys(min_score=70) == {EN_KEY, OLD_KEY}
    assert keys(min_score=70, max_score=70) == {EN_KEY} and keys(max_score=42.4) == set()
    assert keys("", max_score=50) == {ZH_KEY}  # a score alone: every segment of its calls
    assert [c["key"] for c in index.calls("", Filters(min_score=90)).calls] == [OLD_KEY]
    assert index.score_counts(everything) == {"0-49": 1, "70-89": 1, "90-100": 1}
    assert index.score_counts("returns") == {"70-89": 1}
    assert index.score_counts(everything, Filters(date_to="2025-12-31")) == {"90-100": 1}

    index.replace_recording(_transcript(zh, [("agent", 1.0, 4.5, "保证收益")]))
    assert score(zh) == 42.5
    index.replace_scores("2026-11-27", {})
    assert (score(zh), score(old)) == (None, 95.0) and index.score_counts("收益") == {"90-100": 1}
    index.replace_scores("2026-11-28", {en.recording_id: 10.0})
    new = _recording(EN_KEY, etag="e2", agent="AG-2")
    index.replace_recording(_transcript(new, [("agent", 1.0, 4.5, "returns")]))
    assert score(new) is None and keys("returns", max_score=50) == set()


def test_a_scope_of_agents_narrows_every_answer_and_an_empty_one_finds_nothing(index: TranscriptIndex) -> None:
    """``agents`` (whose calls a user may see) narrows hits, calls, counts and facets alike; no agent, nothing;
    it is not a filter of its own (a blank query with it alone finds nothing)."""
    _fill(index)
    both = "收益 | returns"
    assert {h.key for h in index.search_page(both, Filters(agents=frozenset({"AG-2"})), size=50).hits} == {EN_KEY}
    assert {h.key for h in index.search_page(both, Filters(agents=frozenset({"AG-1", "AG-9"})), size=50).hits} == {
        ZH_KEY, OLD_KEY}
    assert index.search_page(both, Filters(agents=frozenset())).hits == []
    assert [c.agent_id for c in index.counts(both, Filters(agents=frozenset({"AG-2"})))] == ["AG-2"]
    assert [c["key"] for c in index.calls("", Filters(date_from="2026-11-28", agents=frozenset({"AG-1"}))).calls] == []
    assert index.search_page("", Filters(agents=frozenset({"AG-1"}))).hits == []


def test_hits_say_how_sure_the_model_was(index: TranscriptIndex) -> None:
    """Each hit carries the model's confidence in its segment (the geometric mean of its words' probabilities),
    alike in both backends, and the export carries it too."""
    rec = _recording("calls/2026/11/29/unsure.wav", agent="AG-3")
    index.replace_recording(Transcript(recording=rec, duration=10.0, language="en", model="m", pipeline_version="1",
                                       quality="pass", segments=[
        Segment(rec.recording_id, 0, "agent", 0.0, 2.0, "the premium is due monthly", avg_logprob=-0.1),
        Segment(rec.recording_id, 1, "customer", 2.5, 4.0, "the premium seems high", avg_logprob=-1.5),
    ]))
    hits = {h.speaker: h for h in index.search("premium", agent="AG-3")}
    assert hits["agent"].confidence == pytest.approx(math.exp(-0.1), abs=1e-3)
    assert hits["customer"].confidence == pytest.approx(math.exp(-1.5), abs=1e-3)
    rows = json.loads("".join(export(index, "premium", Filters(agent="AG-3"), "json")))
    assert sorted(r["confidence"] for r in rows) == sorted(h.confidence for h in hits.values())
