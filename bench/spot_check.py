"""``asr transcribe`` on a dozen short calls against the bare engine on the same files, each a whole process.

The bare engine is faster-whisper's ``transcribe`` file by file in one process
(model load included); the spot check is the ``asr transcribe`` command
(preprocessing, VAD, packed decoding, post-processing). Both run ``--rounds``
times, alternating, on the same synthetic calls (espeak-ng English, 8 kHz); the
report gives each one's median wall time, their ratio and both word error rates.

    .venv/bin/python bench/spot_check.py [--calls 12] [--rounds 3] [--quick] [--json]

``--quick`` runs both once on two calls. The JSON's keys: ``calls``, ``audio_s``,
``engine``, ``rounds``, ``bare_engine_wall_s``, ``spot_check_wall_s``,
``spot_check_over_bare``, ``bare_runs_s``, ``spot_check_runs_s``, ``wer_bare``,
``wer_spot_check``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from synthetic import Call, parse_args, print_report, synthesise, wer

from asr_tasks.config import PROJECT_ROOT, get_settings

QUICK = {"calls": 2, "rounds": 1}
BIN = Path(sys.executable).parent
BARE = """
import json, sys
sys.path.insert(0, {bench!r})
from synthetic import Call, Naive
from asr_tasks.config import get_settings
paths = json.loads(sys.argv[1])
calls = [Call(__import__("pathlib").Path(p), "", 0.0) for p in paths]
print(json.dumps(Naive(get_settings()).run(calls)))
"""


def run(cmd: list[str]) -> tuple[float, str]:
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"}, cwd=PROJECT_ROOT)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[0]} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return elapsed, proc.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parse_args(parser, QUICK)

    with tempfile.TemporaryDirectory() as tmp:
        calls: list[Call] = synthesise(Path(tmp), minutes=1e9, count=args.calls)
        paths = [str(c.path) for c in calls]
        bare_s, spot_s = [], []
        for _ in range(args.rounds):
            seconds, out = run([sys.executable, "-c", BARE.format(bench=str(Path(__file__).parent)), json.dumps(paths)])
            bare_s.append(seconds)
            bare_texts = json.loads(out)
            seconds, out = run([str(BIN / "asr"), "transcribe", *paths, "--json"])
            spot_s.append(seconds)
            spot_texts = [" ".join(s["text"] for s in r["segments"]) for r in json.loads(out)]
    settings = get_settings()
    report = {
        "calls": len(calls),
        "audio_s": round(sum(c.duration for c in calls), 1),
        "engine": f"{settings.asr.engine} {settings.asr.model_family} {settings.asr.compute_type} on {settings.asr.device}, "
                  f"beam {settings.asr.beam_size}",
        "rounds": args.rounds,
        "bare_engine_wall_s": round(statistics.median(bare_s), 2),
        "spot_check_wall_s": round(statistics.median(spot_s), 2),
        "spot_check_over_bare": round(statistics.median(spot_s) / statistics.median(bare_s), 3),
        "bare_runs_s": [round(s, 2) for s in bare_s],
        "spot_check_runs_s": [round(s, 2) for s in spot_s],
        "wer_bare": round(wer(calls, bare_texts), 4),
        "wer_spot_check": round(wer(calls, spot_texts), 4),
    }
    print_report(report, args.json)


if __name__ == "__main__":
    main()
