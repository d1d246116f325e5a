"""The QA audit's documents in Elasticsearch: a day's findings and its calls' tags and scores, the filters and
the facets per call (findings per rule, calls per tag and per band of score) they give a search.

Findings live in ``<prefix>-findings-YYYY``; tags on the recording documents. A
day's audit replaces both by id (no reindex module), after a refresh so that
every earlier document is seen whatever ``es_refresh`` wrote it with.
"""

from __future__ import annotations

from typing import Any, Iterator, Protocol

from asr_tasks.index.query import SCORE_BANDS, Filters

MAX_RULE_RECORDINGS = 10_000  # calls a finding-rule or tag filter or facet handles at once


class Documents(Protocol):
    """What these need of the index (``ElasticsearchIndex``): its requests, with its retries and templates."""

    def _query(self, query: str, filters: Filters) -> dict[str, Any] | None: ...

    def _search(self, kind: str, **body: Any) -> dict[str, Any]: ...

    def _scan_hits(self, kind: str, query: dict[str, Any], sort: list[Any],
                   source: bool | list[str] = True) -> Iterator[dict[str, Any]]: ...

    def _scan(self, kind: str, query: dict[str, Any], sort: list[Any]) -> Iterator[dict[str, Any]]: ...

    def _ensure_index(self, kind: str, call_date: str | None) -> str: ...

    def _refresh(self, kind: str) -> None: ...

    def _bulk(self, actions: list[dict[str, Any]], what: str) -> int: ...


def calls_with(es: Documents, kind: str, query: dict[str, Any], sort: str, what: str) -> dict[str, Any]:
    """A filter of segments on the calls whose ``kind`` documents ``query`` finds (``what`` they have, for the
    refusal when there are more than MAX_RULE_RECORDINGS)."""
    ids = sorted({hit["_source"]["recording_id"]
                  for hit in es._scan_hits(kind, query, [{sort: "asc"}], source=["recording_id"])})
    if len(ids) > MAX_RULE_RECORDINGS:
        raise ValueError(f"{len(ids)} calls {what}; narrow the search by date first (at most {MAX_RULE_RECORDINGS})")
    return {"terms": {"recording_id": ids}}


