"""The requests the Elasticsearch backend builds, and its answers to faults a real node cannot be made to show.

tests/test_index_contract.py runs the backend against a real Elasticsearch 9 node;
here a loopback HTTP server records each request and answers with the response
shapes Elasticsearch documents, so the tests can script what a healthy node never
does on demand (429 and 503 answers, a shard failing one bulk item, pages of
composite buckets) and see exactly what is sent: REST-compatibility headers, the
API key, template bodies, NDJSON bulk actions, queries and retries.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import re
import ssl
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator
from urllib.parse import parse_qsl, urlsplit

import pytest

from asr_tasks.config import Settings
from asr_tasks.index.backends import open_index
from asr_tasks.index.elasticsearch import ElasticsearchIndex, ElasticsearchIndexError, key_id
from asr_tasks.index.es_node import load_template
from asr_tasks.index.query import Filters, decode_cursor, encode_cursor
from asr_tasks.models import Quarantine, Recording, Segment, Transcript, recording_id_for

pytestmark = pytest.mark.elasticsearch

COMPAT_JSON = "application/vnd.elasticsearch+json; compatible-with=8"
COMPAT_NDJSON = "application/vnd.elasticsearch+x-ndjson; compatible-with=8"


@dataclass
class Call:
    method: str
    path: str
    params: dict[str, str]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def ndjson(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.body.decode().splitlines() if line.strip()]


Answer = tuple[int, Any]


def error(status: int, kind: str, reason: str) -> Answer:
    """An error body as Elasticsearch sends it."""
    return status, {"error": {"root_cause": [{"type": kind, "reason": reason}], "type": kind, "reason": reason},
                    "status": status}


def bulk_answer(call: Call, failures: dict[str, tuple[int, str, str]] | None = None) -> Answer:
    """A bulk response with one item per action; ``failures`` maps _id to (status, type, reason)."""
    failures = failures or {}
    items = []
    for line in call.ndjson():
        if len(line) != 1 or next(iter(line)) not in ("index", "delete", "create", "update"):
            continue  # a document source
        op, meta = next(iter(line.items()))
        item: dict[str, Any] = {"_index": meta["_index"], "_id": meta["_id"], "_version": 1,
                                "_shards": {"total": 2, "successful": 1, "failed": 0}, "_seq_no": 0,
                                "_primary_term": 1}
        if meta["_id"] in failures:
            status, kind, reason = failures[meta["_id"]]
            item = {"_index": meta["_index"], "_id": meta["_id"], "status": status,
                    "error": {"type": kind, "reason": reason}}
        elif op == "delete":
            item.update(result="not_found", status=404)
        else:
            item.update(result="created", status=201)
        items.append({op: item})
    return 200, {"took": 3, "errors": any("error" in next(iter(i.values())) for i in items), "items": items}


def search_answer(hits: list[dict[str, Any]], **extra: Any) -> Answer:
    return 200, {"took": 2, "timed_out": False, "_shards": {"total": 2, "successful": 2, "skipped": 0, "failed": 0},
                 "hits": {"max_score": None, "hits": hits}, **extra}


class FakeElasticsearch:
    """An HTTP server on loopback that records requests and answers like Elasticsearch."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.calls: list[Call] = []
        self.scripts: list[tuple[str, re.Pattern[str], Answer | Callable[[Call], Answer]]] = []
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def handle_any(self) -> None:
                url = urlsplit(self.path)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                call = Call(self.command, url.path, dict(parse_qsl(url.query)),
                            {k.lower(): v for k, v in self.headers.items()}, body)
                status, payload = fake.answer(call)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/vnd.elasticsearch+json;compatible-with=8")
                self.send_header("X-Elastic-Product", "Elasticsearch")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = handle_any

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    def script(self, method: str, path: str, *answers: Answer | Callable[[Call], Answer]) -> None:
        """Answer the next requests to METHOD path (a regex) with these, in order, before the defaults."""
        for answer in answers:
            self.scripts.append((method, re.compile(path), answer))

    def answer(self, call: Call) -> Answer:
        with self.lock:
            self.calls.append(call)
            for i, (method, pattern, answer) in enumerate(self.scripts):
                if method == call.method and pattern.fullmatch(call.path):
                    del self.scripts[i]
                    return answer(call) if callable(answer) else answer
        return self.default(call)

    @staticmethod
    def default(call: Call) -> Answer:
        parts = call.path.strip("/").split("/")
        if call.path.endswith("/_bulk"):
            return bulk_answer(call)
        if parts[0] == "_index_template" and call.method == "PUT":
            return 200, {"acknowledged": True}
        if len(parts) == 1 and call.method == "PUT":
            return 200, {"acknowledged": True, "shards_acknowledged": True, "index": parts[0]}
        if len(parts) == 2 and parts[1] == "_mapping" and call.method == "PUT":
            return 200, {"acknowledged": True}
        if len(parts) == 3 and parts[1] == "_doc" and call.method == "GET":
            return 404, {"_index": parts[0], "_id": parts[2], "found": False}
        if parts[-1] == "_search":
            return search_answer([])
        return error(400, "illegal_argument_exception", f"unexpected request {call.method} {call.path}")

    def of(self, method: str, path: str) -> list[Call]:
        return [c for c in self.calls if c.method == method and re.fullmatch(path, c.path)]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def es() -> Iterator[FakeElasticsearch]:
    server = FakeElasticsearch()
    yield server
    server.close()


