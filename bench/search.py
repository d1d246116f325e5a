"""Indexing rate and search latency at a million segments, on the embedded SQLite index or on Elasticsearch.

Writes synthetic calls (Chinese and English sentences drawn from a finance
call-centre vocabulary, 500 segments per recording, spread over a year and 50
agents) through ``replace_recording``, then times ``search`` for a two-character
Chinese word, an English phrase, the same with filters, a deep page, and the
per-agent/day counts, each exact and tolerant (``~term``, ``--sounds-like``:
``asr_tasks.text.sounds``). Some segments carry the target words as a recogniser
may write them wrongly (手益 for 收益, "garanteed return"), which only a tolerant
search finds; ``matches`` gives each query's matching segments in both modes. SQLite's index is kept in var/bench/ and reused while it has
the requested size; ``--backend elasticsearch`` starts the test suite's
Elasticsearch 9 node (tests/services.py: one node, ``--es-heap``, security and
TLS on, the analysers of its minimal distribution) and builds the index afresh,
with ``es_refresh: false`` as a backfill would, then refreshes once.

    .venv/bin/python bench/search.py [--backend sqlite|elasticsearch] [--segments 1000000] [--runs 50] [--quick]
                                     [--json]

``--quick`` times the same searches on 20,000 segments, five runs each, in an
SQLite index of its own (var/bench/search-quick.sqlite). The JSON's keys:
``backend``, ``segments``, ``index_mb``, ``build_seconds``,
``segments_per_second``, ``matches`` (per mode, ``exact`` and ``tolerant``: per
query, its matching segments), ``latency`` (per search: ``p50_ms``, ``p95_ms``,
``max_ms``).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from datetime import date, timedelta
from pathlib import Path
from typing import Any, Callable

from synthetic import parse_args

from asr_tasks.config import PROJECT_ROOT, Settings
from asr_tasks.index.backends import open_index
from asr_tasks.index.base import TranscriptIndex
from asr_tasks.index.elasticsearch import ElasticsearchIndex
from asr_tasks.index.query import Filters
from asr_tasks.index.sqlite import SqliteIndex
from asr_tasks.models import Recording, Segment, Transcript, recording_id_for

QUICK = {"segments": 20_000, "runs": 5, "index": PROJECT_ROOT / "var" / "bench" / "search-quick.sqlite"}
PER_RECORDING = 500
ZH_WORDS = ["您好", "请问", "这款", "产品", "理财", "基金", "账户", "利率", "风险", "客户", "银行", "保险", "年化",
            "本金", "到期", "手续费", "我们", "可以", "已经", "没有", "明白", "谢谢", "办理", "信用卡", "还款",
            "额度", "投资", "市场", "波动", "合同", "签字", "确认", "一下", "时间", "稳健", "分红", "赎回"]
ZH_TARGET = "收益"  # in about 3 % of the Chinese segments
EN_WORDS = ["the", "fund", "account", "rate", "we", "can", "your", "payment", "card", "interest", "thank", "you",
            "please", "confirm", "policy", "number", "balance", "transfer", "market", "risk", "every", "year",
            "month", "deposit", "minimum", "investment", "plan", "return", "returns", "call"]
EN_TARGET = "guaranteed return"  # as a phrase in about 1 % of the English segments
MISHEARD = {ZH_TARGET: "手益", EN_TARGET: "garanteed return"}  # as the model may write them, in 0.5 % more
COMPARED = [ZH_TARGET, f'"{EN_TARGET}"', "理财", "account", "payment card"]  # queries counted in both modes


def synthetic_text(rng: random.Random) -> str:
    if rng.random() < 0.7:
        words = rng.choices(ZH_WORDS, k=rng.randint(6, 16))
        if rng.random() < 0.03:
            words.insert(rng.randrange(len(words)), ZH_TARGET)
        elif rng.random() < 0.005:
            words.insert(rng.randrange(len(words)), MISHEARD[ZH_TARGET])
        return "".join(words) + rng.choice("。？，")
    words = rng.choices(EN_WORDS, k=rng.randint(6, 18))
    if rng.random() < 0.01:
        words.insert(rng.randrange(len(words)), EN_TARGET)
    elif rng.random() < 0.005:
        words.insert(rng.randrange(len(words)), MISHEARD[EN_TARGET])
    return " ".join(words).capitalize() + "."


def build(index: TranscriptIndex, segments: int, seed: int = 7) -> float:
    rng = random.Random(seed)
    started = time.perf_counter()
    first_day = date(2026, 1, 1)
    for n in range(segments // PER_RECORDING):
        day = first_day + timedelta(days=n % 365)
        key = f"calls/{day:%Y/%m/%d}/bench_{n:07d}.wav"
        rec = Recording(recording_id=recording_id_for("recordings", key, "b"), bucket="recordings", key=key,
                        etag="b", size=1, call_id=f"bench_{n:07d}", call_date=f"{day}", agent_id=f"AG-{n % 50:04d}")
        segs = [Segment(rec.recording_id, i % 2, ("agent", "customer")[i % 2], 4.0 * i, 4.0 * i + 3.5,
                        synthetic_text(rng)) for i in range(PER_RECORDING)]
        index.replace_recording(Transcript(recording=rec, duration=4.0 * PER_RECORDING, segments=segs, language="zh",
                                           model="bench", pipeline_version="bench", quality="pass"))
    return time.perf_counter() - started


def timed(fn: Callable[[], object], runs: int) -> dict[str, float]:
    fn()  # warm the page cache and SQLite's
    ms = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        ms.append((time.perf_counter() - started) * 1000)
    q = statistics.quantiles(ms, n=20, method="inclusive")
    return {"p50_ms": round(statistics.median(ms), 2), "p95_ms": round(q[18], 2), "max_ms": round(max(ms), 2)}


def segment_count(index: TranscriptIndex) -> int:
    if isinstance(index, SqliteIndex):
        return index.segment_count()
    assert isinstance(index, ElasticsearchIndex)
    return int(index.client.count(index=index.alias("segments"))["count"])


def matches(index: TranscriptIndex, query: str, filters: Filters = Filters()) -> int:
    return sum(c.segments for c in index.counts(query, filters))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["sqlite", "elasticsearch"], default="sqlite")
    parser.add_argument("--segments", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--index", type=Path, default=PROJECT_ROOT / "var" / "bench" / "search-1m.sqlite")
    parser.add_argument("--es-heap", default="2g")
    parser.add_argument("--json", action="store_true")
    args = parse_args(parser, QUICK)

    node = None
    build_seconds = None
    wanted = args.segments // PER_RECORDING * PER_RECORDING
    if args.backend == "sqlite":
        index: TranscriptIndex = SqliteIndex(args.index)
        if segment_count(index) != wanted:
            args.index.unlink()
            index = SqliteIndex(args.index)
            build_seconds = round(build(index, args.segments), 1)
    else:
        sys.path.insert(0, str(PROJECT_ROOT / "tests"))
        import services

        node = services.start_elasticsearch(heap=args.es_heap)
        settings = Settings().override(index_backend="elasticsearch", es_url=node.url, es_username=node.username, es_password=node.password, es_ca_certs=node.ca_certs, es_analyzer="standard", es_english_stemmer="hunspell", es_index_prefix="bench", es_refresh="false")
        index = open_index(settings.index)
        assert isinstance(index, ElasticsearchIndex)
        build_seconds = build(index, args.segments)
        started = time.perf_counter()
        index.client.indices.refresh(index="bench-*")
        build_seconds = round(build_seconds + time.perf_counter() - started, 1)
    try:
        results = measure(index, args, build_seconds)
    finally:
        if node is not None:
            node.server.stop()
    if args.json:
        print(json.dumps(results, ensure_ascii=False, indent=2))
        return
    print(f"{args.backend}: {results['segments']:,} segments, {results['index_mb']} MiB"
          + (f", built in {build_seconds} s ({results['segments_per_second']:,} segments/s)" if build_seconds
             else " (reused)")
          + "; matching segments, exact / tolerant: "
          + ", ".join(f"{q} {results['matches']['exact'][q]:,} / {results['matches']['tolerant'][q]:,}"
                      for q in COMPARED))
    for name, t in results["latency"].items():
        print(f"  {name:45} p50 {t['p50_ms']:8.2f} ms   p95 {t['p95_ms']:8.2f} ms   max {t['max_ms']:8.2f} ms")


def index_mib(index: TranscriptIndex, path: Path) -> float:
    if isinstance(index, ElasticsearchIndex):
        stats = index.client.indices.stats(index=index.alias("segments"), metric="store")
        return round(stats["_all"]["primaries"]["store"]["size_in_bytes"] / 2**20, 1)
    return round(path.stat().st_size / 2**20, 1)


def measure(index: TranscriptIndex, args: argparse.Namespace, build_seconds: float | None) -> dict[str, Any]:
    segments = segment_count(index)
    deep_after = None
    for _ in range(10):  # the cursor of page 11
        deep_after = index.search_page(ZH_TARGET, size=20, after=deep_after).next_after
    june = Filters(date_from="2026-06-01", date_to="2026-06-30", agent="AG-0007", speaker="agent")
    alike = Filters(sounds_like=True)
    combined = f'{ZH_TARGET} | "{EN_TARGET}" -风险'
    return {
        "backend": args.backend,
        "segments": segments,
        "index_mb": index_mib(index, args.index),
        "build_seconds": build_seconds,
        "segments_per_second": round(segments / build_seconds) if build_seconds else None,
        "matches": {"exact": {q: matches(index, q) for q in COMPARED},
                    "tolerant": {q: matches(index, q, alike) for q in COMPARED}},
        "latency": {
            f"{ZH_TARGET} (top 20)": timed(lambda: index.search(ZH_TARGET, limit=20), args.runs),
            f'"{EN_TARGET}" (top 20)': timed(lambda: index.search(f'"{EN_TARGET}"', limit=20), args.runs),
            f"{ZH_TARGET}, one agent, June, agent side": timed(lambda: index.search_page(ZH_TARGET, june), args.runs),
            f"{ZH_TARGET}, page 11": timed(lambda: index.search_page(ZH_TARGET, after=deep_after), args.runs),
            f"{ZH_TARGET} | \"{EN_TARGET}\" -风险 (top 20)": timed(
                lambda: index.search(combined, limit=20), args.runs),
            f"{ZH_TARGET}: counts per agent and day": timed(lambda: index.counts(ZH_TARGET), max(args.runs // 5, 3)),
            f"~{ZH_TARGET} (top 20)": timed(lambda: index.search(f"~{ZH_TARGET}", limit=20), args.runs),
            f'~"{EN_TARGET}" (top 20)': timed(lambda: index.search(f'~"{EN_TARGET}"', limit=20), args.runs),
            f"sounds like: {combined} (top 20)": timed(
                lambda: index.search_page(combined, alike, size=20), args.runs),
            f"~{ZH_TARGET}, one agent, June, agent side": timed(
                lambda: index.search_page(f"~{ZH_TARGET}", june), args.runs),
            f"~{ZH_TARGET}: counts per agent and day": timed(lambda: index.counts(f"~{ZH_TARGET}"),
                                                             max(args.runs // 5, 3)),
        },
    }


if __name__ == "__main__":
    main()
