"""A person's way through the search app: what each page offers next, and a real browser walking it.

The index answers a search by filters alone (no words) on every backend; the pages share one header that
shows what the signed-in user may open; the call page words each finding and says why a quarantined call
has nothing to play; the nightly QA report is served from the app with links that stay in it. The browser
tests walk the auditor's way (a finding's calls, one call, play at the finding, back, export) and the
operator's (progress, a day with a failure, its recordings).
"""

from __future__ import annotations

from typing import Any

from test_index_contract import EN_KEY, OLD_KEY, ZH_KEY, _recording, _transcript, es_index, index  # noqa: F401

from asr_tasks.index.base import TranscriptIndex
from asr_tasks.index.query import Filters


def spans(idx: TranscriptIndex, query: str, **filters: Any) -> set[tuple[str, float]]:
    return {(h.key, h.start) for h in idx.search_page(query, Filters(**filters), size=100).hits}


def test_filters_alone_find_every_segment_they_let_through(index: TranscriptIndex) -> None:  # noqa: F811
    """No words, a filter: every segment of the calls it lets through, in pages, counted and exported alike; no
    words and no filter, or an exclusion alone, still finds nothing."""
    assert spans(index, "", agent="AG-2") == {(EN_KEY, 0.5), (EN_KEY, 6.5)}
    assert spans(index, "  ", date_to="2025-12-31") == {(OLD_KEY, 3.0)}
    assert spans(index, "", speaker="customer") == {(ZH_KEY, 5.0), (EN_KEY, 6.5)}
    assert spans(index, "", quality="needs_review", speaker="agent") == {(EN_KEY, 0.5)}
    assert index.search_page("").hits == [] and index.search_page("  ").hits == []
    assert spans(index, "-风险", agent="AG-1") == set()  # what must not be said is not a search by itself
    [hit] = index.search_page("", Filters(date_to="2025-12-31")).hits
    assert hit.highlight == hit.text == "我们不保证收益，投资有风险。"
    seen, after = [], None
    while True:
        page = index.search_page("", Filters(agent="AG-1"), size=2, after=after)
        seen += [(h.key, h.start) for h in page.hits]
        if page.next_after is None:
            break
        after = page.next_after
    assert sorted(seen) == sorted({(ZH_KEY, 1.0), (ZH_KEY, 5.0), (ZH_KEY, 7.5), (OLD_KEY, 3.0)})
    assert [c.to_dict() for c in index.counts("", Filters(agent="AG-1"))] == [
        {"agent_id": "AG-1", "call_date": "2025-12-31", "segments": 1, "recordings": 1},
        {"agent_id": "AG-1", "call_date": "2026-11-27", "segments": 3, "recordings": 1},
    ]
    assert index.counts("") == []


def test_a_finding_rule_alone_lists_its_calls(index: TranscriptIndex) -> None:  # noqa: F811
    """The calls with a finding of the rule, by day and key, a page at a time, each with its matching segments;
    the calls per finding of that search count the calls, not their segments."""
    zh, en, old = _recording(ZH_KEY, agent="AG-1"), _recording(EN_KEY, agent="AG-2"), _recording(OLD_KEY, agent="AG-1")
    index.replace_findings("2026-11-27", [{"finding_id": "f1", "recording_id": zh.recording_id,
                                           "rule_id": "promise-of-return"}])
    index.replace_findings("2026-11-28", [{"finding_id": "f2", "recording_id": en.recording_id,
                                           "rule_id": "promise-of-return"},
                                          {"finding_id": "f3", "recording_id": en.recording_id,
                                           "rule_id": "recording-disclosure"}])
    index.replace_findings("2025-12-31", [{"finding_id": "f4", "recording_id": old.recording_id,
                                           "rule_id": "recording-disclosure"}])
    rule = Filters(rule="promise-of-return")
    assert spans(index, "", rule="promise-of-return") == {(ZH_KEY, 1.0), (ZH_KEY, 5.0), (ZH_KEY, 7.5),
                                                          (EN_KEY, 0.5), (EN_KEY, 6.5)}
    assert index.rule_counts("", rule) == {"promise-of-return": 2, "recording-disclosure": 1}
    listed = index.calls("", rule, size=10)
    assert [(c["key"], c["hits"], c["agent_id"]) for c in listed.calls] == [(ZH_KEY, 3, "AG-1"), (EN_KEY, 2, "AG-2")]
    assert listed.next_after is None and listed.calls[1]["quality"] == "needs_review"
    keys, after = [], None
    while True:
        page = index.calls("", Filters(agent="AG-1"), size=1, after=after)
        keys += [c["key"] for c in page.calls]
        if page.next_after is None:
            break
        after = page.next_after
    assert keys == [OLD_KEY, ZH_KEY]  # oldest day first, each call once
    assert [c["key"] for c in index.calls("收益", Filters()).calls] == [OLD_KEY, ZH_KEY]  # words narrow it too
    assert index.calls("", Filters()).calls == [] and index.calls("", Filters(rule="no-such-rule")).calls == []
