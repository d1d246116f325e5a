"""How well personal data is found in two-party calls, with and without context triggering, and what masking costs.

Synthetic calls as a contact centre records them: stereo 8 kHz WAV, the agent
(espeak-ng en-us) on the left channel, the customer (en-gb-x-rp) on the right.
The agent asks for a value and the customer reads it out as people do: digits
one by one in groups with pauses, "oh" and "double" in some phone numbers, a
card sometimes in two goes with 4-5 s between the halves (the agent's "okay" in
the pause, or nothing). A round is eight calls: a card and its security code
(over four rounds, a Luhn-valid card and one that is not, each read in one go
and in two), a phone number (a Chinese mobile, a North American or a UK number,
by round), a bank account (12-18 digits), an e-mail address, a one-time code, a
PRC resident ID; and two calls of the same shape that hold no personal data
(of an order number, an amount, a date, a time and a policy number asked for
and answered, two a round in turn).

Each call goes through the pipeline's preprocessing, engine and post-processing
(ITN); then detection runs twice over the same transcripts: with the configured
policy, and with ``policy.without_context_triggers()`` (patterns alone). A call
counts a true positive for each kind it holds that was found, a false negative
for each that was not, and a false positive for each kind found that it does not
hold (any kind, in a call that holds none). Then the redacted rendition of every
call with a finding (configured policy) is rendered: its cost, and the
masking's, per hour of audio, and how much audio the words' times silence
against the whole segments that held the data.

    .venv/bin/python bench/pii.py [--json] [--quick] [--calls 4]

``--calls`` counts rounds; ``--quick`` runs one.
The JSON's keys: ``calls``, ``audio_s``, ``kinds`` (per kind, configured policy:
``tp``, ``fn``, ``fp``, ``recall``, ``precision``), ``kinds_without_context``
(the same without context triggering), ``by_context`` (detections that context
triggering made, configured policy), ``masking_s_per_audio_hour``,
``redacted_audio_s_per_audio_hour``, ``silenced_s_word_times``,
``silenced_s_whole_segments``, ``misses`` (configured policy: each call whose
kinds found differ from those it holds, with what was said and what was heard,
speaker by speaker).
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
import wave
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from synthetic import parse_args, print_report

from asr_tasks.config import Settings, get_settings
from asr_tasks.intake.audio import probe, silence_spans
from asr_tasks.models import Transcript
from asr_tasks.text.pii import Detection, redact
from asr_tasks.text.pii_policy import Policy, load_policy, luhn, prc_check_character

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from gate_corpus import Item, transcribe_items  # noqa: E402

QUICK = {"calls": 1}
WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
AGENT, CUSTOMER = 0, 1  # the channels: left, right
VOICES = {AGENT: ("en-us", "165"), CUSTOMER: ("en-gb-x-rp", "150")}  # (voice, words per minute)
SPEAKERS = {AGENT: "agent", CUSTOMER: "customer"}
TTS_RATE = 22050  # espeak-ng's own; ffmpeg resamples once, to 8 kHz


@dataclass(frozen=True)
class Turn:
    side: int  # AGENT or CUSTOMER
    text: str
    pause: float = 0.6  # silence after it, before the next turn


@dataclass(frozen=True)
class Call:
    name: str
    turns: tuple[Turn, ...]
    kinds: frozenset[str]  # the kinds of personal data it holds

    @property
    def text(self) -> str:
        return " | ".join(f"{SPEAKERS[t.side]}: {t.text}" for t in self.turns)


def said(number: str, groups: tuple[int, ...] = (), oh: bool = False, double: bool = False) -> str:
    """``number`` read out digit by digit, in groups of the sizes given (the rest one more group) with a comma
    between them; zero said "oh", and two digits alike said "double ..." where asked."""
    cuts, at = [], 0
    for size in groups:
        cuts.append(number[at : at + size])
        at += size
    cuts = [c for c in [*cuts, number[at:]] if c]
    out = []
    for group in cuts:
        words, i = [], 0
        while i < len(group):
            word = group[i] if not group[i].isdigit() else "oh" if oh and group[i] == "0" else WORDS[int(group[i])]
            pair = double and group[i + 1 : i + 2] == group[i] and group[i + 2 : i + 3] != group[i]
            words.append(f"double {word}" if pair else word)
            i += 2 if pair else 1
        out.append(" ".join(words))
    return ", ".join(out)


def luhn_complete(body: str) -> str:
    return body + next(d for d in "0123456789" if luhn(body + d))


def prc_id_complete(body: str) -> str:
    return body + prc_check_character(body)


def asked(question: str, answer: str, kinds: set[str], name: str) -> Call:
    return Call(name, (Turn(AGENT, question), Turn(CUSTOMER, answer)), frozenset(kinds))


def card_call(rng: random.Random, n: int, digits: Callable[[int], str]) -> Call:
    """A card, then its security code: read in two goes or in one, Luhn-valid or not (the four by round)."""
    two_goes, valid = n % 2 == 0, n % 4 in (1, 2)
    number = luhn_complete("4" + digits(14)) if valid else luhn_complete("5" + rng.choice("12345") + digits(13))
    if not valid:
        number = number[:-1] + str((int(number[-1]) + 1) % 10)
    prompt = rng.choice(["Could you read me the long number on the card, please?", "Can I have the card number, please?"])
    reading: tuple[Turn, ...] = (Turn(CUSTOMER, f"Yes, it's {said(number, (4, 4, 4))}."),)
    if two_goes:
        first, pause = f"The first eight are {said(number[:8], (4,))}.", rng.uniform(4.0, 5.0)
        last = Turn(CUSTOMER, f"And the last eight are {said(number[8:], (4,))}.")
        if rng.random() < 0.5:  # the agent's "okay" in the pause (about 0.6 s of it)
            reading = (Turn(CUSTOMER, first, pause / 2 - 0.3), Turn(AGENT, "Okay.", pause / 2 - 0.3), last)
        else:
            reading = (Turn(CUSTOMER, first, pause), last)
    return Call(f"card_{'valid' if valid else 'invalid'}_{'in_two_goes' if two_goes else 'in_one_go'}", (
        Turn(AGENT, prompt), *reading,
        Turn(AGENT, "And the three digit security code on the back?"), Turn(CUSTOMER, f"It's {said(digits(3))}."),
    ), frozenset({"card", "card_security"}))


def phone_call(rng: random.Random, n: int, digits: Callable[[int], str]) -> Call:
    """A Chinese mobile, a North American or a UK number (by round)."""
    prompt = rng.choice(["Can I take a phone number to call you back on?", "What's the best number to reach you on?",
                         "And your mobile number, please?"])
    if n % 3 == 0:
        answer, name = f"Yes, it's {said('1' + rng.choice('3456789') + digits(9), (3, 4))}.", "phone_cn"
    elif n % 3 == 1:
        nanp = rng.choice("23456789") + digits(2) + rng.choice("23456789") + digits(6)
        answer, name = f"Sure, it's {said(nanp, (3, 3), oh=rng.random() < 0.5)}.", "phone_nanp"
    else:
        uk = "07" + rng.choice("3456789") + digits(8)
        answer, name = f"It's {said(uk, (5,), oh=True, double=rng.random() < 0.7)}.", "phone_uk"
    return asked(prompt, answer, {"phone"}, name)


def other_calls(rng: random.Random, digits: Callable[[int], str]) -> list[Call]:
    """The account, e-mail, one-time code and ID calls."""
    account = rng.choice("123456789") + digits(rng.randint(11, 17))
    first, last = rng.choice([("wei", "zhang"), ("li", "na"), ("james", "wong"), ("priya", "shah")])
    domain = rng.choice(["example dot com", "gmail dot com", "outlook dot com", "qq dot com"])
    birth = f"{rng.randint(1960, 2002)}{rng.randint(1, 12):02d}{rng.randint(1, 28):02d}"
    person = prc_id_complete(rng.choice(["110105", "310104", "440305", "510107"]) + birth + digits(3))
    return [
        asked("What is the account number the refund should go to?", f"It's {said(account, (4, 4, 4))}.",
              {"bank_account"}, "bank_account"),
        asked("What's your e-mail address?", f"It's {first} {rng.choice(['dot', 'underscore'])} {last} at {domain}.",
              {"email"}, "email"),
        asked("Please read me the one-time code we just sent you.", f"It's {said(digits(6), (3,))}.",
              {"one_time_code"}, "one_time_code"),
        asked("Could I have your ID number, please?", f"Yes, it's {said(person, (6, 4, 4))}.", {"prc_id"}, "prc_id"),
    ]


def clean_calls(rng: random.Random, n: int, digits: Callable[[int], str]) -> list[Call]:
    """Two of five calls (by round) whose numbers, asked for and answered, are no personal data."""
    hour, minute = rng.randint(1, 11), rng.choice([10, 15, 20, 30, 45])
    month = rng.choice(["January", "March", "May", "July", "September", "November"])
    made = [
        asked("What is the order number?", f"It's {said(digits(rng.randint(7, 8)), (4,))}.", set(), "order_number"),
        asked("How much was the last payment?", f"It was {rng.randint(20, 999)} dollars and {rng.randint(1, 99)} "
              "cents.", set(), "amount"),
        asked("When did you place the order?", f"On {month} {rng.randint(1, 28)}, {rng.randint(2019, 2026)}.",
              set(), "date"),
        asked("What time suits you for the engineer's visit?", f"Any time after {hour}:{minute}, or at "
              f"{hour + 1} o'clock.", set(), "time"),
        asked("What is your policy number?", f"It's {said(digits(rng.randint(8, 10)), (4, 4))}.", set(),
              "policy_number"),
    ]
    return [made[2 * n % 5], made[(2 * n + 1) % 5]]


def calls(rng: random.Random, rounds: int) -> list[Call]:
    """``rounds`` rounds of eight calls: a card with its security code, a phone number, an account, an e-mail
    address, a one-time code, an ID, and two calls without personal data."""
    made: list[Call] = []
    for n in range(rounds):
        def digits(count: int) -> str:
            return "".join(rng.choice("0123456789") for _ in range(count))

        made += [card_call(rng, n, digits), phone_call(rng, n, digits), *other_calls(rng, digits),
                 *clean_calls(rng, n, digits)]
    return made


def speak(text: str, side: int, out: Path) -> np.ndarray:
    voice, rate = VOICES[side]
    subprocess.run(["espeak-ng", "-v", voice, "-s", rate, "-w", str(out), text], check=True, capture_output=True)
    with wave.open(str(out)) as wav:
        if wav.getframerate() != TTS_RATE or wav.getnchannels() != 1:
            raise RuntimeError(f"unexpected espeak-ng output format in {out}")
        return np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2")


def render(call: Call, folder: Path, path: Path) -> Path:
    """The call as a stereo 8 kHz WAV: each turn on its speaker's channel, the other channel silent meanwhile."""
    lead = np.zeros(int(0.3 * TTS_RATE), dtype="<i2")
    sides: list[list[np.ndarray]] = [[lead], [lead]]
    for turn in call.turns:
        speech = speak(turn.text, turn.side, folder / "turn.wav")
        speech = np.concatenate([speech, np.zeros(int(turn.pause * TTS_RATE), dtype="<i2")])
        sides[turn.side].append(speech)
        sides[1 - turn.side].append(np.zeros_like(speech))
    raw = folder / "mix.wav"
    with wave.open(str(raw), "wb") as wav:
        wav.setnchannels(2)
        wav.setsampwidth(2)
        wav.setframerate(TTS_RATE)
        wav.writeframes(np.stack([np.concatenate(sides[0]), np.concatenate(sides[1])], axis=1).tobytes())
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-i", str(raw), "-ar", "8000", "-c:a", "pcm_s16le",
                    str(path)], check=True)
    return path


