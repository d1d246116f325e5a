"""Loudness measured and applied in process, against ffmpeg's own EBU R128 filters on real speech."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from asr_tasks.config import AudioSettings
from asr_tasks.intake import loudness
from asr_tasks.intake.audio import decode, pcm_blocks, probe
from asr_tasks.intake.demo_corpus import JFK

SR = 16000
DATA = Path(__file__).resolve().parent / "data"  # the repository's own copies: a clone has them
SPEECH = [JFK, DATA / "stereo_diarization.wav", DATA / "zh" / "funasr_long.wav", DATA / "zh" / "funasr_mid.wav",
          DATA / "zh" / "wenet_aishell-BAC009S0724W0121.wav"]
SETTINGS = AudioSettings(loudness_normalize=True)


def pcm16k(source: Path, out: Path, gain_db: float = 0.0) -> Path:
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-i", str(source), "-af", f"volume={gain_db}dB",
                    "-ar", str(SR), "-ac", "1", "-f", "s16le", str(out)], check=True)
    return out


def ffmpeg_integrated(pcm: Path) -> float:
    """ffmpeg's ebur128 filter's integrated loudness of a 16 kHz PCM file."""
    log = subprocess.run(["ffmpeg", "-nostdin", "-hide_banner", "-f", "s16le", "-ar", str(SR), "-ac", "1",
                          "-i", str(pcm), "-af", "ebur128=peak=sample", "-f", "null", "-"],
                         capture_output=True, text=True, check=True).stderr
    return float(re.findall(r"^\s+I:\s+(-?[\d.]+) LUFS", log, re.M)[-1])


@pytest.fixture(scope="module", params=SPEECH, ids=lambda p: p.name)
def speech(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return pcm16k(request.param, tmp_path_factory.mktemp("speech") / "speech.pcm")


def test_integrated_loudness_is_ffmpegs_within_a_tenth(speech: Path) -> None:
    """The gates and the K-weighting at 16 kHz measure what ffmpeg's ebur128 filter measures (it prints
    tenths of a LU), English and Mandarin, telephone and studio."""
    assert loudness.measure(pcm_blocks(speech), SR).integrated == pytest.approx(ffmpeg_integrated(speech), abs=0.11)


def test_measured_in_blocks_as_in_one(speech: Path) -> None:
    """Blocks that do not end on a 100 ms boundary carry the filter's state and the partial block over."""
    whole = np.fromfile(speech, dtype="<i2")
    odd = [whole[i : i + 12345] for i in range(0, len(whole), 12345)]
    assert loudness.measure(odd, SR).integrated == pytest.approx(loudness.measure([whole], SR).integrated, abs=1e-9)


def test_a_reference_tone_measures_as_the_standard_says() -> None:
    """EBU R128: a 1 kHz sine at -20 dBFS peak in one channel measures -23 LUFS (at 16 kHz as at 48 kHz)."""
    t = np.arange(10 * SR) / SR
    tone = (np.sin(2 * np.pi * 1000 * t) * 0.1 * 32768).astype("<i2")
    measured = loudness.measure([tone], SR)
    assert measured.integrated == pytest.approx(-23.0, abs=0.1)
    assert measured.peak == pytest.approx(-20.0, abs=0.1)


