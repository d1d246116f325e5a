"""The production index: Elasticsearch 8 or 9 through the official client, same answers as SQLite.

Layout: yearly indices ``<prefix>-segments-YYYY`` and ``<prefix>-recordings-YYYY``
(and ``<prefix>-findings-YYYY`` for QA audits) behind the aliases
``<prefix>-segments`` etc., created from the index templates in
``include/elasticsearch/``; a backfill of 2016 writes to 2016's indices only.

Documents have deterministic ids derived from bucket and key, not from the ETag:
a recording's document and its n-th segment keep their ids across versions, so a
new version overwrites the old one in place and the stale tail (an older version
with more segments) is deleted by id in the same bulk request; the recording's own
document follows in a second request, only when every segment was accepted. Nothing
depends on a refresh having happened, and a re-run never duplicates. Nothing needs
the reindex module (``_delete_by_query``) or analysis-common when the analysers are
``standard`` and ``hunspell`` (see include/elasticsearch/README.md).

Queries come from ``asr_tasks.index.query``: the user's syntax is parsed once
and rendered as a bool query whose leaves are phrase simple_query_strings over
``text`` (the Chinese analyser: ``standard``, one token per character, or cjk bigrams, smartcn/IK) and ``text.en``
(standard tokens, Porter stems: SQLite's tokenizer, and one token per Chinese
character, so a phrase there matches any substring as in SQLite). Highlights come
from ``text.en`` and map back onto the segment, which carries its start and end
seconds. Pages are fetched with ``search_after`` on (score, recording, seq).

The 9.x client announces ``compatible-with=9``, which Elasticsearch 8 rejects;
requests are sent as ``compatible-with=8``, which 8 speaks natively and 9 through
its REST compatibility layer.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import re
from datetime import datetime, timezone
from typing import Any, Callable, Iterator, TypeVar, get_args

from elastic_transport import ConnectionError as TransportConnectionError
from elastic_transport import ConnectionTimeout, TlsError
from elasticsearch import ApiError, BadRequestError, Elasticsearch, NotFoundError, helpers

from asr_tasks import retry
from asr_tasks.config import EsRefresh, IndexSettings
from asr_tasks.index import es_audit
from asr_tasks.index.base import TranscriptIndex, recording_fields, tag_list, transcript_summary
from asr_tasks.index.es_results import AGENT_DAY_SOURCES, CALL_SOURCES, HIGHLIGHT_FIELD, row, search_hit
from asr_tasks.index.es_node import ENGLISH_STEMMERS, ElasticsearchIndexError, connect, load_template, missing_module
from asr_tasks.index.query import (
    HL_CLOSE,
    HL_OPEN,
    AgentDayCount,
    CallsPage,
    Filters,
    SearchPage,
    blank,
    decode_cursor,
    encode_cursor,
    to_elasticsearch,
)
from asr_tasks.index.query import parse as parse_query
from asr_tasks.index.tolerant import es_term
from asr_tasks.models import Quarantine, Recording, Segment, Transcript
from asr_tasks.text.sounds import FORM_FIELDS, forms

log = logging.getLogger(__name__)
KINDS = ("segments", "recordings", "findings")
RETRY_STATUSES = (429, 500, 502, 503, 504)
REFRESH_VALUES = get_args(EsRefresh)
TEXT_FIELDS = ["text", "text.en"]
PAGE = 1000  # documents per request when scanning (recordings, findings)

T = TypeVar("T")


def key_id(bucket: str, key: str) -> str:
    """Document id of whatever version of bucket/key is current; segments append -00000, -00001, ..."""
    return hashlib.sha256(f"{bucket}\x00{key}".encode()).hexdigest()[:24]


def _year(call_date: str | None) -> str:
    return call_date[:4] if call_date and re.fullmatch(r"\d{4}-\d{2}-\d{2}", call_date) else "undated"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class ElasticsearchIndex(TranscriptIndex):
    """Segments, recordings and findings in Elasticsearch; idempotent to rewrite, safe to share."""

    def __init__(
        self,
        client: Elasticsearch,
        prefix: str = "asr",
        analyzer: str = "standard",
        english_stemmer: str = "porter",
        refresh: str = "wait_for",
        max_retries: int = 5,
        retry_backoff: float = 1.0,
    ) -> None:
        if refresh not in REFRESH_VALUES:
            raise ValueError(f"es_refresh must be one of {', '.join(REFRESH_VALUES)}, not {refresh!r}")
        if not re.fullmatch(r"[a-z0-9][a-z0-9_.-]*", prefix):
            raise ValueError(f"es_index_prefix {prefix!r}: lowercase letters, digits, '_', '-', '.' only")
        self.client = client
        self.prefix = prefix
        if english_stemmer not in ENGLISH_STEMMERS:
            raise ValueError(f"es_english_stemmer must be one of {', '.join(ENGLISH_STEMMERS)}, not {english_stemmer!r}")
        self.analyzer = analyzer
        self.english_stemmer = english_stemmer
        self.refresh = refresh
        self.max_retries = max_retries
        self.retry_backoff = retry_backoff
        self._templates_ready = False
        self._indices_ready: set[str] = set()

    @classmethod
    def from_settings(cls, settings: IndexSettings) -> "ElasticsearchIndex":
        return cls(
            connect(settings),
            prefix=settings.es_index_prefix,
            analyzer=settings.es_analyzer,
            english_stemmer=settings.es_english_stemmer,
            refresh=settings.es_refresh,
            max_retries=settings.es_max_retries,
            retry_backoff=settings.es_retry_backoff_seconds,
        )

    # names

    def alias(self, kind: str) -> str:
        return f"{self.prefix}-{kind}"

    def index_name(self, kind: str, call_date: str | None) -> str:
        return f"{self.prefix}-{kind}-{_year(call_date)}"

    # requests, with back-off

    def _call(self, fn: Callable[[], T], statuses: tuple[int, ...] = RETRY_STATUSES) -> T:
        """Run one request, retrying overload (429), server errors and lost connections with back-off."""

        def transient(exc: BaseException) -> bool:
            if isinstance(exc, ApiError):
                return exc.status_code in statuses
            # a certificate does not heal
            return isinstance(exc, (TransportConnectionError, ConnectionTimeout)) and not isinstance(exc, TlsError)

        def reason(exc: BaseException) -> str:
            if isinstance(exc, ApiError):
                return f"HTTP {exc.status_code}"
            return f"{type(exc).__name__}: {getattr(exc, 'message', exc)}"

        try:
            return retry.policy("Elasticsearch", transient, self.max_retries, self.retry_backoff, jitter=False,
                                reason=reason, logger=log)(fn)
        except ApiError as exc:
            raise ElasticsearchIndexError(f"Elasticsearch: {exc}{missing_module(exc)}") from exc
        except (TransportConnectionError, ConnectionTimeout) as exc:
            raise ElasticsearchIndexError(f"Elasticsearch unreachable: {exc.message}") from exc

    def _search(self, kind: str, **body: Any) -> dict[str, Any]:
        response = self._call(lambda: self.client.search(
            index=self.alias(kind), ignore_unavailable=True, allow_no_indices=True, **body
        ))
        return dict(response.body)

    def _scan_hits(self, kind: str, query: dict[str, Any], sort: list[Any],
                   source: bool | list[str] = True) -> Iterator[dict[str, Any]]:
        """Every matching hit, in ``sort`` order, a page at a time via search_after; ``source``: its fields
        (those named, or none)."""
        after: list[Any] | None = None
        while True:
            extra: dict[str, Any] = {"search_after": after} if after is not None else {}
            if source is not True:
                extra["source"] = source
            hits = self._search(kind, query=query, sort=sort, size=PAGE, track_total_hits=False, **extra)["hits"]["hits"]
            yield from hits
            if len(hits) < PAGE:
                return
            after = hits[-1]["sort"]

    def _scan(self, kind: str, query: dict[str, Any], sort: list[Any]) -> Iterator[dict[str, Any]]:
        """Every matching document's source, in ``sort`` order."""
        for hit in self._scan_hits(kind, query, sort):
            yield hit["_source"]

    # set-up

    def _refresh(self, kind: str) -> None:
        """Every document of ``kind`` visible to searches now, whatever ``es_refresh`` wrote it with."""
        self._call(lambda: self.client.indices.refresh(index=self.alias(kind), ignore_unavailable=True,
                                                       allow_no_indices=True))

    def _ensure_index(self, kind: str, call_date: str | None) -> str:
        """The yearly index for the date, created (from the template, with its alias) when missing."""
        if not self._templates_ready:
            for name in KINDS:
                template = load_template(name, self.prefix, self.analyzer, self.english_stemmer)
                self._call(functools.partial(self.client.indices.put_index_template, name=self.alias(name),
                                             **template))
            self._templates_ready = True
        index = self.index_name(kind, call_date)
        if index not in self._indices_ready:

            def create() -> None:
                try:
                    self.client.indices.create(index=index)
                except BadRequestError as exc:
                    if exc.error != "resource_already_exists_exception":
                        raise
                    # made by an earlier version: fields added to the template since are added to it too; a
                    # field's analysers cannot change, so ``text`` keeps the analysis the index was made with
                    mappings = load_template(kind, self.prefix, self.analyzer, self.english_stemmer)
                    properties = {name: field for name, field in mappings["template"]["mappings"]["properties"].items()
                                  if name != "text"}
                    self.client.indices.put_mapping(index=index, properties=properties)

            self._call(create)
            self._indices_ready.add(index)
        return index

    # writing

    def _bulk(self, actions: list[dict[str, Any]], what: str) -> int:
        """Send actions with streaming_bulk (429/5xx retried with back-off); per-document failures raise."""
        failures: list[str] = []
        done = 0

        def run() -> None:
            nonlocal done
            failures.clear()
            done = 0
            for ok, item in helpers.streaming_bulk(
                self.client, actions, max_retries=self.max_retries, initial_backoff=self.retry_backoff,
                max_backoff=max(self.retry_backoff, 60.0), retry_on_status=RETRY_STATUSES,
                raise_on_error=False, refresh=self.refresh,
            ):
                op, info = next(iter(item.items()))
                if ok or (op in ("delete", "update") and info.get("status") == 404):  # gone already (erased)
                    done += 1
                    continue
                error = info.get("error")
                reason = f"{error.get('type')}: {error.get('reason')}" if isinstance(error, dict) else str(error)
                failures.append(f"{op} {info.get('_index')}/{info.get('_id')}: HTTP {info.get('status')} {reason}")

        self._call(run, statuses=())
        if failures:
            shown = "; ".join(failures[:5]) + ("; ..." if len(failures) > 5 else "")
            raise ElasticsearchIndexError(f"{what}: {len(failures)} of {len(actions)} documents failed: {shown}")
        return done

    def _replace(self, rec: Recording, doc: dict[str, Any], segments: list[dict[str, Any]]) -> None:
        """Write the recording's documents over whatever version of its key was there, then drop the excess; the
        QA tags and score of this very version stay (a reindex keeps them; another version has none until its
        audit)."""
        rid = key_id(rec.bucket, rec.key)
        seg_index = self._ensure_index("segments", rec.call_date)
        rec_index = self._ensure_index("recordings", rec.call_date)

        def stored() -> dict[str, Any]:
            """The key's current version: its id, segment count, tags and score (a realtime get: no refresh
            needed)."""
            try:
                old = self.client.get(index=rec_index, id=rid,
                                      source_includes=["segments", "recording_id", "tags", "score"])
            except NotFoundError:
                return {}
            return dict(old["_source"])

        old = self._call(stored)
        old_count = int(old.get("segments") or 0)
        if old.get("recording_id") == rec.recording_id:
            doc = {**doc, **{k: old[k] for k in ("tags", "score") if old.get(k) is not None}}
        actions: list[dict[str, Any]] = [
            {"_op_type": "index", "_index": seg_index, "_id": f"{rid}-{seq:05d}", "_source": seg}
            for seq, seg in enumerate(segments)
        ]
        actions += [{"_op_type": "delete", "_index": seg_index, "_id": f"{rid}-{seq:05d}"}
                    for seq in range(len(segments), old_count)]
        if actions:
            self._bulk(actions, f"{rec.bucket}/{rec.key}")
        # Only once every segment is in: a refused segment raises above, and the recording document does not
        # claim a version whose text is incomplete.
        self._bulk([{"_op_type": "index", "_index": rec_index, "_id": rid, "_source": doc}], f"{rec.bucket}/{rec.key}")

    def replace_recording(self, transcript: Transcript) -> int:
        """Index one recording's segments, replacing whatever was indexed for its key before."""
        rec = transcript.recording
        doc = {**recording_fields(rec), **transcript_summary(transcript), "updated_at": _now()}
        shared = {k: doc[k] for k in ("recording_id", "bucket", "key", "call_id", "call_date", "started_at",
                                      "agent_id", "customer_id", "direction", "quality", "model", "pipeline_version",
                                      "non_talk_share", "agent_interruptions", "customer_interruptions")}
        now = _now()
        segments = [
            {
                **shared,
                "segment_id": f"{rec.recording_id}-{seq:05d}",
                "seq": seq,
                "channel": seg.channel,
                "speaker": seg.speaker,
                "start": seg.start,
                "end": seg.end,
                "text": seg.text,
                **forms(seg.text),
                "avg_logprob": seg.avg_logprob,
                "no_speech_prob": seg.no_speech_prob,
                "language": seg.language or transcript.language,
                "indexed_at": now,
            }
            for seq, seg in enumerate(transcript.segments)
        ]
        self._replace(rec, doc, segments)
        return len(segments)

    def record_quarantine(self, quarantine: Quarantine) -> None:
        doc = {
            **recording_fields(quarantine.recording),
            "pipeline_version": quarantine.pipeline_version,
            "state": quarantine.state,
            "reason": quarantine.reason,
            "segments": 0,
            "updated_at": _now(),
        }
        self._replace(quarantine.recording, doc, [])

    def delete_recording(self, bucket: str, key: str) -> int:
        """The key's recording document and its segments, by id (their count is in the recording document)."""
        rid = key_id(bucket, key)
        hits = self._search("recordings", query={"ids": {"values": [rid]}}, size=1)["hits"]["hits"]
        if not hits:
            return 0
        rec_index = hits[0]["_index"]
        seg_index = rec_index.replace(f"{self.prefix}-recordings-", f"{self.prefix}-segments-", 1)
        count = int(hits[0]["_source"].get("segments") or 0)
        actions = [{"_op_type": "delete", "_index": seg_index, "_id": f"{rid}-{seq:05d}"} for seq in range(count)]
        actions.append({"_op_type": "delete", "_index": rec_index, "_id": rid})
        self._bulk(actions, f"{bucket}/{key}")
        return 1

    def purge_deleted(self) -> None:
        """Lucene keeps deleted documents in its segments until they merge: expunge them from every index."""
        pattern = ",".join(f"{self.prefix}-{kind}-*" for kind in KINDS)
        self._call(lambda: self.client.indices.forcemerge(index=pattern, only_expunge_deletes=True))

    # reading

    def segments(self, recording_id: str) -> list[Segment]:
        return [Segment.from_dict(src) for src in self._scan("segments", {"term": {"recording_id": recording_id}},
                                                             [{"seq": "asc"}])]

    def recording(self, recording_id: str) -> dict[str, Any] | None:
        """The current recording document with this id (bucket, key, call date, state, ...)."""
        hits = self._search("recordings", query={"term": {"recording_id": recording_id}}, size=1)["hits"]["hits"]
        return row(hits[0]["_source"]) if hits else None

    def recordings(self, call_date: str | None = None) -> list[dict[str, Any]]:
        """The day's recording documents, as the view shows them (quality, state and reason copied from the gate)."""
        query = {"term": {"call_date": call_date}} if call_date else {"match_all": {}}
        fields = ("recording_id", "key", "call_date", "state", "reason", "quality", "quality_failures", "segments",
                  "model", "pipeline_version")
        return [{f: doc.get(f) for f in fields}
                for doc in map(row, self._scan("recordings", query, [{"key": "asc"}, {"recording_id": "asc"}]))]

    @staticmethod
    def _days(filters: Filters) -> list[dict[str, Any]]:
        """The filters' range of days, for any kind of document (each has ``call_date``)."""
        if not (filters.date_from or filters.date_to):
            return []
        bounds = {op: value for op, value in (("gte", filters.date_from), ("lte", filters.date_to)) if value}
        return [{"range": {"call_date": {**bounds, "format": "yyyy-MM-dd"}}}]

    def _filters(self, filters: Filters) -> list[dict[str, Any]]:
        out = self._days(filters)
        for field, value in (("agent_id", filters.agent), ("speaker", filters.speaker), ("quality", filters.quality)):
            if value:
                out.append({"term": {field: value}})
        if filters.agents is not None:  # the calls one may see: none at all where no agent is theirs
            out.append({"terms": {"agent_id": sorted(filters.agents)}})
        out += es_audit.audit_filters(self, filters, self._days(filters))
        for field, least in (("non_talk_share", filters.min_non_talk_share),
                             ("agent_interruptions", filters.min_agent_interruptions),
                             ("customer_interruptions", filters.min_customer_interruptions)):
            if least is not None:
                out.append({"range": {field: {"gte": least}}})
        return out

    def _query(self, query: str, filters: Filters) -> dict[str, Any] | None:
        """The query with its filters; a blank one with filters matches every segment they let through."""
        node = parse_query(query, filters.sounds_like)
        if node is None:
            return {"bool": {"filter": self._filters(filters)}} if blank(query) and filters.narrows() else None
        leaf = functools.partial(es_term, fields=TEXT_FIELDS)
        return {"bool": {"must": [to_elasticsearch(node, leaf)], "filter": self._filters(filters)}}

    def search_page(
        self,
        query: str,
        filters: Filters = Filters(),
        size: int = 20,
        after: str | None = None,
        open_tag: str = "<em>",
        close_tag: str = "</em>",
    ) -> SearchPage:
        """Hits by relevance, ties by recording and position; deep pages via search_after."""
        es_query = self._query(query, filters)
        if es_query is None:
            return SearchPage([])
        body: dict[str, Any] = {
            "query": es_query,
            "sort": [{"_score": "desc"}, {"recording_id": "asc"}, {"seq": "asc"}],
            "size": size + 1,
            "track_total_hits": False,
            "_source": {"excludes": list(FORM_FIELDS)},
            "highlight": {
                "pre_tags": [HL_OPEN],
                "post_tags": [HL_CLOSE],
                "fields": {HIGHLIGHT_FIELD: {"number_of_fragments": 0}},
            },
        }
        if after is not None:
            body["search_after"] = decode_cursor(after, 3)
        hits = self._search("segments", **body)["hits"]["hits"]
        node = parse_query(query, filters.sounds_like)
        page = [search_hit(hit, node, open_tag, close_tag) for hit in hits[:size]]
        next_after = encode_cursor(hits[size - 1]["sort"]) if len(hits) > size and size > 0 else None
        return SearchPage(page, next_after)

    def calls(self, query: str, filters: Filters = Filters(), size: int = 20, after: str | None = None) -> CallsPage:
        """The matching calls by day, key and id (a composite aggregation), then their recording documents."""
        es_query = self._query(query, filters)
        if es_query is None:
            return CallsPage([])
        composite: dict[str, Any] = {"size": size + 1, "sources": CALL_SOURCES}
        if after is not None:
            composite["after"] = dict(zip(("day", "key", "call"), decode_cursor(after, 3)))
        result = self._search("segments", query=es_query, size=0, track_total_hits=False,
                              aggs={"calls": {"composite": composite}})
        buckets = result.get("aggregations", {}).get("calls", {}).get("buckets", [])
        page = buckets[:size]
        ids = [b["key"]["call"] for b in page]
        docs = {src["recording_id"]: row(src) for src in self._scan("recordings", {"terms": {"recording_id": ids}},
                                                                     [{"recording_id": "asc"}])} if ids else {}
        calls = [{**docs[b["key"]["call"]], "hits": b["doc_count"]} for b in page if b["key"]["call"] in docs]
        last = page[-1]["key"] if page else {}
        more = len(buckets) > size and page
        return CallsPage(calls, encode_cursor([last["day"], last["key"], last["call"]]) if more else None)

    def counts(self, query: str, filters: Filters = Filters()) -> list[AgentDayCount]:
        """Matching segments and recordings per agent and day (a composite aggregation, paged)."""
        es_query = self._query(query, filters)
        if es_query is None:
            return []
        composite: dict[str, Any] = {"size": PAGE, "sources": AGENT_DAY_SOURCES}
        out: list[AgentDayCount] = []
        while True:
            aggs = {"per_agent_day": {"composite": composite,
                                      "aggs": {"recordings": {"cardinality": {"field": "recording_id"}}}}}
            result = self._search("segments", query=es_query, size=0, track_total_hits=False, aggs=aggs)
            agg = result.get("aggregations", {}).get("per_agent_day", {})
            for bucket in agg.get("buckets", []):
                out.append(AgentDayCount(bucket["key"]["agent"], bucket["key"]["day"], bucket["doc_count"],
                                         bucket["recordings"]["value"]))
            if "after_key" not in agg or not agg.get("buckets"):
                return out
            composite = {**composite, "after": agg["after_key"]}

    # QA audit: its findings and tags, and the facets they give a search (es_audit.py)

    def rule_counts(self, query: str, filters: Filters = Filters()) -> dict[str, int]:
        return es_audit.rule_counts(self, query, filters)

    def tag_counts(self, query: str, filters: Filters = Filters()) -> dict[str, int]:
        return es_audit.tag_counts(self, query, filters)

    def score_counts(self, query: str, filters: Filters = Filters()) -> dict[str, int]:
        return es_audit.score_counts(self, query, filters)

    def replace_findings(self, call_date: str, findings: list[dict[str, Any]]) -> None:
        es_audit.replace_findings(self, call_date, findings)

    def findings(self, call_date: str) -> list[dict[str, Any]]:
        return es_audit.findings(self, call_date)

    def replace_tags(self, call_date: str, tags: dict[str, list[str]]) -> None:
        es_audit.replace_tags(self, call_date, {rid: tag_list(t) for rid, t in tags.items()}, "tags", [])

    def replace_scores(self, call_date: str, scores: dict[str, float | None]) -> None:
        es_audit.replace_tags(self, call_date, scores, "score", None)
