"""What the call page and the exports cost on big inputs.

A three-hour two-speaker call (``--segments``, 2,400 by default, with analytics
and findings) is indexed, and its call page is built through the app
(``TestClient``: routing, index reads, the timeline and the template; no
network) several times: the server time per page. Then a search with
``--hits`` hits is exported as CSV and as JSON: wall time, size, and the peak of
Python's memory while streaming.

    .venv/bin/python bench/call_page.py [--segments 2400] [--hits 100000] [--quick] [--json]

``--quick`` builds the same pages and exports from 200 segments and 1,000 hits.
The JSON's keys: ``call_segments``, ``call_page_ms_median``,
``call_page_ms_first``, ``call_page_kb``, ``export_hits``, ``export`` (``csv``
and ``json``: ``wall_s``, ``mb``, ``peak_python_mb``).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path

from fastapi.testclient import TestClient
from synthetic import parse_args, print_report

from asr_tasks.config import load_settings
from asr_tasks.index.export import export
from asr_tasks.index.query import Filters
from asr_tasks.index.sqlite import SqliteIndex
from asr_tasks.models import Recording, Segment, Transcript, recording_id_for
from asr_tasks.web.app import create_app

QUICK = {"segments": 200, "hits": 1000}
TEXT = "the balance of the savings account was checked and confirmed with the customer"


def long_call(index: SqliteIndex, segments: int) -> str:
    duration = 3 * 3600.0
    step = duration / segments
    key = "calls/2026/11/27/three_hours.wav"
    rec = Recording(recording_id_for("recordings", key, "e"), "recordings", key, "e", 1, "three_hours", "2026-11-27",
                    agent_id="AG-1")
    segs = [Segment(rec.recording_id, k % 2, ("agent", "customer")[k % 2], k * step, k * step + step * 0.8,
                    f"{TEXT} {k}") for k in range(segments)]
    speech = {name: [[s.start, s.end] for s in segs if s.speaker == name] for name in ("agent", "customer")}
    analytics = {"non_talk_share": 0.2, "non_talk_seconds": 2160.0, "talk_seconds": 8640.0, "longest_silence_seconds":
                 4.0, "overlap_seconds": 0.0, "turns": segments, "silences": [[s.end, s.end + step * 0.2] for s in segs],
                 "speech": speech, "speakers": {}}
    index.replace_recording(Transcript(rec, duration, segs, "en", "m", "1", quality="pass", analytics=analytics))
    index.replace_findings("2026-11-27", [
        {"finding_id": f"f{n}", "recording_id": rec.recording_id, "rule_id": "promise-of-return", "severity": "high",
         "description": "", "speaker": "agent", "start": n * 60.0, "end": n * 60.0 + 3, "key": key,
         "matched_text": "guarantee", "agent_id": "AG-1"} for n in range(100)])
    return rec.recording_id


def many_hits(index: SqliteIndex, hits: int) -> None:
    per = 200
    for n in range(hits // per):
        key = f"calls/2026/11/28/call_{n:05d}.wav"
        rec = Recording(recording_id_for("recordings", key, "e"), "recordings", key, "e", 1, key, "2026-11-28")
        index.replace_recording(Transcript(rec, 400.0, [
            Segment(rec.recording_id, k % 2, ("agent", "customer")[k % 2], 2.0 * k, 2.0 * k + 1.5, f"{TEXT} {k}")
            for k in range(per)], "en", "m", "1"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--segments", type=int, default=2400)
    parser.add_argument("--hits", type=int, default=100_000)
    parser.add_argument("--json", action="store_true")
    args = parse_args(parser, QUICK)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        settings = load_settings(env={"ASR_INDEX_PATH": str(root / "index.sqlite"), "ASR_STORE_ROOT": str(root),
                                      "ASR_LEDGER_URL": f"sqlite:///{root / 'ledger.sqlite'}"})
        index = SqliteIndex(root / "index.sqlite")
        rid = long_call(index, args.segments)
        client = TestClient(create_app(settings, index=index))
        times, size = [], 0
        for _ in range(6):
            started = time.perf_counter()
            page = client.get(f"/call/{rid}", params={"q": "balance", "t": 3600})
            times.append(time.perf_counter() - started)
            size = len(page.content)
            assert page.status_code == 200 and page.text.count('class="seg') >= args.segments
        many_hits(index, args.hits)
        exports = {}
        for fmt in ("csv", "json"):
            tracemalloc.start()
            started = time.perf_counter()
            written = sum(len(piece.encode()) for piece in export(index, "balance", Filters(date_from="2026-11-28"),
                                                                  fmt))
            wall = time.perf_counter() - started
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            exports[fmt] = {"wall_s": round(wall, 2), "mb": round(written / 1e6, 1), "peak_python_mb": round(peak / 1e6, 2)}
    report = {
        "call_segments": args.segments, "call_page_ms_median": round(1000 * statistics.median(times[1:]), 1),
        "call_page_ms_first": round(1000 * times[0], 1), "call_page_kb": round(size / 1000, 1),
        "export_hits": args.hits, "export": exports,
    }
    print_report(report, args.json)


if __name__ == "__main__":
    main()
