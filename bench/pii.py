"""How well personal data is found in speech, and what masking it costs.

Synthetic calls (espeak-ng English, 8 kHz) read out card numbers (Luhn-valid and
not), card security codes, Chinese mobile numbers, bank account numbers and
e-mail addresses, each in a sentence of its kind's context, and numbers that are
none of them (order numbers, amounts, dates, times, policy numbers). Each call
goes through the pipeline's preprocessing, engine, post-processing (ITN) and
masking; a call counts a true positive for each kind it holds that was found,
a false negative for each that was not, and a false positive for each kind found
that it does not hold. Then the redacted rendition of every call with a finding
is rendered: its cost, and the masking's, per hour of audio, and how much audio the
words' times silence against the whole segments that held the data.

    .venv/bin/python bench/pii.py [--json] [--quick] [--calls 4]

``--calls`` counts rounds of the eight kinds of call; ``--quick`` runs one. The
JSON's keys: ``calls``, ``audio_s``, ``kinds`` (per kind: ``tp``, ``fn``, ``fp``,
``recall``, ``precision``), ``masking_s_per_audio_hour``,
``redacted_audio_s_per_audio_hour``, ``silenced_s_word_times``,
``silenced_s_whole_segments``, ``misses``.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from synthetic import parse_args, print_report

from asr_tasks.config import get_settings
from asr_tasks.intake.audio import probe, silence_spans
from asr_tasks.text.pii import load_policy, redact

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from gate_corpus import Item, transcribe_items  # noqa: E402

QUICK = {"calls": 1}
WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]


def spoken(number: str) -> str:
    return " ".join(WORDS[int(d)] for d in number)


def luhn_complete(body: str) -> str:
    for check in "0123456789":
        digits = [int(d) for d in body + check]
        total = sum(digits[-1::-2]) + sum(sum(divmod(2 * d, 10)) for d in digits[-2::-2])
        if total % 10 == 0:
            return body + check
    raise AssertionError("unreachable")


def calls(rng: random.Random, count: int) -> list[tuple[str, set[str]]]:
    """(what is said, the kinds it holds) per call."""
    made: list[tuple[str, set[str]]] = []
    for n in range(count):
        card = luhn_complete("4" + "".join(rng.choice("0123456789") for _ in range(14)))
        bad_card = "5" + "".join(rng.choice("0123456789") for _ in range(15))
        mobile = "13" + "".join(rng.choice("0123456789") for _ in range(9))
        account = "6222" + "".join(rng.choice("0123456789") for _ in range(12))
        cvv = "".join(rng.choice("0123456789") for _ in range(3))
        order = "".join(rng.choice("0123456789") for _ in range(8))
        made += [
            (f"Thank you. Your card number is {spoken(card)}. Is that right?", {"card"}),
            (f"My credit card number is {spoken(bad_card)}.", {"card"}),
            (f"The card number is {spoken(card)} and the security code is {spoken(cvv)}.", {"card", "card_security"}),
            (f"You can call me back on {spoken(mobile)} any time.", {"phone"}),
            (f"Please send it to my account, the account number is {spoken(account)}.", {"bank_account"}),
            ("My e-mail is wei dot zhang at example dot com.", {"email"}),
            (f"Your order number is {spoken(order)} and it costs {rng.randint(100, 9999)} dollars.", set()),
            (f"The policy number is {spoken(str(rng.randint(1000, 9999)))}, renewed on March {n + 3}.", set()),
        ]
    return made[: count * 8]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--calls", type=int, default=4, help="rounds of the eight kinds of call")
    args = parse_args(parser, QUICK)
    settings = get_settings()
    policy = load_policy(settings.postprocess.path("pii_dir"))
    said = calls(random.Random(11), args.calls)
    counts: dict[str, Counter[str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for n, (text, _) in enumerate(said):
            raw, path = Path(tmp) / f"raw{n}.wav", Path(tmp) / f"call{n}.wav"
            subprocess.run(["espeak-ng", "-v", "en-us", "-s", "150", "-w", str(raw), text], check=True,
                           capture_output=True)
            subprocess.run(["ffmpeg", "-v", "error", "-i", str(raw), "-ar", "8000", "-ac", "1", str(path)], check=True)
            paths.append(path)
        items = [Item(path.stem, True, path) for path in paths]
        transcripts = transcribe_items(items, Path(tmp), settings.override(redact_pii=False))  # masked below, timed
        started = time.perf_counter()
        found = [redact(t, policy)[1] for t in transcripts]
        mask_seconds = time.perf_counter() - started
        started = time.perf_counter()
        for path, detections in zip(paths, found):
            if detections:
                margin = settings.postprocess.pii_audio_margin_seconds
                silence_spans(path, probe(path, settings.audio), Path(tmp) / f"{path.stem}.redacted.flac",
                              [(d.start - margin, d.end + margin) for d in detections])
        render_seconds = time.perf_counter() - started
    audio_hours = sum(t.duration for t in transcripts) / 3600
    margin = settings.postprocess.pii_audio_margin_seconds
    silenced = sum(d.end - d.start + 2 * margin for ds in found for d in ds)
    whole_segments = sum(max(s.end for s in hit) - min(s.start for s in hit) + 2 * margin
                         for t, ds in zip(transcripts, found) for d in ds
                         if (hit := [s for s in t.segments if s.channel == d.channel and s.start < d.end
                                     and d.start < s.end]))
    misses = []
    for (text, kinds), detections, t in zip(said, found, transcripts):
        got = {d.kind for d in detections}
        for kind in kinds | got:
            entry = counts.setdefault(kind, Counter())
            entry["tp" if kind in kinds and kind in got else "fn" if kind in kinds else "fp"] += 1
        if got != kinds:
            misses.append({"said": text, "heard": " ".join(s.text for s in t.segments), "expected": sorted(kinds),
                           "found": sorted(got)})
    report = {
        "calls": len(said), "audio_s": round(audio_hours * 3600, 1),
        "kinds": {kind: {**c, "recall": round(c["tp"] / max(1, c["tp"] + c["fn"]), 3),
                         "precision": round(c["tp"] / max(1, c["tp"] + c["fp"]), 3)}
                  for kind, c in sorted(counts.items())},
        "masking_s_per_audio_hour": round(mask_seconds / audio_hours, 2),
        "redacted_audio_s_per_audio_hour": round(render_seconds / audio_hours, 1),
        # audio silenced from the words' times, and what silencing the whole segments that held the data would take
        "silenced_s_word_times": round(silenced, 1), "silenced_s_whole_segments": round(whole_segments, 1),
        "misses": misses,
    }
    print_report(report, args.json)


if __name__ == "__main__":
    main()
