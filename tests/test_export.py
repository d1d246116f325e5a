"""A search's whole result streams out page by page: 100,000 hits in bounded memory, as the CLI writes them too."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

from asr_tasks.config import Settings
from asr_tasks.index.export import export
from asr_tasks.index.query import Filters
from asr_tasks.index.sqlite import SqliteIndex
from asr_tasks.models import Recording, Segment, Transcript, recording_id_for

TEXT = "the balance of the savings account was checked and confirmed again " * 3


def fill(index: SqliteIndex, recordings: int, per_recording: int) -> None:
    for n in range(recordings):
        key = f"calls/2026/11/27/call_{n:05d}.wav"
        rec = Recording(recording_id_for("recordings", key, "e"), "recordings", key, "e", 1, f"call_{n:05d}",
                        "2026-11-27", agent_id=f"AG-{n % 7}")
        segments = [Segment(rec.recording_id, k % 2, ("agent", "customer")[k % 2], 2.0 * k, 2.0 * k + 1.5,
                            f"{TEXT}{k}") for k in range(per_recording)]
        index.replace_recording(Transcript(rec, 2.0 * per_recording, segments, "en", "m", "1", quality="pass"))


def test_100000_hits_stream_out_in_bounded_memory(tmp_path: Path) -> None:
    index = SqliteIndex(tmp_path / "index.sqlite")
    fill(index, 500, 200)
    tracemalloc.start()
    try:
        rows = written = 0
        for piece in export(index, "balance", Filters(), "csv"):
            rows += piece.count("\n")
            written += len(piece.encode())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert rows == 100_001  # the header and every hit, once
    assert written > 20_000_000 and peak < 8_000_000, (written, peak)  # a page at a time, not the whole result


def test_asr_search_exports_every_page_to_a_file(settings: Settings, tmp_path: Path) -> None:
    path = settings.index.path("index_path")
    fill(SqliteIndex(path), 3, 300)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASR_")}
    env.update({"ASR_INDEX_PATH": str(path), "ASR_LEDGER_URL": settings.ledger.ledger_url})
    asr = str(Path(sys.executable).parent / "asr")
    for name in ("hits.csv", "hits.json"):
        proc = subprocess.run([asr, "search", "balance", "--agent", "AG-1", "--export", str(tmp_path / name)],
                              env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
    with (tmp_path / "hits.csv").open(encoding="utf-8") as fh:
        assert sum(1 for _ in csv.DictReader(fh)) == 300  # AG-1's call: every page, not the first 20
    hits = json.loads((tmp_path / "hits.json").read_text(encoding="utf-8"))
    assert len(hits) == 300 and {h["agent_id"] for h in hits} == {"AG-1"}
    bad = subprocess.run([asr, "search", "balance", "--export", str(tmp_path / "hits.xlsx")], env=env,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and ".csv or .json" in bad.stderr