def scored(said_calls: list[Call], found: list[list[Detection]]) -> dict[str, dict[str, float]]:
    """Per kind: tp, fn, fp (per call), recall and precision."""
    counts: dict[str, Counter[str]] = {}
    for call, detections in zip(said_calls, found):
        got = {d.kind for d in detections}
        for kind in call.kinds | got:
            outcome = "tp" if kind in call.kinds and kind in got else "fn" if kind in call.kinds else "fp"
            counts.setdefault(kind, Counter())[outcome] += 1
    return {kind: {"tp": c["tp"], "fn": c["fn"], "fp": c["fp"],
                   "recall": round(c["tp"] / max(1, c["tp"] + c["fn"]), 3),
                   "precision": round(c["tp"] / max(1, c["tp"] + c["fp"]), 3)}
            for kind, c in sorted(counts.items())}


def heard(transcript: Transcript) -> str:
    return " | ".join(f"{s.speaker}: {s.text}" for s in sorted(transcript.segments, key=lambda s: (s.start, s.channel)))


def costs(paths: list[Path], transcripts: list[Transcript], found: list[list[Detection]], folder: Path,
          settings: Settings, mask_seconds: float) -> dict[str, float]:
    """What masking and the redacted renditions cost per hour of audio, and how much audio they silence."""
    margin = settings.postprocess.pii_audio_margin_seconds
    started = time.perf_counter()
    for path, detections in zip(paths, found):
        if detections:
            silence_spans(path, probe(path, settings.audio), folder / f"{path.stem}.redacted.flac",
                          [(a - margin, b + margin) for d in detections for a, b in d.parts])
    render_seconds = time.perf_counter() - started
    audio_hours = sum(t.duration for t in transcripts) / 3600
    silenced = sum(b - a + 2 * margin for ds in found for d in ds for a, b in d.parts)
    whole_segments = sum(max(s.end for s in hit) - min(s.start for s in hit) + 2 * margin
                         for t, ds in zip(transcripts, found) for d in ds
                         if (hit := [s for s in t.segments if s.channel == d.channel and s.start < d.end
                                     and d.start < s.end]))
    return {
        "masking_s_per_audio_hour": round(mask_seconds / audio_hours, 2),
        "redacted_audio_s_per_audio_hour": round(render_seconds / audio_hours, 1),
        # audio silenced from the words' times, and what silencing the whole segments that held the data would take
        "silenced_s_word_times": round(silenced, 1), "silenced_s_whole_segments": round(whole_segments, 1),
    }