def audit_filters(es: Documents, filters: Filters, days: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Filters on what the audit wrote of a call (a finding of a rule, tags, a range of scores): those live on the
    findings and recording documents, so the segments are filtered by their calls' ids (``days``: the search's
    range of days, which bounds how many)."""
    out = []
    if filters.rule:
        out.append(calls_with(es, "findings", {"term": {"rule_id": filters.rule}}, "finding_id",
                              f"have a {filters.rule} finding"))
    if filters.tags:
        tagged = {"bool": {"filter": [*days, *({"term": {"tags": tag}} for tag in filters.tags)]}}
        out.append(calls_with(es, "recordings", tagged, "recording_id", f"are tagged {', '.join(filters.tags)}"))
    if filters.min_score is not None or filters.max_score is not None:
        bounds = {k: v for k, v in (("gte", filters.min_score), ("lte", filters.max_score)) if v is not None}
        scored = {"bool": {"filter": [*days, {"range": {"score": bounds}}]}}
        out.append(calls_with(es, "recordings", scored, "recording_id", "score so"))
    return out


def matching_calls(es: Documents, query: str, filters: Filters) -> list[str]:
    """The ids of the calls with a matching segment (at most MAX_RULE_RECORDINGS), for the facets per call."""
    es_query = es._query(query, filters)
    if es_query is None:
        return []
    aggs = {"calls": {"terms": {"field": "recording_id", "size": MAX_RULE_RECORDINGS}}}
    result = es._search("segments", query=es_query, size=0, track_total_hits=False, aggs=aggs)
    return [b["key"] for b in result.get("aggregations", {}).get("calls", {}).get("buckets", [])]


def rule_counts(es: Documents, query: str, filters: Filters = Filters()) -> dict[str, int]:
    """The matching calls, then their findings counted per rule."""
    ids = matching_calls(es, query, filters)
    if not ids:
        return {}
    aggs = {"rules": {"terms": {"field": "rule_id", "size": 1000},
                      "aggs": {"calls": {"cardinality": {"field": "recording_id"}}}}}
    found = es._search("findings", query={"terms": {"recording_id": ids}}, size=0, track_total_hits=False,
                       aggs=aggs)
    return {b["key"]: b["calls"]["value"] for b in sorted(
        found.get("aggregations", {}).get("rules", {}).get("buckets", []), key=lambda b: b["key"])}


def tag_counts(es: Documents, query: str, filters: Filters = Filters()) -> dict[str, int]:
    """The matching calls, then their recording documents (one per call) counted per tag."""
    ids = matching_calls(es, query, filters)
    if not ids:
        return {}
    found = es._search("recordings", query={"terms": {"recording_id": ids}}, size=0, track_total_hits=False,
                       aggs={"tags": {"terms": {"field": "tags", "size": 1000}}})
    return {b["key"]: b["doc_count"] for b in sorted(
        found.get("aggregations", {}).get("tags", {}).get("buckets", []), key=lambda b: b["key"])}


def score_counts(es: Documents, query: str, filters: Filters = Filters()) -> dict[str, int]:
    """The matching calls, then their recording documents counted per score band."""
    ids = matching_calls(es, query, filters)
    if not ids:
        return {}
    ranges = [{"key": name, "from": low, **({"to": high} if high is not None else {})}
              for (name, low), high in zip(SCORE_BANDS, [None, *(low for _, low in SCORE_BANDS[:-1])])]
    found = es._search("recordings", query={"terms": {"recording_id": ids}}, size=0, track_total_hits=False,
                       aggs={"bands": {"range": {"field": "score", "ranges": ranges}}})
    return {b["key"]: b["doc_count"] for b in found.get("aggregations", {}).get("bands", {}).get("buckets", [])
            if b["doc_count"]}


def replace_findings(es: Documents, call_date: str, findings: list[dict[str, Any]]) -> None:
    """The day's audit findings, replacing any earlier audit of that day."""
    name = es._ensure_index("findings", call_date)
    actions = [
        {"_op_type": "index", "_index": name, "_id": f["finding_id"],
         "_source": {"finding_id": f["finding_id"], "call_date": call_date, "recording_id": f["recording_id"],
                     "rule_id": f["rule_id"], "seq": seq, "finding": f}}
        for seq, f in enumerate(findings)
    ]
    stale = {"bool": {"filter": [{"term": {"call_date": call_date}}],
                      "must_not": [{"ids": {"values": [f["finding_id"] for f in findings]}}]}}
    # By id rather than _delete_by_query, which needs the reindex module; the refresh makes every earlier
    # finding visible to the scan, whatever es_refresh they were written with.
    es._refresh("findings")
    actions += [{"_op_type": "delete", "_index": hit["_index"], "_id": hit["_id"]}
                for hit in es._scan_hits("findings", stale, [{"finding_id": "asc"}], source=False)]
    if actions:
        es._bulk(actions, f"findings of {call_date}")


def findings(es: Documents, call_date: str) -> list[dict[str, Any]]:
    return [src["finding"] for src in es._scan("findings", {"term": {"call_date": call_date}},
                                               [{"seq": "asc"}, {"finding_id": "asc"}])]


def replace_tags(es: Documents, call_date: str, values: dict[str, Any], field: str, none: Any) -> None:
    """The day's audit tags or scores (``field``) on its recording documents (partial updates by id), replacing
    any earlier audit of that day: a recording not in ``values`` gets ``none``."""
    es._ensure_index("recordings", call_date)  # an index made before the field existed gets it first
    # The refresh makes every recording of the day visible to the scan, whatever es_refresh wrote it with.
    es._refresh("recordings")
    day = es._scan_hits("recordings", {"term": {"call_date": call_date}}, [{"recording_id": "asc"}],
                        source=["recording_id"])
    actions = [{"_op_type": "update", "_index": hit["_index"], "_id": hit["_id"],
                "doc": {field: values.get(hit["_source"]["recording_id"], none)}} for hit in day]
    if actions:
        es._bulk(actions, f"{field} of {call_date}")

