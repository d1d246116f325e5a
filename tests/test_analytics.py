"""Per-call analytics on synthetic calls whose talk, silence and overlap are known by construction."""

from __future__ import annotations

import subprocess
import wave
from pathlib import Path

import numpy as np
import pytest

from asr_tasks.config import Settings
from asr_tasks.intake.days import recording_for_file
from asr_tasks.models import Segment
from asr_tasks.text.analytics import analyse, gaps, interruptions, intersect, merge, total

RATE = 16000
# (speaker, second it starts at, what is said): the customer cuts in on the agent's second turn.
TURNS = [
    ("agent", 0.5, "thank you for calling harbor bank how can I help you today"),
    ("customer", 5.2, "I would like to check the balance of my savings account"),
    ("agent", 9.8, "of course I can help you with that let me look it up for you now"),
    ("customer", 12.0, "and also the interest rate please"),
    ("agent", 22.0, "the interest rate is three percent per year"),
]


def speak(text: str, voice: str, out: Path) -> np.ndarray:
    subprocess.run(["espeak-ng", "-v", voice, "-s", "160", "-w", str(out), text], check=True, capture_output=True)
    with wave.open(str(out)) as wav:
        audio = np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2").astype(np.float32)
        rate = wav.getframerate()
    return np.interp(np.arange(0, len(audio) * RATE // rate) * rate / RATE, np.arange(len(audio)), audio)


def voiced(audio: np.ndarray, offset: float) -> tuple[float, float]:
    """Where the rendered turn is audible: its first and last sample above the noise floor."""
    loud = np.flatnonzero(np.abs(audio) > 300)
    return offset + loud[0] / RATE, offset + loud[-1] / RATE


@pytest.fixture(scope="module")
def call(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[tuple[float, float]]], float]:
    folder = tmp_path_factory.mktemp("analytics")
    duration = 30.0
    channels = np.zeros((2, int(duration * RATE)), dtype=np.float32)
    truth: dict[str, list[tuple[float, float]]] = {"agent": [], "customer": []}
    for n, (speaker, at, text) in enumerate(TURNS):
        audio = speak(text, "en-us" if speaker == "agent" else "en-gb-x-rp", folder / f"turn{n}.wav")
        lane = 0 if speaker == "agent" else 1
        start = int(at * RATE)
        channels[lane, start : start + len(audio)] += audio
        truth[speaker].append(voiced(audio, at))
    stereo = folder / "call.wav"
    with wave.open(str(stereo), "wb") as wav:
        wav.setnchannels(2)
        wav.setsampwidth(2)
        wav.setframerate(RATE)
        wav.writeframes(np.clip(channels.T, -32768, 32767).astype("<i2").tobytes())
    return stereo, truth, duration


def test_spans_arithmetic() -> None:
    assert merge([(3.0, 4.0), (0.0, 1.0), (0.5, 2.0)]) == [(0.0, 2.0), (3.0, 4.0)]
    assert intersect([(0.0, 2.0), (3.0, 5.0)], [(1.0, 4.0)]) == [(1.0, 2.0), (3.0, 4.0)]
    assert gaps([(1.0, 2.0), (3.0, 4.0)], 6.0) == [(0.0, 1.0), (2.0, 3.0), (4.0, 6.0)]
    assert interruptions([(1.5, 3.0), (5.8, 5.9)], [(0.0, 2.0), (5.0, 6.0)]) == 1  # a 0.1 s "mm" is none
    assert total([(0.0, 1.5), (2.0, 2.5)]) == 2.0


def test_analytics_match_the_constructed_call(call: tuple[Path, dict[str, list[tuple[float, float]]], float],
                                              settings: Settings, tmp_path: Path) -> None:
    from asr_tasks.pipeline.preprocess import preprocess_local

    path, truth, duration = call
    pre, _ = preprocess_local(recording_for_file(path), path, tmp_path, settings.audio)
    words = [Segment("r", 0 if s == "agent" else 1, s, at, at + 3.0, text) for s, at, text in TURNS]
    found = analyse(pre, words, settings.audio.vad_speech_pad_ms / 1000)
    anyone = merge(truth["agent"] + truth["customer"])
    expected = {
        "agent talk": total(truth["agent"]), "customer talk": total(truth["customer"]),
        "talk": total(anyone), "non-talk": duration - total(anyone),
        "longest silence": max(b - a for a, b in gaps(anyone, duration)),
        "overlap": total(intersect(merge(truth["agent"]), merge(truth["customer"]))),
    }
    measured = {
        "agent talk": found.speakers["agent"].talk_seconds, "customer talk": found.speakers["customer"].talk_seconds,
        "talk": found.talk_seconds, "non-talk": found.non_talk_seconds,
        "longest silence": found.longest_silence_seconds, "overlap": found.overlap_seconds,
    }
    errors = {name: round(abs(measured[name] - expected[name]), 3) for name in expected}
    assert max(errors.values()) <= 0.2, errors
    assert found.speakers["customer"].interruptions == 1 and found.speakers["agent"].interruptions == 0
    assert found.turns == 5 and (found.speakers["agent"].turns, found.speakers["customer"].turns) == (3, 2)
    assert found.speakers["agent"].words == sum(len(t.split()) for s, _, t in TURNS if s == "agent")
    assert 150 < found.speakers["agent"].words_per_minute < 300  # espeak-ng at 160 words a minute, pauses included
    assert found.non_talk_share == pytest.approx(found.non_talk_seconds / duration, abs=1e-3)
