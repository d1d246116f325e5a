"""Probing and decoding with real ffmpeg/ffprobe on files made at test time."""

from __future__ import annotations

import dataclasses
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

from asr_tasks.config import AudioSettings
from asr_tasks.intake import loudness
from asr_tasks.intake.audio import (
    AudioInfo,
    InvalidAudio,
    decode,
    pcm_blocks,
    pcm_duration,
    probe,
    read_pcm,
)

DATA = Path(__file__).parent / "data"
SR = 16000
RAW = AudioSettings(loudness_normalize=False)
NORMALISED = AudioSettings(loudness_normalize=True)


def ffmpeg(*args: str) -> None:
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", *args], check=True)


def samples(path: Path) -> np.ndarray:
    return np.fromfile(path, dtype="<i2")


def source_peak(path: Path) -> int:
    """Peak sample of any channel of a file, as s16."""
    raw = subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-i", str(path), "-f", "s16le", "-"],
                         check=True, capture_output=True).stdout
    return int(np.abs(np.frombuffer(raw, dtype="<i2").astype(np.int32)).max())


def dominant_hz(pcm: np.ndarray, sample_rate: int = SR) -> float:
    spectrum = np.abs(np.fft.rfft(pcm.astype(np.float64)))
    return float(np.fft.rfftfreq(len(pcm), 1 / sample_rate)[int(np.argmax(spectrum))])


