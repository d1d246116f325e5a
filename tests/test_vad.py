"""Silero VAD on real synthetic speech, and cutting speech regions into chunks."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

import asr_tasks.intake.vad as vad
from asr_tasks.intake.vad import WINDOW, SileroVad, SpeechRegion, cut_chunks, speech_regions

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


def test_frame_levels_are_rms_dbfs_per_frame(tmp_path: Path) -> None:
    path = tmp_path / "tone.pcm"
    t = np.arange(SR) / SR
    tone = np.sin(2 * np.pi * 500 * t) * 0.1 * 32768  # peak -20 dBFS: RMS -23 dBFS
    np.concatenate([tone, np.zeros(SR // 2)]).astype("<i2").tofile(path)
    levels = vad.frame_levels(path)
    assert len(levels) == -(-(SR + SR // 2) // WINDOW)
    np.testing.assert_allclose(levels[2:30], -23.0, atol=0.2)
    assert levels[-5:].max() == pytest.approx(-120.0)  # digital silence, floored


def test_speech_regions_widen_over_a_soft_first_word() -> None:
    """The network enters at frame 40; the level says the word began at frame 30, after a 3-frame gap."""
    probs = np.zeros(200, dtype=np.float32)
    probs[40:80] = 0.9
    levels = np.full(200, -65.0, dtype=np.float32)
    levels[30:35] = -40.0  # "Plea-" that the network scored low
    levels[38:80] = -30.0
    plain = speech_regions(probs, SR, speech_pad_ms=0)
    widened = speech_regions(probs, SR, speech_pad_ms=0, levels=levels)
    assert plain == [SpeechRegion(pytest.approx(40 * FRAME_S), pytest.approx(80 * FRAME_S))]
    assert widened == [SpeechRegion(pytest.approx(30 * FRAME_S), pytest.approx(80 * FRAME_S))]


def test_speech_regions_widen_no_further_than_the_limits() -> None:
    probs = np.zeros(300, dtype=np.float32)
    probs[100:150] = 0.9
    probs[250:260] = 0.9
    levels = np.full(300, -65.0, dtype=np.float32)
    levels[60:150] = -30.0  # sound for 1.3 s before the region: only 0.5 s of it is taken
    levels[150:158] = -65.0  # a 256 ms quiet gap after the region ...
    levels[158:165] = -30.0  # ... stops the widening before this
    levels[245:260] = -30.0
    regions = speech_regions(probs, SR, speech_pad_ms=0, levels=levels)
    reach = int(vad.WIDEN_MS / 1000 / FRAME_S)
    assert regions == [
        SpeechRegion(pytest.approx((100 - reach) * FRAME_S), pytest.approx(150 * FRAME_S)),
        SpeechRegion(pytest.approx(245 * FRAME_S), pytest.approx(260 * FRAME_S)),
    ]


def test_speech_regions_ignore_levels_of_steady_noise() -> None:
    """A noise floor is not sound: widening needs frames well above it."""
    probs = np.zeros(200, dtype=np.float32)
    probs[50:90] = 0.9
    rng = np.random.default_rng(2)
    levels = (-50.0 + rng.uniform(-3, 3, 200)).astype(np.float32)
    levels[50:90] = -20.0
    assert speech_regions(probs, SR, speech_pad_ms=0, levels=levels) == speech_regions(probs, SR, speech_pad_ms=0)


# --- cut_chunks --------------------------------------------------------------------


def check_chunks(
    chunks: list[SpeechRegion], regions: list[SpeechRegion], max_seconds: float, overlap: float = 0.0
) -> None:
    for c in chunks:
        assert c.end - c.start <= max_seconds + 1e-9, c
        assert c.end > c.start
        assert round(c.start, 3) == c.start and round(c.end, 3) == c.end  # millisecond times
    for a, b in zip(chunks, chunks[1:]):
        assert a.start < b.start
        if a.end > b.start:  # only the two pieces of one split run overlap, by at most the overlap
            assert a.end - b.start <= overlap + 1e-6, (a, b)
            assert any(r.start <= b.start and a.end <= r.end for r in regions), (a, b)
    for r in regions:  # all speech stays covered
        covered, reach = 0.0, r.start
        for c in chunks:
            lo, hi = max(reach, c.start), min(r.end, c.end)
            if hi > lo:
                covered, reach = covered + hi - lo, hi
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
    overlap = float(rng.choice([0.0, 0.5, 1.0]))
    t, regions = float(rng.uniform(0, 2)), []
    for _ in range(int(rng.integers(1, 25))):
        length = float(rng.exponential(max_seconds / 2)) + 0.1
        regions.append(SpeechRegion(round(t, 3), round(t + length, 3)))
        t += length + float(rng.exponential(1.0)) + 0.05
    probs = rng.uniform(0.0, 1.0, int(t / FRAME_S) + 10).astype(np.float32)
    chunks = cut_chunks(regions, probs, SR, max_seconds, overlap)
    check_chunks(chunks, regions, max_seconds, overlap)


def test_cut_chunks_overlap_is_shared_around_the_quietest_frame() -> None:
    probs = np.ones(int(50 / FRAME_S), dtype=np.float32)
    dip = int(20.0 / FRAME_S)
    probs[dip] = 0.05
    region = SpeechRegion(1.0, 45.0)
    chunks = cut_chunks([region], probs, SR, max_seconds=30.0, overlap_seconds=0.5)
    assert chunks == [SpeechRegion(1.0, 20.25), SpeechRegion(19.75, 45.0)]
    check_chunks(chunks, [region], 30.0, 0.5)


def test_cut_chunks_overlap_never_pushes_a_piece_over_the_limit() -> None:
    """Without a quieter frame the cut lands where the piece, overlap included, is exactly the limit."""
    probs = np.ones(int(100 / FRAME_S), dtype=np.float32)
    region = SpeechRegion(0.0, 95.0)
    chunks = cut_chunks([region], probs, SR, max_seconds=30.0, overlap_seconds=0.5)
    assert chunks[0].start == 0.0 and chunks[-1].end == 95.0
    assert max(c.end - c.start for c in chunks) <= 30.0
    check_chunks(chunks, [region], 30.0, 0.5)
    assert [round(b.start - a.end, 3) for a, b in zip(chunks, chunks[1:])] == [-0.5] * (len(chunks) - 1)


def test_cut_chunks_rejects_an_overlap_that_leaves_no_progress() -> None:
    with pytest.raises(ValueError, match="overlap_seconds"):
        cut_chunks([SpeechRegion(0.0, 50.0)], np.ones(2000, dtype=np.float32), SR, 10.0, overlap_seconds=5.0)


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