@pytest.fixture
def es_settings(settings: Settings, es: FakeElasticsearch) -> Settings:
    return settings.override(index_backend="elasticsearch", es_url=es.url, es_api_key="aWQ6c2VjcmV0", es_retry_backoff_seconds=0.001, es_max_retries=3)


@pytest.fixture
def index(es_settings: Settings) -> ElasticsearchIndex:
    idx = open_index(es_settings.index)
    assert isinstance(idx, ElasticsearchIndex)
    return idx


def _recording(key: str, agent: str = "AG-1", etag: str = "e1") -> Recording:
    return Recording(recording_id=recording_id_for("recordings", key, etag), bucket="recordings", key=key, etag=etag,
                     size=1234, call_id=key.rsplit("/", 1)[-1].split(".")[0], call_date="-".join(key.split("/")[1:4]),
                     agent_id=agent, customer_id="CU-9", direction="inbound", started_at="2016-03-04T09:15:00+08:00")


def _transcript(rec: Recording, texts: list[str]) -> Transcript:
    segments = [Segment(rec.recording_id, i % 2, ("agent", "customer")[i % 2], 2.0 * i, 2.0 * i + 1.5, text,
                        avg_logprob=-0.25, no_speech_prob=0.01, language="zh")
                for i, text in enumerate(texts)]
    return Transcript(recording=rec, duration=30.0, segments=segments, language="zh", model="whisper-base",
                      pipeline_version="3", speech_seconds=12.5, quality="pass")


def _timestamp(value: str) -> dt.datetime:
    return dt.datetime.fromisoformat(value)


def test_requests_speak_the_es8_dialect_with_api_key(index: ElasticsearchIndex, es: FakeElasticsearch) -> None:
    index.search("收益")
    [call] = es.calls
    assert call.headers["accept"] == COMPAT_JSON
    assert call.headers["content-type"] == COMPAT_JSON
    assert call.headers["authorization"] == "ApiKey aWQ6c2VjcmV0"


def test_basic_auth(es_settings: Settings, es: FakeElasticsearch) -> None:
    idx = open_index(es_settings.override(es_api_key=None, es_username="auditor", es_password="pa:ss").index)
    idx.recordings()
    assert es.calls[0].headers["authorization"] == "Basic " + base64.b64encode(b"auditor:pa:ss").decode()