@pytest.fixture(scope="module")
def media(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every test file made once: ffmpeg runs are the slow part."""
    d = tmp_path_factory.mktemp("media")
    m = {name: d / name for name in [
        "two_tones.wav", "identical.wav", "one_side.wav", "aac_in_mp4.wav", "image.png", "video.mp4", "long.mp3",
    ]}
    # 8 kHz stereo: 440 Hz on the left, 1000 Hz on the right
    ffmpeg("-f", "lavfi", "-i", "sine=f=440:d=3:r=8000", "-f", "lavfi", "-i", "sine=f=1000:d=3:r=8000",
           "-filter_complex", "[0][1]amerge=inputs=2", "-c:a", "pcm_s16le", str(m["two_tones.wav"]))
    ffmpeg("-f", "lavfi", "-i", "sine=f=440:d=3:r=8000", "-ac", "2", "-c:a", "pcm_s16le", str(m["identical.wav"]))
    ffmpeg("-f", "lavfi", "-i", "anullsrc=r=8000:cl=mono:d=3", "-f", "lavfi", "-i", "sine=f=440:d=3:r=8000",
           "-filter_complex", "[0][1]amerge=inputs=2", "-t", "3", "-c:a", "pcm_s16le", str(m["one_side.wav"]))
    ffmpeg("-f", "lavfi", "-i", "sine=f=440:d=2.5", "-c:a", "aac", "-f", "mp4", str(m["aac_in_mp4.wav"]))
    ffmpeg("-f", "lavfi", "-i", "color=c=red:s=32x32", "-frames:v", "1", str(m["image.png"]))
    ffmpeg("-f", "lavfi", "-i", "testsrc=d=1:s=64x64:r=10", "-pix_fmt", "yuv420p", str(m["video.mp4"]))
    ffmpeg("-f", "lavfi", "-i", "sine=f=440:d=10", "-c:a", "libmp3lame", str(m["long.mp3"]))
    return m


# --- probe -------------------------------------------------------------------------


def test_probe_valid_stereo(media: dict[str, Path]) -> None:
    info = probe(media["two_tones.wav"], RAW)
    assert info == AudioInfo(format_name="wav", codec="pcm_s16le", channels=2, sample_rate=8000, duration=3.0)


def test_probe_rejects_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.wav"
    path.write_bytes(b"")
    with pytest.raises(InvalidAudio, match="empty"):
        probe(path, RAW)


def test_probe_rejects_text_named_wav(tmp_path: Path) -> None:
    path = tmp_path / "notes.wav"
    path.write_text("this is not audio\n" * 20)
    with pytest.raises(InvalidAudio, match="not a decodable media file") as err:
        probe(path, RAW)
    assert str(path) not in str(err.value)  # the reason, not the temp path


def test_probe_rejects_png_named_wav(media: dict[str, Path], tmp_path: Path) -> None:
    path = tmp_path / "picture.wav"
    path.write_bytes(media["image.png"].read_bytes())
    with pytest.raises(InvalidAudio, match="no audio stream.*video"):
        probe(path, RAW)


def test_probe_rejects_video_without_audio(media: dict[str, Path]) -> None:
    with pytest.raises(InvalidAudio, match="no audio stream.*video"):
        probe(media["video.mp4"], RAW)


def test_probe_rejects_too_long(media: dict[str, Path]) -> None:
    short_limit = dataclasses.replace(RAW, max_duration_seconds=2.0)
    with pytest.raises(InvalidAudio, match="too long.*max_duration_seconds"):
        probe(media["two_tones.wav"], short_limit)
    assert probe(media["two_tones.wav"], dataclasses.replace(RAW, max_duration_seconds=3.5)).duration == 3.0


def test_probe_rejects_too_large(media: dict[str, Path]) -> None:
    size = media["two_tones.wav"].stat().st_size
    with pytest.raises(InvalidAudio, match="too large.*max_size_bytes"):
        probe(media["two_tones.wav"], dataclasses.replace(RAW, max_size_bytes=size - 1))
    assert probe(media["two_tones.wav"], dataclasses.replace(RAW, max_size_bytes=size)).channels == 2


# --- decode ------------------------------------------------------------------------


def test_decode_stereo_keeps_both_sides(media: dict[str, Path], tmp_path: Path) -> None:
    info = probe(media["two_tones.wav"], RAW)
    out = decode(media["two_tones.wav"], info, tmp_path / "out", RAW)
    assert sorted(out) == [0, 1]
    for ch, tone in [(0, 440.0), (1, 1000.0)]:
        assert out[ch].is_file()
        assert pcm_duration(out[ch], SR) == pytest.approx(3.0, abs=0.05)
        assert dominant_hz(samples(out[ch])) == pytest.approx(tone, abs=5)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(p.name for p in out.values())


def test_decode_speakers_on_separate_channels(tmp_path: Path) -> None:
    info = probe(DATA / "stereo_diarization.wav", RAW)
    out = decode(DATA / "stereo_diarization.wav", info, tmp_path, RAW)
    assert sorted(out) == [0, 1]
    assert all(pcm_duration(p, SR) == pytest.approx(info.duration, abs=0.05) for p in out.values())
    assert not np.array_equal(samples(out[0]), samples(out[1]))


@pytest.mark.parametrize("name", ["identical.wav", "one_side.wav"])
def test_decode_fake_stereo_becomes_mono(media: dict[str, Path], tmp_path: Path, name: str) -> None:
    info = probe(media[name], RAW)
    assert info.channels == 2
    out = decode(media[name], info, tmp_path, RAW)
    assert list(out) == [-1]
    pcm = samples(out[-1])
    assert len(pcm) / SR == pytest.approx(3.0, abs=0.05)
    assert dominant_hz(pcm) == pytest.approx(440.0, abs=5)  # the side with sound was kept
    # the louder side as it is, not averaged with a silent one (that would halve the level)
    assert np.abs(pcm).max() == pytest.approx(source_peak(media[name]), rel=0.1)
    assert [p.name for p in tmp_path.iterdir()] == [out[-1].name]  # the dropped side is gone


def test_decode_ignores_extension(media: dict[str, Path], tmp_path: Path) -> None:
    info = probe(media["aac_in_mp4.wav"], RAW)
    assert info.codec == "aac" and "mp4" in info.format_name
    out = decode(media["aac_in_mp4.wav"], info, tmp_path, RAW)
    assert list(out) == [-1]
    assert pcm_duration(out[-1], SR) == pytest.approx(2.5, abs=0.05)
    assert dominant_hz(samples(out[-1])) == pytest.approx(440.0, abs=5)


def test_decode_mono_16k_is_sample_exact(tmp_path: Path) -> None:
    """Without loudness normalisation a 16 kHz mono s16 file passes through unchanged."""
    rng = np.random.default_rng(0)
    original = (rng.standard_normal(SR * 2) * 3000).clip(-32768, 32767).astype("<i2")
    src = tmp_path / "src.wav"
    raw = tmp_path / "src.pcm"
    original.tofile(raw)
    ffmpeg("-f", "s16le", "-ar", str(SR), "-ac", "1", "-i", str(raw), "-c:a", "pcm_s16le", str(src))
    out = decode(src, probe(src, RAW), tmp_path / "out", RAW)
    np.testing.assert_array_equal(samples(out[-1]), original)
    sl = read_pcm(out[-1], SR, 0.5, 0.75)
    assert sl.dtype == np.float32
    np.testing.assert_array_equal(sl, original[8000:12000].astype(np.float32) / 32768.0)


def test_decode_with_loudness_normalisation(media: dict[str, Path], tmp_path: Path) -> None:
    info = probe(media["two_tones.wav"], NORMALISED)
    plain = decode(media["two_tones.wav"], info, tmp_path / "plain", RAW)
    norm = decode(media["two_tones.wav"], info, tmp_path / "norm", NORMALISED)
    assert sorted(norm) == [0, 1]
    for ch in (0, 1):
        assert norm[ch].is_file() and not norm[ch].name.endswith(".raw.pcm")
        assert abs(norm[ch].stat().st_size - plain[ch].stat().st_size) <= 2 * 160  # ±10 ms of samples
        assert dominant_hz(samples(norm[ch])) == pytest.approx(dominant_hz(samples(plain[ch])), abs=5)
    assert not list((tmp_path / "norm").glob("*.raw.pcm"))


def test_probe_rejects_truncated_wav(tmp_path: Path) -> None:
    """A WAV whose header declares 10 s but holds 1 s: an incomplete upload, refused before decoding."""
    full = tmp_path / "full.wav"
    ffmpeg("-f", "lavfi", "-i", "sine=f=440:d=10:r=16000", "-c:a", "pcm_s16le", str(full))
    cut = tmp_path / "cut.wav"
    data = full.read_bytes()
    cut.write_bytes(data[: len(data) // 10])
    reason = r"^truncated: the WAV header declares 10\.0 s of audio, the file holds 1\.0 s$"
    with pytest.raises(InvalidAudio, match=reason):
        probe(cut, RAW)


@pytest.mark.parametrize("codec", ["pcm_s16le", "pcm_mulaw", "pcm_alaw", "pcm_u8", "pcm_f32le"])
@pytest.mark.parametrize("channels", [2, 3])  # three: WAVE_FORMAT_EXTENSIBLE, the codec in its sub-format
def test_plain_wav_is_read_from_its_header_as_ffprobe_reads_it(codec: str, channels: int, tmp_path: Path) -> None:
    """Telephone WAVs skip the ffprobe process; what the header says is what ffprobe says."""
    import ffmpeg as ffmpeg_python

    path = tmp_path / f"{codec}.wav"
    ffmpeg("-f", "lavfi", "-i", "sine=f=440:d=2.5:r=8000", "-ac", str(channels), "-c:a", codec, str(path))
    info = probe(path, RAW)
    stream = ffmpeg_python.probe(str(path))["streams"][0]
    assert (info.format_name, info.codec, info.channels, info.sample_rate) == (
        "wav", stream["codec_name"], stream["channels"], int(stream["sample_rate"]))
    assert info.duration == pytest.approx(float(stream["duration"]), abs=0.01)


def test_probe_accepts_streamed_wav(tmp_path: Path) -> None:
    """A WAV written to a pipe cannot state its length (sizes 0xFFFFFFFF): not truncated, just unsized."""
    streamed = tmp_path / "streamed.wav"
    data = subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i", "sine=f=440:d=2:r=8000",
                           "-f", "wav", "-"], check=True, capture_output=True).stdout
    streamed.write_bytes(data)
    assert data[4:8] == b"\xff\xff\xff\xff"
    info = probe(streamed, RAW)
    assert info.duration == pytest.approx(2.0, abs=0.01)
    assert pcm_duration(decode(streamed, info, tmp_path / "out", RAW)[-1], SR) == pytest.approx(2.0, abs=0.01)


def test_decode_truncated_mp3(media: dict[str, Path], tmp_path: Path) -> None:
    """An mp3 cut to a tenth: its header still says 10 s, so what decodes is too short."""
    cut = tmp_path / "cut.mp3"
    data = media["long.mp3"].read_bytes()
    cut.write_bytes(data[: len(data) // 10])
    info = probe(cut, RAW)
    assert info.duration == pytest.approx(10.0, abs=0.1)
    reason = r"^truncated or corrupt: decoded 1\.\d s of the 10\.0 s its header declares$"
    with pytest.raises(InvalidAudio, match=reason):
        decode(cut, info, tmp_path / "out", RAW)


def test_probe_names_the_missing_mp4_index(tmp_path: Path) -> None:
    """An MP4/M4A upload cut before its index (moov atom) is written: the reason says so."""
    full = tmp_path / "full.m4a"
    ffmpeg("-f", "lavfi", "-i", "sine=f=440:d=5", "-c:a", "aac", str(full))
    cut = tmp_path / "cut.m4a"
    cut.write_bytes(full.read_bytes()[: full.stat().st_size // 2])
    with pytest.raises(InvalidAudio, match=r"^not a decodable media file: moov atom not found"):
        probe(cut, RAW)


# --- loudness ----------------------------------------------------------------------


def level_db(pcm: np.ndarray) -> float:
    return float(20 * np.log10(np.sqrt(np.mean(pcm.astype(np.float64) ** 2)) / 32768))


@pytest.fixture(scope="module")
def quiet_then_loud(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """8 s of a 300 Hz tone at -40 dBFS, then 8 s at -15 dBFS: 25 dB apart."""
    path = tmp_path_factory.mktemp("loud") / "quiet_then_loud.wav"
    ffmpeg("-f", "lavfi", "-i", "sine=f=300:d=8:r=16000", "-f", "lavfi", "-i", "sine=f=300:d=8:r=16000",
           "-filter_complex", "[0]volume=-37dB[a];[1]volume=-12dB[b];[a][b]concat=n=2:v=0:a=1",
           "-c:a", "pcm_s16le", str(path))
    return path


def test_normalisation_applies_one_linear_gain(quiet_then_loud: Path, tmp_path: Path) -> None:
    """Measured first, then one gain, at any length: the quiet and the loud half keep their 25 dB."""
    out = decode(quiet_then_loud, probe(quiet_then_loud, NORMALISED), tmp_path, NORMALISED)[-1]
    pcm = samples(out)
    assert len(pcm) == pytest.approx(16 * SR, abs=SR // 100)
    quiet, loud = pcm[SR : 7 * SR], pcm[9 * SR : 15 * SR]
    assert level_db(loud) - level_db(quiet) == pytest.approx(25.0, abs=0.5)
    assert loudness.measure(pcm_blocks(out), SR).integrated == pytest.approx(NORMALISED.loudness_target_lufs, abs=0.5)
    assert [p.name for p in tmp_path.iterdir()] == [out.name]


def test_normalisation_leaves_digital_silence_alone(tmp_path: Path) -> None:
    src = tmp_path / "silence.wav"
    ffmpeg("-f", "lavfi", "-i", "anullsrc=r=8000:cl=mono", "-t", "12", "-c:a", "pcm_s16le", str(src))
    out = decode(src, probe(src, NORMALISED), tmp_path / "out", NORMALISED)[-1]
    pcm = samples(out)
    assert len(pcm) == 12 * SR and not pcm.any()
    assert [p.name for p in (tmp_path / "out").iterdir()] == [out.name]


# --- read_pcm ----------------------------------------------------------------------


def test_read_pcm_slices(tmp_path: Path) -> None:
    ramp = (np.arange(SR * 3) % 32768).astype("<i2")
    path = tmp_path / "ramp.pcm"
    ramp.tofile(path)
    whole = read_pcm(path, SR)
    assert whole.dtype == np.float32 and len(whole) == len(ramp)
    np.testing.assert_array_equal(whole, ramp.astype(np.float32) / 32768.0)
    part = read_pcm(path, SR, 1.25, 2.0)
    assert len(part) == 12000
    assert part[0] * 32768 == ramp[20000] and part[-1] * 32768 == ramp[31999]
    assert len(read_pcm(path, SR, 2.5, 99.0)) == SR // 2  # end clamps to the file
    assert len(read_pcm(path, SR, -1.0, 0.5)) == SR // 2  # start clamps to 0
    assert len(read_pcm(path, SR, 5.0, 6.0)) == 0
    assert np.abs(whole).max() < 1.0


def test_pcm_blocks_cover_the_file_in_order(tmp_path: Path) -> None:
    ramp = (np.arange(10_000) % 32768).astype("<i2")
    path = tmp_path / "ramp.pcm"
    ramp.tofile(path)
    blocks = list(pcm_blocks(path, 4096))
    assert [len(b) for b in blocks] == [4096, 4096, 1808]
    np.testing.assert_array_equal(np.concatenate(blocks), ramp)


# --- in-process decoding of telephone WAVs ---------------------------------------------


@pytest.mark.parametrize(("codec", "rate", "channels"), [
    ("pcm_s16le", 8000, 1), ("pcm_s16le", 8000, 2), ("pcm_alaw", 8000, 1), ("pcm_mulaw", 8000, 2),
    ("pcm_s16le", 16000, 1), ("pcm_s16le", 44100, 2), ("pcm_alaw", 11025, 3),
])
def test_telephone_wav_decodes_in_process_as_ffmpeg_decodes_it(codec: str, rate: int, channels: int,
                                                               tmp_path: Path) -> None:
    """16-bit PCM and G.711 WAVs are decoded without an ffmpeg process, into what ffmpeg's pass makes: the
    same number of samples per channel, each within a few LSB (libav's own decoders and resampler)."""
    from asr_tasks.intake import audio, wav

    src = tmp_path / "call.wav"
    ffmpeg("-i", str(DATA / "stereo_diarization.wav"), "-t", "4", "-ar", str(rate), "-ac", str(channels),
           "-c:a", codec, str(src))
    header = wav.read_header(src)
    assert header is not None and header.decodable_in_process
    info = probe(src, RAW)
    plan = audio.channel_plan(info)
    (tmp_path / "ours").mkdir()
    (tmp_path / "ffmpeg").mkdir()
    ours = wav.split_channels(src, header, plan, (tmp_path / "ours").resolve())
    theirs = audio._split_channels(src, info, (tmp_path / "ffmpeg").resolve(), RAW)
    assert sorted(ours) == sorted(theirs) == plan
    for ch in plan:
        a, b = samples(ours[ch]).astype(np.int32), samples(theirs[ch]).astype(np.int32)
        assert abs(len(a) - len(b)) <= 2 and len(a) == pytest.approx(4 * SR, abs=2)  # two libav builds
        a, b = a[: min(len(a), len(b))], b[: min(len(a), len(b))]
        assert np.abs(a).max() > 1000  # speech, not silence
        assert np.abs(a - b).max() <= 4


def test_only_plain_telephone_wavs_skip_ffmpeg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A WAV of another codec, or one whose byte rate is not what its rate and channels make, is ffmpeg's."""
    from asr_tasks.intake import audio

    passes: list[str] = []
    ffmpeg_pass = audio._split_channels

    def counted(path: Path, *args: object) -> dict[int, Path]:
        passes.append(path.name)
        return ffmpeg_pass(path, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(audio, "_split_channels", counted)
    for codec in ("pcm_s16le", "pcm_mulaw", "pcm_u8"):
        ffmpeg("-f", "lavfi", "-i", "sine=f=440:d=2:r=8000", "-c:a", codec, str(tmp_path / f"{codec}.wav"))
    lying = tmp_path / "lying.wav"
    data = bytearray((tmp_path / "pcm_s16le.wav").read_bytes())
    data[28:32] = (8000 * 2 * 2).to_bytes(4, "little")  # a byte rate of two channels in a mono header
    lying.write_bytes(bytes(data))
    for name in ("pcm_s16le.wav", "pcm_mulaw.wav", "pcm_u8.wav", "lying.wav"):
        out = decode(tmp_path / name, probe(tmp_path / name, RAW), tmp_path / f"out-{name}", RAW)
        assert pcm_duration(out[-1], SR) == pytest.approx(2.0, abs=0.01)
    assert passes == ["pcm_u8.wav", "lying.wav"]


def riff(*chunks: tuple[bytes, bytes]) -> bytes:
    """A RIFF/WAVE file of these chunks (id, body), each padded to an even length."""
    body = b"".join(cid + len(data).to_bytes(4, "little") + data + b"\0" * (len(data) & 1) for cid, data in chunks)
    return b"RIFF" + (len(body) + 4).to_bytes(4, "little") + b"WAVE" + body


def fmt_chunk(tag: int, channels: int, rate: int, bits: int, extra: bytes = b"",
              block_align: int | None = None) -> tuple[bytes, bytes]:
    width = bits // 8
    align = channels * width if block_align is None else block_align
    return b"fmt ", struct.pack("<HHIIHH", tag, channels, rate, rate * channels * width, align, bits) + extra


def extensible(cb_size: int, valid_bits: int, tag: int = 1) -> bytes:
    """WAVE_FORMAT_EXTENSIBLE's fields after the plain 16 bytes: cbSize, valid bits, channel mask, sub-format."""
    return struct.pack("<HHI", cb_size, valid_bits, 4) + tag.to_bytes(2, "little") + bytes.fromhex(
        "000000001000800000aa00389b71")


TONE = (np.sin(np.arange(2 * 8000) * 2 * np.pi * 440 / 8000) * 8000).astype("<i2").tobytes()
# headers that ffmpeg reads otherwise than their first format and data chunks say, each with why
AMBIGUOUS = {
    "two data chunks (ffmpeg plays the later)": riff(fmt_chunk(1, 1, 8000, 16), (b"data", TONE),
                                                     (b"data", TONE[::-1])),
    "a block size that is not the frame's": riff(fmt_chunk(1, 1, 8000, 16, block_align=3), (b"data", TONE)),
    "extensible, valid bits of another codec": riff(fmt_chunk(0xFFFE, 1, 8000, 16, extensible(22, 8)),
                                                    (b"data", TONE)),
    "extensible, its sub-format not read (cbSize 0)": riff(fmt_chunk(0xFFFE, 1, 8000, 16, extensible(0, 16)),
                                                          (b"data", TONE)),
    "a first format chunk too short, then one": riff((b"fmt ", b""), fmt_chunk(1, 1, 8000, 16), (b"data", TONE)),
    "an XMA2 chunk": riff((b"XMA2", bytes(34)), fmt_chunk(1, 1, 8000, 16), (b"data", TONE)),
    "an AC-3 burst in 16-bit PCM (S/PDIF)": riff(fmt_chunk(1, 2, 48000, 16),
                                                 (b"data", bytes(64) + bytes.fromhex("72f81f4e") + TONE)),
}


@pytest.mark.parametrize("why", sorted(AMBIGUOUS))
def test_a_wav_ffmpeg_reads_otherwise_is_left_to_it(why: str, tmp_path: Path) -> None:
    """The transcript (in process) and the redacted rendition (ffmpeg's) must hear the same audio: a WAV
    whose header ffmpeg would read otherwise is never decoded in process."""
    from asr_tasks.intake import wav

    path = tmp_path / "call.wav"
    path.write_bytes(AMBIGUOUS[why])
    header = wav.read_header(path)
    assert header is None or not header.decodable_in_process, why
    plain = tmp_path / "plain.wav"
    plain.write_bytes(riff(fmt_chunk(0xFFFE, 1, 8000, 16, extensible(22, 16)), (b"data", TONE)))
    header = wav.read_header(plain)
    assert header is not None and header.decodable_in_process  # the well-formed extensible one is


def test_an_ambiguous_wav_header_is_read_as_ffmpeg_reads_it(tmp_path: Path) -> None:
    """A second format chunk (ffmpeg reads the first), a chunk that runs past the end of the file, or an
    extensible sub-format that is not a plain one's: ffprobe and ffmpeg decide, so the transcript and the
    redacted rendition (ffmpeg's) hear the same audio on the same clock."""
    from asr_tasks.intake import wav

    tone = (np.sin(np.arange(4 * 8000) * 2 * np.pi * 440 / 8000) * 8000).astype("<i2").tobytes()
    two = tmp_path / "two_fmt.wav"
    two.write_bytes(riff(fmt_chunk(1, 1, 8000, 16), fmt_chunk(1, 2, 16000, 16), (b"data", tone)))
    huge = tmp_path / "huge_fmt.wav"
    huge.write_bytes(riff((b"fmt ", b"\0" * 16), (b"data", tone))[:16] + (0xFFFFFFF0).to_bytes(4, "little")
                     + fmt_chunk(1, 1, 8000, 16)[1] + b"data" + len(tone).to_bytes(4, "little") + tone)
    guid = tmp_path / "unknown_subformat.wav"
    odd_guid = struct.pack("<HHI", 22, 16, 4) + (1).to_bytes(2, "little") + bytes(14)
    guid.write_bytes(riff(fmt_chunk(0xFFFE, 1, 8000, 16, odd_guid), (b"data", tone)))
    assert wav.read_header(two) is None and wav.read_header(huge) is None
    header = wav.read_header(guid)
    assert header is not None and header.codec is None and not header.decodable_in_process
    info = probe(two, RAW)
    assert (info.channels, info.sample_rate, info.duration) == (1, 8000, pytest.approx(4.0, abs=0.01))
    assert pcm_duration(decode(two, info, tmp_path / "out", RAW)[-1], SR) == pytest.approx(4.0, abs=0.01)
    for path in (huge, guid):
        with pytest.raises(InvalidAudio):
            decode(path, probe(path, RAW), tmp_path / path.stem, RAW)