def test_normalised_speech_is_loudnorms_linear_gain(tmp_path: Path) -> None:
    """The audio the pipeline decodes is what ffmpeg's loudnorm makes in linear mode from the same measurement
    (one gain, no true-peak stage needed when the peaks fit): the same samples within a rounding step or two,
    at the target loudness, from a quiet and from a loud copy of the same call."""
    for gain in (-18.0, 0.0):
        src = tmp_path / f"call{gain}.wav"
        subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-i", str(DATA / "zh" / "funasr_long.wav"),
                        "-af", f"volume={gain}dB", "-c:a", "pcm_s16le", str(src)], check=True)
        ours = np.fromfile(decode(src, probe(src, SETTINGS), tmp_path / f"ours{gain}", SETTINGS)[-1], dtype="<i2")
        raw = pcm16k(src, tmp_path / f"raw{gain}.pcm")
        measured = loudness.measure(pcm_blocks(raw), SR)
        reference = tmp_path / f"loudnorm{gain}.pcm"
        log = subprocess.run(
            ["ffmpeg", "-nostdin", "-hide_banner", "-y", "-f", "s16le", "-ar", str(SR), "-ac", "1", "-i", str(raw),
             "-af", f"loudnorm=I=-23:TP=-2:LRA=50:measured_I={measured.integrated}:measured_TP={measured.peak}"
                    ":measured_LRA=5:measured_thresh=-40:linear=true:print_format=json,aresample=16000",
             "-f", "s16le", "-acodec", "pcm_s16le", str(reference)],
            capture_output=True, text=True, check=True).stderr
        assert json.loads(log[log.rindex("{"):])["normalization_type"] == "linear"
        theirs = np.fromfile(reference, dtype="<i2")
        n = min(len(ours), len(theirs))
        assert abs(len(ours) - len(theirs)) <= SR // 100
        diff = np.abs(ours[:n].astype(np.int32) - theirs[:n].astype(np.int32))
        assert np.percentile(diff, 99.9) <= 2
        assert loudness.measure([ours], SR).integrated == pytest.approx(-23.0, abs=0.2)


def test_peaks_the_gain_would_clip_are_bent_under_the_ceiling() -> None:
    """A quiet call with loud clicks: the gain brings the speech to the target, the clicks stay under the
    ceiling, and what lies well under the ceiling is the plain gain."""
    t = np.arange(20 * SR) / SR
    speech = np.sin(2 * np.pi * 300 * t) * 0.02
    speech[::SR] = 0.5  # one click a second: a few samples, little of the loudness
    pcm = (speech * 32768).astype("<i2")
    measured = loudness.measure([pcm], SR)
    gain = loudness.gain_db(measured, -23.0)
    assert gain > 10
    [out] = loudness.apply([pcm], gain, -2.0)
    assert np.abs(out.astype(np.int32)).max() <= 10 ** (-2 / 20) * 32768
    quiet = np.abs(pcm.astype(np.int32)) < 1000
    expected = pcm[quiet] * 10 ** (gain / 20)
    assert np.abs(out[quiet] - expected).max() <= 1.0
    assert loudness.measure([out], SR).integrated == pytest.approx(-23.0, abs=1.0)


def test_peaks_the_gain_keeps_under_the_ceiling_are_not_bent() -> None:
    """Speech whose loudest peak lands 1.5 dB under the ceiling comes out as the plain gain, peaks included: the
    limiter touches only what would reach the ceiling's last decibel."""
    t = np.arange(10 * SR) / SR
    envelope = 0.5 + 0.5 * np.sin(2 * np.pi * 0.7 * t) ** 2  # syllables rise and fall
    pcm = (np.sin(2 * np.pi * 220 * t) * envelope * 0.3 * 32768).astype("<i2")
    peak_db = 20 * np.log10(np.abs(pcm.astype(np.int32)).max() / 32768)
    gain = -2.0 - 1.5 - peak_db  # the gain that puts the peak 1.5 dB under a -2 dBFS ceiling
    [out] = loudness.apply([pcm], gain, -2.0)
    assert np.abs(out - pcm * 10 ** (gain / 20)).max() <= 0.5 + 1e-9


def test_silence_and_a_blip_have_no_loudness_to_correct() -> None:
    """Nothing above the absolute gate, or less than one 400 ms block: no gain."""
    assert loudness.gain_db(loudness.measure([np.zeros(SR * 5, dtype="<i2")], SR), -23.0) == 0.0
    blip = (np.sin(np.arange(SR // 5) / 3) * 8000).astype("<i2")
    assert loudness.gain_db(loudness.measure([blip], SR), -23.0) == 0.0