def test_templates_yearly_indices_and_bulk_actions(index: ElasticsearchIndex, es: FakeElasticsearch) -> None:
    rec = _recording("calls/2016/03/04/c1.wav")
    kid = key_id("recordings", rec.key)
    es.script("GET", f"/asr-recordings-2016/_doc/{kid}",
              (200, {"_index": "asr-recordings-2016", "_id": kid, "_version": 3, "_seq_no": 7, "_primary_term": 1,
                     "found": True, "_source": {"segments": 4}}))
    assert index.replace_recording(_transcript(rec, ["您好，保证收益。", "那风险呢？"])) == 2

    assert [(c.method, c.path) for c in es.calls] == [
        ("PUT", "/_index_template/asr-segments"),
        ("PUT", "/_index_template/asr-recordings"),
        ("PUT", "/_index_template/asr-findings"),
        ("PUT", "/asr-segments-2016"),
        ("PUT", "/asr-recordings-2016"),
        ("GET", f"/asr-recordings-2016/_doc/{kid}"),
        ("PUT", "/_bulk"),
        ("PUT", "/_bulk"),
    ]
    template = es.calls[0].json()
    assert template == load_template("segments", "asr", "standard")
    assert template["index_patterns"] == ["asr-segments-*"]
    assert template["template"]["aliases"] == {"asr-segments": {}}
    text = template["template"]["mappings"]["properties"]["text"]
    assert text["analyzer"] == "standard" and text["fields"]["en"]["analyzer"] == "asr_english"
    assert es.calls[1].json()["template"]["mappings"]["properties"]["state"] == {"type": "keyword"}
    assert es.calls[5].params == {"_source_includes": "segments,recording_id,tags,score"}

    bulk = es.calls[-2]
    assert bulk.params == es.calls[-1].params == {"refresh": "wait_for"}
    assert bulk.headers["content-type"] == COMPAT_NDJSON
    lines = bulk.ndjson() + es.calls[-1].ndjson()  # the segments, then the recording once they are all in
    assert [next(iter(line)) if len(line) == 1 and "_index" in next(iter(line.values())) else "doc" for line in lines] == [
        "index", "doc", "index", "doc", "delete", "delete", "index", "doc"]
    assert lines[0] == {"index": {"_index": "asr-segments-2016", "_id": f"{kid}-00000"}}
    assert lines[4] == {"delete": {"_index": "asr-segments-2016", "_id": f"{kid}-00002"}}
    assert lines[5] == {"delete": {"_index": "asr-segments-2016", "_id": f"{kid}-00003"}}
    assert lines[6] == {"index": {"_index": "asr-recordings-2016", "_id": kid}}
    segment = dict(lines[3])
    _timestamp(segment.pop("indexed_at"))
    assert segment == {
        "recording_id": rec.recording_id, "bucket": "recordings", "key": rec.key, "call_id": "c1",
        "call_date": "2016-03-04", "started_at": "2016-03-04T09:15:00+08:00", "agent_id": "AG-1",
        "customer_id": "CU-9", "direction": "inbound", "quality": "pass", "model": "whisper-base",
        "pipeline_version": "3", "segment_id": f"{rec.recording_id}-00001", "seq": 1, "channel": 1,
        "speaker": "customer", "start": 2.0, "end": 3.5, "text": "那风险呢？", "avg_logprob": -0.25,
        "tokens": "那 风 险 呢", "sounds": "la fen xian le", "tones": "na4 feng1 xian3 ne5",  # what it sounds like
        "no_speech_prob": 0.01, "language": "zh",
        "non_talk_share": None, "agent_interruptions": None, "customer_interruptions": None,  # no analytics here
    }
    recording = dict(lines[7])
    _timestamp(recording.pop("updated_at"))
    assert recording == {
        "recording_id": rec.recording_id, "bucket": "recordings", "key": rec.key, "etag": "e1", "size": 1234,
        "call_id": "c1", "call_date": "2016-03-04", "agent_id": "AG-1", "customer_id": "CU-9",
        "direction": "inbound", "started_at": "2016-03-04T09:15:00+08:00", "duration": 30.0,
        "speech_seconds": 12.5, "language": "zh", "model": "whisper-base", "pipeline_version": "3",
        "state": "indexed", "reason": None, "quality": "pass", "quality_failures": [], "segments": 2,
        "analytics": None, "non_talk_share": None, "agent_interruptions": None, "customer_interruptions": None,
    }

    # Another year: its own indices, templates not sent again; an unknown key has nothing to delete.
    es.calls.clear()
    index.record_quarantine(Quarantine(_recording("calls/2026/11/27/bad.wav"), "empty file (0 bytes)", "3"))
    assert [(c.method, c.path) for c in es.calls] == [
        ("PUT", "/asr-segments-2026"), ("PUT", "/asr-recordings-2026"),
        ("GET", f"/asr-recordings-2026/_doc/{key_id('recordings', 'calls/2026/11/27/bad.wav')}"), ("PUT", "/_bulk"),
    ]
    [action, doc] = es.calls[-1].ndjson()
    assert action == {"index": {"_index": "asr-recordings-2026", "_id": key_id("recordings", "calls/2026/11/27/bad.wav")}}
    assert (doc["state"], doc["reason"], doc["segments"], doc["pipeline_version"]) == (
        "quarantined", "empty file (0 bytes)", 0, "3")