def detect(transcripts: list[Transcript], policy: Policy) -> tuple[list[list[Detection]], float]:
    started = time.perf_counter()
    found = [redact(t, policy)[1] for t in transcripts]
    return found, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--calls", type=int, default=4, help="rounds of eight calls")
    args = parse_args(parser, QUICK)
    settings = get_settings()
    policy = load_policy(settings.postprocess.path("pii_dir"))
    said_calls = calls(random.Random(11), args.calls)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        paths = [render(call, folder, folder / f"{call.name}{n}.wav") for n, call in enumerate(said_calls)]
        items = [Item(path.stem, True, path) for path in paths]
        transcripts = transcribe_items(items, folder, settings.override(redact_pii=False))  # masked below, timed
        found, mask_seconds = detect(transcripts, policy)
        patterns_only, _ = detect(transcripts, policy.without_context_triggers())
        cost = costs(paths, transcripts, found, folder, settings, mask_seconds)
    misses = [{"call": call.name, "said": call.text, "heard": heard(t), "expected": sorted(call.kinds),
               "found": sorted({d.kind for d in ds})}
              for call, ds, t in zip(said_calls, found, transcripts) if {d.kind for d in ds} != call.kinds]
    report = {
        "calls": len(said_calls), "audio_s": round(sum(t.duration for t in transcripts), 1),
        "kinds": scored(said_calls, found), "kinds_without_context": scored(said_calls, patterns_only),
        "by_context": sum(d.by == "context" for ds in found for d in ds),
        **cost, "misses": misses,
    }
    print_report(report, args.json)


if __name__ == "__main__":
    main()
