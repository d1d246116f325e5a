"""Silero VAD on real synthetic speech, and cutting speech regions into chunks."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

import asr_tasks.vad as vad
from asr_tasks.vad import WINDOW, SileroVad, SpeechRegion, cut_chunks, speech_regions

SR = 16000
FRAME_S = WINDOW / SR
SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Please call me back tomorrow morning about the invoice.",
]


def espeak_16k(text: str, folder: Path, name: str) -> np.ndarray:
    wav = folder / f"{name}.wav"
    subprocess.run(["espeak-ng", "-w", str(wav), text], check=True, capture_output=True)
    raw = subprocess.run(
        ["ffmpeg", "-nostdin", "-v", "error", "-i", str(wav), "-ac", "1", "-ar", str(SR), "-f", "s16le", "-"],
        check=True, capture_output=True,
    ).stdout
    return np.frombuffer(raw, dtype="<i2")


def audible(pcm: np.ndarray) -> tuple[float, float]:
    """First and last audible sample of a clip, in seconds (espeak pads its output with near-silence)."""
    idx = np.nonzero(np.abs(pcm.astype(np.int32)) > 100)[0]
    return idx[0] / SR, (idx[-1] + 1) / SR


@pytest.fixture(scope="module")
def model() -> SileroVad:
    return SileroVad()


@pytest.fixture(scope="module")
def speech(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[tuple[float, float]]]:
    """1 s silence, sentence, 2 s silence, sentence, 1 s silence; with the true speech bounds."""
    folder = tmp_path_factory.mktemp("vad")
    a, b = (espeak_16k(text, folder, f"s{i}") for i, text in enumerate(SENTENCES))

    def silence(seconds: float) -> np.ndarray:
        return np.zeros(int(seconds * SR), dtype="<i2")

    pcm = np.concatenate([silence(1), a, silence(2), b, silence(1)])
    path = folder / "speech.pcm"
    pcm.tofile(path)
    a0, a1 = audible(a)
    b0, b1 = audible(b)
    b_offset = 1 + len(a) / SR + 2
    return path, [(1 + a0, 1 + a1), (b_offset + b0, b_offset + b1)]


def test_probabilities_one_per_frame(model: SileroVad, speech: tuple[Path, list[tuple[float, float]]]) -> None:
    path, _ = speech
    n = path.stat().st_size // 2
    probs = model.probabilities(path)
    assert probs.dtype == np.float32
    assert len(probs) == -(-n // WINDOW)
    assert probs.min() >= 0.0 and probs.max() <= 1.0


def test_streamed_blocks_equal_one_pass(
    model: SileroVad, speech: tuple[Path, list[tuple[float, float]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _ = speech
    n_frames = -(-(path.stat().st_size // 2) // WINDOW)
    assert vad.FRAMES_PER_BLOCK >= n_frames  # the default reads this file in one block
    whole = model.probabilities(path)
    monkeypatch.setattr(vad, "FRAMES_PER_BLOCK", 7)
    streamed = model.probabilities(path)
    assert streamed.shape == whole.shape
    np.testing.assert_allclose(streamed, whole, atol=1e-5)
    assert whole.max() > 0.9  # a real comparison: the file does contain speech


def test_speech_regions_find_the_two_sentences(
    model: SileroVad, speech: tuple[Path, list[tuple[float, float]]]
) -> None:
    path, truth = speech
    probs = model.probabilities(path)
    regions = speech_regions(probs, SR)
    assert len(regions) == 2, regions
    for found, (start, end) in zip(regions, truth):
        assert found.start == pytest.approx(start, abs=0.4)
        assert found.end == pytest.approx(end, abs=0.4)
    assert regions[0].end < regions[1].start
    assert 0.0 <= regions[0].start and regions[-1].end <= len(probs) * FRAME_S


def test_silence_has_no_regions(model: SileroVad, tmp_path: Path) -> None:
    path = tmp_path / "silence.pcm"
    rng = np.random.default_rng(1)
    (rng.standard_normal(3 * SR) * 3).astype("<i2").tofile(path)  # -80 dBFS hiss
    probs = model.probabilities(path)
    assert len(probs) == -(-3 * SR // WINDOW)
    assert speech_regions(probs, SR) == []


def test_speech_regions_on_synthetic_probabilities() -> None:
    probs = np.zeros(200, dtype=np.float32)
    probs[20:60] = 0.9
    probs[63:65] = 0.2  # a dip shorter than min_silence: same region
    probs[65:80] = 0.9
    probs[150:152] = 0.9  # 64 ms blip: shorter than min_speech, dropped
    regions = speech_regions(probs, SR, speech_pad_ms=0)
    assert regions == [SpeechRegion(pytest.approx(20 * FRAME_S), pytest.approx(80 * FRAME_S))]


# --- cut_chunks --------------------------------------------------------------------


def check_chunks(chunks: list[SpeechRegion], regions: list[SpeechRegion], max_seconds: float) -> None:
    for c in chunks:
        assert c.end - c.start <= max_seconds + 1e-9, c
        assert c.end > c.start
    for a, b in zip(chunks, chunks[1:]):
        assert a.end <= b.start
    for r in regions:  # all speech stays covered
        covered = sum(max(0.0, min(r.end, c.end) - max(r.start, c.start)) for c in chunks)
        assert covered == pytest.approx(r.end - r.start, abs=0.002)


def test_cut_chunks_merges_nearby_regions_up_to_the_limit() -> None:
    regions = [SpeechRegion(0.0, 5.0), SpeechRegion(6.0, 10.0), SpeechRegion(12.0, 29.0), SpeechRegion(29.5, 35.0),
               SpeechRegion(40.0, 45.0)]
    probs = np.ones(int(50 / FRAME_S), dtype=np.float32)
    chunks = cut_chunks(regions, probs, SR, max_seconds=30.0)
    assert chunks == [SpeechRegion(0.0, 29.0), SpeechRegion(29.5, 45.0)]
    check_chunks(chunks, regions, 30.0)


def test_cut_chunks_keeps_far_regions_apart_when_limit_is_small() -> None:
    regions = [SpeechRegion(1.0, 2.0), SpeechRegion(3.0, 4.0), SpeechRegion(10.0, 11.0)]
    chunks = cut_chunks(regions, np.ones(400, dtype=np.float32), SR, max_seconds=3.0)
    assert chunks == [SpeechRegion(1.0, 4.0), SpeechRegion(10.0, 11.0)]


def test_cut_chunks_splits_long_region_at_quietest_frame() -> None:
    probs = np.ones(int(50 / FRAME_S), dtype=np.float32)
    dip = int(20.0 / FRAME_S)  # frame 625 starts at exactly 20.0 s
    probs[dip] = 0.05
    probs[dip + 1] = 0.3
    region = SpeechRegion(0.0, 50.0)
    chunks = cut_chunks([region], probs, SR, max_seconds=30.0)
    assert chunks[0] == SpeechRegion(0.0, round(dip * FRAME_S, 3))
    assert chunks[0].end != 30.0  # not at the hard limit
    check_chunks(chunks, [region], 30.0)


def test_cut_chunks_ignores_dips_outside_the_allowed_span() -> None:
    """The cut lies in the second half of the allowed span, so chunks never get tiny."""
    probs = np.ones(int(50 / FRAME_S), dtype=np.float32)
    probs[int(3.0 / FRAME_S)] = 0.0  # too early
    probs[int(40.0 / FRAME_S)] = 0.0  # too late
    probs[int(22.0 / FRAME_S)] = 0.4
    chunks = cut_chunks([SpeechRegion(0.0, 50.0)], probs, SR, max_seconds=30.0)
    assert chunks[0].end == pytest.approx(22.0, abs=FRAME_S)
    check_chunks(chunks, [SpeechRegion(0.0, 50.0)], 30.0)


def test_cut_chunks_very_long_region() -> None:
    rng = np.random.default_rng(3)
    probs = rng.uniform(0.5, 1.0, int(200 / FRAME_S)).astype(np.float32)
    region = SpeechRegion(2.0, 190.0)
    chunks = cut_chunks([region], probs, SR, max_seconds=30.0)
    check_chunks(chunks, [region], 30.0)
    assert chunks[0].start == 2.0 and chunks[-1].end == 190.0
    assert len(chunks) >= 7


@pytest.mark.parametrize("seed", range(20))
def test_cut_chunks_properties_random(seed: int) -> None:
    rng = np.random.default_rng(seed)
    max_seconds = float(rng.choice([5.0, 10.0, 30.0]))
    t, regions = float(rng.uniform(0, 2)), []
    for _ in range(int(rng.integers(1, 25))):
        length = float(rng.exponential(max_seconds / 2)) + 0.1
        regions.append(SpeechRegion(round(t, 3), round(t + length, 3)))
        t += length + float(rng.exponential(1.0)) + 0.05
    probs = rng.uniform(0.0, 1.0, int(t / FRAME_S) + 10).astype(np.float32)
    chunks = cut_chunks(regions, probs, SR, max_seconds)
    check_chunks(chunks, regions, max_seconds)


def test_cut_chunks_on_real_vad_output(model: SileroVad, speech: tuple[Path, list[tuple[float, float]]]) -> None:
    path, _ = speech
    probs = model.probabilities(path)
    regions = speech_regions(probs, SR)
    assert cut_chunks(regions, probs, SR, max_seconds=30.0) == [
        SpeechRegion(round(regions[0].start, 3), round(regions[-1].end, 3))
    ]
    small = cut_chunks(regions, probs, SR, max_seconds=2.0)
    check_chunks(small, regions, 2.0)
    assert len(small) >= 4