def test_existing_index_and_configured_analyser(es_settings: Settings, es: FakeElasticsearch) -> None:
    idx = open_index(es_settings.override(es_analyzer="smartcn", es_index_prefix="calls-zh", es_refresh="false").index)
    es.script("PUT", "/calls-zh-segments-2026",
              error(400, "resource_already_exists_exception", "index [calls-zh-segments-2026/abc] already exists"))
    idx.replace_recording(_transcript(_recording("calls/2026/11/27/c2.wav"), ["好"]))
    mapping = es.of("PUT", "/calls-zh-segments-2026/_mapping")  # an index made earlier gets the newer fields
    assert len(mapping) == 1 and "non_talk_share" in mapping[0].json()["properties"]
    assert "text" not in mapping[0].json()["properties"]  # its analysers cannot change: it keeps those it was made with
    template = es.of("PUT", "/_index_template/calls-zh-segments")[0].json()
    assert template["index_patterns"] == ["calls-zh-segments-*"]
    assert template["template"]["aliases"] == {"calls-zh-segments": {}}
    assert template["template"]["mappings"]["properties"]["text"]["analyzer"] == "smartcn"
    assert es.of("PUT", "/_bulk")[0].params == {"refresh": "false"}


def test_bulk_retries_overload_and_server_errors_with_back_off(index: ElasticsearchIndex,
                                                               es: FakeElasticsearch) -> None:
    rec = _recording("calls/2026/11/27/c3.wav")
    kid = key_id("recordings", rec.key)
    es.script("PUT", "/_bulk",
              error(429, "es_rejected_execution_exception", "rejected execution of coordinating operation"),
              lambda call: bulk_answer(call, {f"{kid}-00001": (503, "unavailable_shards_exception", "primary shard is not active")}))
    index.replace_recording(_transcript(rec, ["一", "二", "三"]))
    bulks = es.of("PUT", "/_bulk")
    assert len(bulks) == 4  # three tries of the segments, then the recording
    assert bulks[0].body == bulks[1].body  # the rejected request again, whole
    assert bulks[2].ndjson() == [{"index": {"_index": "asr-segments-2026", "_id": f"{kid}-00001"}},
                                 bulks[0].ndjson()[3]]  # then only the document that failed
    assert bulks[3].ndjson()[0] == {"index": {"_index": "asr-recordings-2026", "_id": kid}}


def test_errors_that_persist_end_the_retries(index: ElasticsearchIndex, es: FakeElasticsearch) -> None:
    es.script("POST", "/asr-segments/_search", *[error(503, "search_phase_execution_exception", "all shards failed")] * 4)
    with pytest.raises(ElasticsearchIndexError, match="503.*all shards failed"):
        index.search("收益")
    assert len(es.of("POST", "/asr-segments/_search")) == 4  # one try and es_max_retries=3 retries

    es.script("POST", "/asr-segments/_search", error(502, "bad_gateway", "proxy"), error(400, "parsing_exception", "bad"))
    with pytest.raises(ElasticsearchIndexError, match="400"):
        index.search("收益")
    assert len(es.of("POST", "/asr-segments/_search")) == 6  # a 400 is final


