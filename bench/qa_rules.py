"""How well the default QA rule set finds what a QA reviewer would, on the labelled set (``tests/qa_labelled.py``).

Twice: on the text-level transcripts (English and Chinese: the rules' logic), and
on the English calls (those without analytics of their own) spoken by espeak-ng
as stereo 8 kHz calls (agent left, customer right) and transcribed by the
configured model (the rules on the words as the recogniser wrote them). A call counts once per rule: a true positive
where a rule it is labelled with fired, a false negative where it did not, a
false positive where a rule it is not labelled with fired.

    .venv/bin/python bench/qa_rules.py [--json] [--quick]

``--quick`` speaks two of the calls (``--spoken-calls``, default all). The JSON's
keys: ``text`` and ``spoken`` (each ``calls``, ``rules``: per rule and ``overall`` ``tp``, ``fp``, ``fn``,
``precision``, ``recall``; ``misses``: each call whose rules differ, with what
was said or heard), ``rule_set`` (the set's identity), ``audio_s``, and
``audit_s_per_call_hour``: the seconds the whole set takes over one call an hour
long (every labelled turn, again and again, four seconds apart).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from pii import AGENT, CUSTOMER, Call, Turn, render
from synthetic import parse_args, print_report

from asr_tasks.audit.rules import load_rule_set
from asr_tasks.config import get_settings
from asr_tasks.models import Transcript
from asr_tasks.text.pii_policy import load_policy

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from gate_corpus import Item, transcribe_items  # noqa: E402
from qa_labelled import CALLS, Labelled, fired, scores, transcript_of  # noqa: E402

QUICK = {"spoken_calls": 2}


def figures(calls: list[Labelled], transcripts: list[Transcript], rules: list[Any], policy: Any) -> dict[str, Any]:
    found = fired(transcripts, rules, policy)
    misses = [{"call": call.name, "text": " | ".join(s.text for s in t.segments), "expected": sorted(call.fires),
               "fired": sorted(got)} for call, t, got in zip(calls, transcripts, found) if got != set(call.fires)]
    return {"calls": len(calls), "rules": scores(calls, found, rules), "misses": misses}


def hour_long(rules: list[Any], policy: Any) -> float:
    """Seconds to audit one call of an hour: the labelled turns one after another, four seconds apart."""
    turns = [turn for call in CALLS for turn in call.turns]
    long = Labelled("hour", tuple(turns[n % len(turns)] for n in range(900)), frozenset())
    transcript = transcript_of(long)
    start = time.perf_counter()
    fired([replace(transcript)], rules, policy)
    return round(time.perf_counter() - start, 2)


def spoken(calls: list[Labelled], folder: Path, settings: Any) -> list[Transcript]:
    """The calls rendered (each turn on its speaker's channel) and transcribed, on the labelled calls' names."""
    sides = {"agent": AGENT, "customer": CUSTOMER}
    paths = [render(Call(c.name, tuple(Turn(sides[who], text) for who, text in c.turns), frozenset()), folder,
                    folder / f"{c.name}.wav") for c in calls]
    heard = transcribe_items([Item(p.stem, True, p) for p in paths], folder, settings)
    out = []
    for call, t in zip(calls, heard):
        label = transcript_of(call)  # the labelled call's recording: its id and key
        out.append(Transcript(recording=label.recording, duration=t.duration, segments=[
            type(s)(**{**s.to_dict(), "recording_id": label.recording.recording_id, "words": []})
            for s in t.segments], language=t.language, model=t.model, pipeline_version=t.pipeline_version,
            analytics=t.analytics))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--spoken-calls", type=int, default=None,
                        help="how many of the English calls to speak and transcribe (default: all)")
    args = parse_args(parser, QUICK)
    settings = get_settings()
    rule_set = load_rule_set(settings.audit.path("qa_rules_dir"))
    rules, policy = list(rule_set.rules), load_policy(settings.postprocess.path("pii_dir"))
    report: dict[str, Any] = {"rule_set": rule_set.identity,
                              "text": figures(CALLS, [transcript_of(c) for c in CALLS], rules, policy),
                              "audit_s_per_call_hour": hour_long(rules, policy)}
    english = [c for c in CALLS if c.spoken][:args.spoken_calls]
    with tempfile.TemporaryDirectory() as tmp:
        heard = spoken(english, Path(tmp), settings.override(redact_pii=False))
    report["audio_s"] = round(sum(t.duration for t in heard), 1)
    report["spoken"] = figures(english, heard, rules, policy)
    print_report(report, args.json)


if __name__ == "__main__":
    main()
