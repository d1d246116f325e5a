"""How often each expectation of the quality gate flags clean speech, and how often it catches what it should.

A labelled set is made here (``tests/gate_corpus.py``, which the tests calibrate the gate on): clean speech (espeak-ng sentences, 2-4 s alone and
5-15 s joined, 8 kHz in the codecs call recorders write: PCM, G.711 mu-law and
A-law, G.726, GSM, MP3, Opus; at -30, -20 and -10 dBFS) and what must not pass
as speech (digital silence, line hiss, tones, dual tones, music-like noise,
speech played backwards). Each file goes through the pipeline's preprocessing
and engine like a day's recordings; the transcripts then go through the gate
one expectation at a time. Transcripts with planted faults (repetition loops,
text where nothing was said) test what the audio cannot.

For every expectation: ``false_flags`` (clean files it flags, and their share)
and ``catches`` (bad files it flags); overall, the share of clean files flagged
by any expectation and of bad files that pass them all (``missed``). For every
threshold (``thresholds``): the passing clean file nearest to it and the caught
bad file nearest to it, each with its value and margin, so a change that moves a
file to the edge is seen before it flips a test on another CPU.

JSON keys: ``clean``, ``bad``, ``clean_flagged``, ``bad_missed``, ``missed``,
``expectations``, ``thresholds``.

    .venv/bin/python bench/quality_gate.py [--json] [--sentences 12] [--quick]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

from synthetic import SENTENCES, parse_args, print_report

from asr_tasks.config import get_settings

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from gate_corpus import labelled_set, outcomes, threshold_margins, transcribe_items  # noqa: E402

QUICK = {"sentences": 1}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--sentences", type=int, default=12, help="sentences spoken (each in 3 levels)")
    args = parse_args(parser, QUICK)
    with tempfile.TemporaryDirectory() as tmp:
        items = labelled_set(Path(tmp), [SENTENCES[n % len(SENTENCES)] for n in range(args.sentences)])
        transcripts = transcribe_items(items, Path(tmp), get_settings())
    results = outcomes(items, transcripts, get_settings())
    thresholds = threshold_margins(items, transcripts, get_settings())
    labels = [(name, clean) for name, clean, _ in results]
    flagged = [names for _, _, names in results]
    clean_total = sum(1 for _, clean in labels if clean)
    bad_total = len(labels) - clean_total
    per: dict[str, dict[str, Any]] = defaultdict(lambda: {"false_flags": 0, "catches": 0, "examples": []})
    for (name, clean), names in zip(labels, flagged):
        for expectation in set(names):
            entry = per[expectation]
            entry["false_flags" if clean else "catches"] += 1
            if clean and len(entry["examples"]) < 3:
                entry["examples"].append(name)
    for entry in per.values():
        entry["false_flag_rate"] = round(entry["false_flags"] / clean_total, 3)
        entry["catch_rate"] = round(entry["catches"] / bad_total, 3)
    report = {
        "clean": clean_total, "bad": bad_total,
        "clean_flagged": round(sum(1 for (_, c), f in zip(labels, flagged) if c and f) / clean_total, 3),
        "bad_missed": round(sum(1 for (_, c), f in zip(labels, flagged) if not c and not f) / bad_total, 3),
        "missed": [name for (name, c), f in zip(labels, flagged) if not c and not f],
        "expectations": dict(sorted(per.items())),
        "thresholds": thresholds,
    }
    print_report(report, args.json)


if __name__ == "__main__":
    main()