def _hit(rid: str, seq: int, start: float, text: str, highlight: str, score: float, sort: list[Any]) -> dict[str, Any]:
    return {"_index": "asr-segments-2026", "_id": f"k-{seq:05d}", "_score": score,
            "_source": {"recording_id": rid, "key": "calls/2026/11/27/c5.wav", "call_date": "2026-11-27",
                        "agent_id": "AG-7", "speaker": "agent", "channel": 0, "seq": seq, "start": start,
                        "end": start + 2.0, "text": text},
            "highlight": {"text.en": [highlight]}, "sort": sort}


def test_search_query_filters_highlight_and_pages(index: ElasticsearchIndex, es: FakeElasticsearch) -> None:
    es.script("POST", "/asr-segments/_search", search_answer([
        _hit("r1", 0, 1.0, "这款产品保证收益。", "这款产品\x02保\x03\x02证\x03\x02收\x03\x02益\x03。", 7.5, [7.5, "r1", 0]),
        _hit("r1", 3, 9.5, "We guarantee <b>a</b> return.", "We \x02guarantee\x03 <b>\x02a\x03</b> \x02return\x03.", 6.25,
             [6.25, "r1", 3]),
        _hit("r2", 1, 4.0, "保证收益", "\x02保证收益\x03", 6.0, [6.0, "r2", 1]),
    ]))
    filters = Filters(date_from="2026-11-01", date_to="2026-11-30", agent="AG-7", speaker="agent", quality="pass")
    page = index.search_page('保证收益 | "guarantee a return" -风险', filters, size=2)

    [call] = es.calls
    assert call.path == "/asr-segments/_search"
    assert call.params == {"ignore_unavailable": "true", "allow_no_indices": "true"}

    def phrase(text: str) -> dict[str, Any]:
        return {"simple_query_string": {"query": f'"{text}"', "fields": ["text", "text.en"], "flags": "PHRASE"}}

    assert call.json() == {
        "query": {"bool": {
            "must": [{"bool": {"should": [
                phrase("保证收益"),
                {"bool": {"must": [phrase("guarantee a return")], "must_not": [phrase("风险")]}},
            ], "minimum_should_match": 1}}],
            "filter": [
                {"range": {"call_date": {"gte": "2026-11-01", "lte": "2026-11-30", "format": "yyyy-MM-dd"}}},
                {"term": {"agent_id": "AG-7"}}, {"term": {"speaker": "agent"}}, {"term": {"quality": "pass"}},
            ],
        }},
        "sort": [{"_score": "desc"}, {"recording_id": "asc"}, {"seq": "asc"}],
        "size": 3,
        "track_total_hits": False,
        "_source": {"excludes": ["tokens", "sounds", "tones"]},
        "highlight": {"pre_tags": ["\x02"], "post_tags": ["\x03"], "fields": {"text.en": {"number_of_fragments": 0}}},
    }
    assert [(h.recording_id, h.start, h.end, h.speaker, h.agent_id, h.call_date, h.score) for h in page.hits] == [
        ("r1", 1.0, 3.0, "agent", "AG-7", "2026-11-27", 7.5), ("r1", 9.5, 11.5, "agent", "AG-7", "2026-11-27", 6.25)]
    assert page.hits[0].highlight == "这款产品<em>保证收益</em>。"  # per-character highlights read as one
    assert page.hits[1].highlight == "We <em>guarantee</em> <b><em>a</em></b> <em>return</em>."
    assert decode_cursor(page.next_after or "", 3) == [6.25, "r1", 3]

    es.script("POST", "/asr-segments/_search", search_answer([
        _hit("r2", 1, 4.0, "保证收益", "\x02保证收益\x03", 6.0, [6.0, "r2", 1])]))
    last = index.search_page('保证收益 | "guarantee a return" -风险', filters, size=2, after=page.next_after)
    assert es.calls[-1].json()["search_after"] == [6.25, "r1", 3]
    assert [h.recording_id for h in last.hits] == ["r2"] and last.next_after is None


