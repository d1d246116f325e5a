"""Synthetic calls of known text (espeak-ng), word error rate, and the naive file-by-file baseline.

Shared by the benchmarks; nothing here is part of the product.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import re
import subprocess
import time
import wave
from pathlib import Path
from typing import Any

import numpy as np

from asr_tasks.config import Settings

SENTENCES = (
    "thank you for calling harbor bank", "how can I help you today", "I would like to check my balance",
    "please tell me your account number", "my account number is four four seven two",
    "I want to report a lost card", "your card has been blocked", "a new card will arrive in five days",
    "is there anything else I can help you with", "no thank you goodbye", "I am calling about my insurance claim",
    "the adjuster will visit tomorrow morning", "can you confirm your date of birth", "my payment is overdue",
    "we can set up a payment plan", "the interest rate is three percent", "I would like to close my account",
    "please hold while I transfer you", "your appointment is on monday at ten", "the delivery was late again",
    "I need to update my address", "we have received your documents", "the refund will take seven days",
    "thank you for your patience",
)
WORDS_PER_SECOND = 2.6  # espeak-ng at 155 words per minute


@dataclasses.dataclass
class Call:
    path: Path
    text: str
    duration: float


def synthesise(folder: Path, minutes: float, seed: int = 7, count: int | None = None) -> list[Call]:
    """Short calls of known text until ``minutes`` of audio (or ``count`` calls): 2-15 s each, 8 kHz mono."""
    rng = random.Random(seed)
    calls: list[Call] = []
    total = 0.0
    while total < minutes * 60 and (count is None or len(calls) < count):
        target = rng.uniform(2.0, 15.0)
        sentences = [rng.choice(SENTENCES)]
        while len(" ".join(sentences).split()) / WORDS_PER_SECOND < target - 1.0:
            sentences.append(rng.choice(SENTENCES))
        text = ". ".join(sentences) + "."
        raw, out = folder / "speech.wav", folder / f"call{len(calls):03d}.wav"
        voice = rng.choice(["en-us", "en-gb-x-rp"])
        subprocess.run(["espeak-ng", "-v", voice, "-s", "155", "-w", str(raw), text], check=True, capture_output=True)
        subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-i", str(raw),
                        "-af", "adelay=400,apad=pad_dur=0.5", "-ar", "8000", "-ac", "1", str(out)], check=True)
        with wave.open(str(out)) as wav:
            duration = wav.getnframes() / wav.getframerate()
        if duration > 15.0:
            out.unlink()
            continue
        calls.append(Call(out, text, duration))
        total += duration
    return calls


def synthesise_conversation(path: Path, minutes: float, seed: int) -> Call:
    """A long stereo call of known text: agent turns on the left channel, customer turns on the right.

    Turns of one to three sentences alternate with pauses of 0.3-2 s; the file is
    8 kHz 16-bit WAV, like a contact centre's stereo recorder writes.
    """
    rng = random.Random(seed)
    rate = 22050  # espeak-ng's own rate; ffmpeg resamples once at the end
    sides: list[list[np.ndarray]] = [[], []]
    texts: list[str] = []
    total = 0
    raw = path.with_suffix(".turn.wav")
    while total < minutes * 60 * rate:
        text = ". ".join(rng.choice(SENTENCES) for _ in range(rng.randint(1, 3))) + "."
        subprocess.run(["espeak-ng", "-v", "en-us", "-s", "155", "-w", str(raw), text], check=True, capture_output=True)
        with wave.open(str(raw)) as wav:
            turn = np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2")
        turn = np.concatenate([turn, np.zeros(int(rng.uniform(0.3, 2.0) * rate), dtype="<i2")])
        speaker = len(texts) % 2
        sides[speaker].append(turn)
        sides[1 - speaker].append(np.zeros_like(turn))
        texts.append(text)
        total += len(turn)
    raw.unlink()
    stereo = np.stack([np.concatenate(sides[0]), np.concatenate(sides[1])], axis=1)
    pcm = path.with_suffix(".s16")
    pcm.write_bytes(stereo.astype("<i2").tobytes())
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-f", "s16le", "-ar", str(rate), "-ac", "2",
                    "-i", str(pcm), "-ar", "8000", str(path)], check=True)
    pcm.unlink()
    return Call(path, " ".join(texts), total / rate)


def normalise(text: str) -> list[str]:
    """Words for scoring: lower case, numbers as single digits, no punctuation."""
    from text_to_num import alpha2digit

    text = alpha2digit(text.lower().replace("%", " percent"), "en")
    text = re.sub(r"[^a-z0-9' ]+", " ", text.lower())
    return re.sub(r"\d", lambda m: f" {m.group(0)} ", text).split()


def word_errors(reference: list[str], hypothesis: list[str]) -> int:
    row = list(range(len(hypothesis) + 1))
    for i, ref in enumerate(reference, 1):
        diagonal, row[0] = row[0], i
        for j, hyp in enumerate(hypothesis, 1):
            diagonal, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, diagonal + (ref != hyp))
    return row[-1]


def wer(calls: list[Call], texts: list[str]) -> float:
    errors = sum(word_errors(normalise(c.text), normalise(t)) for c, t in zip(calls, texts))
    return errors / sum(len(normalise(c.text)) for c in calls)


class Naive:
    """The seed article's loop: one WhisperModel, ``transcribe`` per file."""

    def __init__(self, settings: Settings) -> None:
        from faster_whisper import WhisperModel

        self.settings = settings
        self.model = WhisperModel(str(settings.asr.path("model_dir")), device=settings.asr.device,
                                  compute_type=settings.asr.compute_type, cpu_threads=settings.asr.cpu_threads,
                                  local_files_only=True)

    def run(self, calls: list[Call]) -> list[str]:
        texts = []
        for call in calls:
            segments, _ = self.model.transcribe(str(call.path), language=self.settings.asr.language,
                                                beam_size=self.settings.asr.beam_size)
            texts.append(" ".join(s.text.strip() for s in segments))
        return texts


def timed(fn: Any, *args: Any) -> tuple[Any, float]:
    started = time.perf_counter()
    result = fn(*args)
    return result, time.perf_counter() - started


def print_report(report: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(report, indent=2))
    else:
        for key, value in report.items():
            print(f"{key:28} {value}")


def parse_args(parser: argparse.ArgumentParser, quick: dict[str, Any]) -> argparse.Namespace:
    """The arguments, with ``--quick``: the same code on the ``quick`` sizes (for the test that runs every
    benchmark); a size given on the command line still wins."""
    parser.add_argument("--quick", action="store_true", help=f"smaller defaults, a check that it runs: {quick}")
    args = parser.parse_args()
    if args.quick:
        parser.set_defaults(**quick)
        args = parser.parse_args()
    return args