def test_nothing_searchable_sends_nothing(index: ElasticsearchIndex, es: FakeElasticsearch) -> None:
    assert index.search("-风险") == [] and index.search('"" ()') == [] and index.counts("*") == []
    assert es.calls == []


def test_counts_page_through_the_composite_aggregation(index: ElasticsearchIndex, es: FakeElasticsearch) -> None:
    def buckets(*rows: tuple[str | None, str, int, int], after: dict[str, Any] | None = None) -> Answer:
        agg: dict[str, Any] = {"buckets": [{"key": {"agent": a, "day": d}, "doc_count": n, "recordings": {"value": r}}
                                           for a, d, n, r in rows]}
        if after:
            agg["after_key"] = after
        return search_answer([], aggregations={"per_agent_day": agg})

    es.script("POST", "/asr-segments/_search",
              buckets((None, "2026-11-27", 1, 1), ("AG-1", "2026-11-27", 5, 2), after={"agent": "AG-1", "day": "2026-11-27"}),
              buckets(("AG-2", "2026-11-28", 3, 1), after={"agent": "AG-2", "day": "2026-11-28"}),
              buckets())
    counts = index.counts("收益", Filters(speaker="agent"))
    assert [c.to_dict() for c in counts] == [
        {"agent_id": None, "call_date": "2026-11-27", "segments": 1, "recordings": 1},
        {"agent_id": "AG-1", "call_date": "2026-11-27", "segments": 5, "recordings": 2},
        {"agent_id": "AG-2", "call_date": "2026-11-28", "segments": 3, "recordings": 1},
    ]
    first, second, third = (c.json() for c in es.calls)
    assert first["size"] == 0 and first["query"]["bool"]["filter"] == [{"term": {"speaker": "agent"}}]
    composite = first["aggs"]["per_agent_day"]["composite"]
    assert composite["sources"] == [
        {"agent": {"terms": {"field": "agent_id", "missing_bucket": True}}},
        {"day": {"date_histogram": {"field": "call_date", "calendar_interval": "1d", "format": "yyyy-MM-dd",
                                    "missing_bucket": True}}},
    ]
    assert "after" not in composite
    assert first["aggs"]["per_agent_day"]["aggs"] == {"recordings": {"cardinality": {"field": "recording_id"}}}
    assert second["aggs"]["per_agent_day"]["composite"]["after"] == {"agent": "AG-1", "day": "2026-11-27"}
    assert third["aggs"]["per_agent_day"]["composite"]["after"] == {"agent": "AG-2", "day": "2026-11-28"}


def test_state_lookups(index: ElasticsearchIndex, es: FakeElasticsearch) -> None:
    doc = {"recording_id": "r9", "bucket": "recordings", "key": "calls/2026/11/27/c9.wav", "call_date": "2026-11-27",
           "state": "indexed", "reason": None, "quality": "needs_review", "quality_failures": ["speech_ratio"],
           "segments": 4, "model": "m", "pipeline_version": "3"}
    es.script("POST", "/asr-recordings/_search", search_answer([{"_index": "asr-recordings-2026", "_id": "x",
                                                                "_score": 1.0, "_source": doc}]))
    assert index.recording("r9") == {**doc, "quality_failures": "speech_ratio", "tags": [], "score": None}
    assert es.calls[0].json() == {"query": {"term": {"recording_id": "r9"}}, "size": 1}

    es.script("POST", "/asr-recordings/_search", search_answer([
        {"_index": "asr-recordings-2026", "_id": "x", "_score": None, "_source": doc, "sort": [doc["key"], "r9"]}]))
    assert index.recordings("2026-11-27") == [{
        "recording_id": "r9", "key": "calls/2026/11/27/c9.wav", "call_date": "2026-11-27", "state": "indexed",
        "reason": None, "quality": "needs_review", "quality_failures": "speech_ratio", "segments": 4, "model": "m",
        "pipeline_version": "3"}]
    assert es.calls[-1].json() == {"query": {"term": {"call_date": "2026-11-27"}},
                                   "sort": [{"key": "asc"}, {"recording_id": "asc"}], "size": 1000,
                                   "track_total_hits": False}


def test_tags_are_updated_by_id_kept_by_a_reindex_and_filter_by_their_calls(index: ElasticsearchIndex,
                                                                          es: FakeElasticsearch) -> None:
    """A day's tags are partial updates of its recording documents (no update_by_query, which needs the reindex
    module); rewriting that version carries them over; a tag filter asks the recordings for their calls' ids."""
    rec = _recording("calls/2016/03/04/c1.wav")
    kid = key_id("recordings", rec.key)
    day = {"_index": "asr-recordings-2016", "_id": kid, "_source": {"recording_id": rec.recording_id},
           "sort": [rec.recording_id]}
    es.script("POST", "/asr-recordings/_refresh", (200, {"_shards": {"total": 2, "successful": 1, "failed": 0}}))
    es.script("POST", "/asr-recordings/_search", search_answer([day]))
    index.replace_tags("2016-03-04", {rec.recording_id: ["complaint", "cancellation", "complaint"], "other": ["x"]})
    assert [(c.method, c.path) for c in es.calls[-3:]] == [
        ("POST", "/asr-recordings/_refresh"), ("POST", "/asr-recordings/_search"), ("PUT", "/_bulk")]
    scan = es.calls[-2].json()
    assert scan["query"] == {"term": {"call_date": "2016-03-04"}} and scan["_source"] == ["recording_id"]
    assert es.calls[-1].ndjson() == [{"update": {"_index": "asr-recordings-2016", "_id": kid}},
                                     {"doc": {"tags": ["cancellation", "complaint"]}}]

    es.calls.clear()
    es.script("GET", f"/asr-recordings-2016/_doc/{kid}",
              (200, {"_index": "asr-recordings-2016", "_id": kid, "found": True,
                     "_source": {"segments": 1, "recording_id": rec.recording_id, "tags": ["complaint"]}}))
    index.replace_recording(_transcript(rec, ["好"]))
    assert es.calls[-1].ndjson()[1]["tags"] == ["complaint"]

    es.calls.clear()
    es.script("POST", "/asr-recordings/_search", search_answer([day]))
    index.search_page("好", Filters(date_from="2016-01-01", tags=("complaint", "cancellation")))
    lookup, search = (c.json() for c in es.calls)
    days = {"range": {"call_date": {"gte": "2016-01-01", "format": "yyyy-MM-dd"}}}
    assert lookup["query"] == {"bool": {"filter": [days, {"term": {"tags": "complaint"}},
                                                   {"term": {"tags": "cancellation"}}]}}
    assert search["query"]["bool"]["filter"] == [days, {"terms": {"recording_id": [rec.recording_id]}}]


def test_scans_page_with_search_after(index: ElasticsearchIndex, es: FakeElasticsearch) -> None:
    def finding(i: int) -> dict[str, Any]:
        return {"_index": "asr-findings-2026", "_id": f"f{i}", "_score": None,
                "_source": {"finding": {"finding_id": f"f{i}"}}, "sort": [i, f"f{i}"]}

    es.script("POST", "/asr-findings/_search", search_answer([finding(i) for i in range(1000)]),
              search_answer([finding(1000)]))
    assert len(index.findings("2026-11-27")) == 1001
    first, second = (c.json() for c in es.calls)
    assert "search_after" not in first and second["search_after"] == [999, "f999"]


def test_bad_settings_are_named(es_settings: Settings) -> None:
    with pytest.raises(ValueError, match="es_refresh"):
        open_index(es_settings.override(es_refresh="sometimes").index)
    with pytest.raises(ValueError, match="es_index_prefix"):
        open_index(es_settings.override(es_index_prefix="Calls*").index)
    with pytest.raises(ValueError, match="es_password"):
        open_index(es_settings.override(es_api_key=None, es_username="auditor").index)


def test_page_cursor_round_trip() -> None:
    values = [6.25, 1795737600000, "r1", 3]
    assert decode_cursor(encode_cursor(values), 4) == values
