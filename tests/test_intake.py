"""Audio intake through the real preprocessing stage: bad inputs are quarantined with their reason,
odd but valid ones come out right, and a long synthetic call is cut where its utterances allow.

Every case goes through ``pipeline.preprocess`` with a local store, so the quarantine
record and the manifest that the next stages read are checked, not just the return value.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import numpy as np
import pytest
from stages import transcript_of

from asr_tasks.config import Settings
from asr_tasks.intake.stores import LocalStore, get_json
from asr_tasks.intake.vad import frame_levels, get_vad, speech_regions
from asr_tasks.models import AudioChunk, Preprocessed, Quarantine, Segment
from asr_tasks.pipeline.preprocess import preprocess
from asr_tasks.pipeline.results import StageResult
from asr_tasks.pipeline.sense import sense
from asr_tasks.states import RecordingState
from asr_tasks.text.postprocess import stitch

DATA = Path(__file__).parent / "data"
DAY = date(2026, 11, 27)
PREFIX = "calls/2026/11/27/"
SR = 16000
SENTENCES = {
    "invoice": "Please call me back tomorrow morning about the invoice.",
    "transfer": "I can see the transfer on your account since Monday.",
    "fee": "Is there a fee if I close the account early?",
    "rate": "The interest rate on that product is fixed for two years.",
    "digits": "Could you confirm the last four digits of your card?",
    "refund": "The refund will reach your account within five working days.",
    "address": "I have updated your address in our system.",
    "thanks": "Thank you very much for your help today.",
    "yes": "Yes.",
}


# --- material --------------------------------------------------------------------------------


def ffmpeg(*args: str, stdin: bytes | None = None) -> None:
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", *args], input=stdin, check=True)


def speak(text: str, rate: int, folder: Path) -> np.ndarray:
    """An espeak-ng utterance as float32 at ``rate``, trimmed to where it is audible."""
    wav = folder / (re.sub(r"\W+", "_", text).strip("_").lower() + ".wav")
    subprocess.run(["espeak-ng", "-s", "165", "-w", str(wav), text], check=True, capture_output=True)
    raw = subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-i", str(wav), "-ac", "1", "-ar", str(rate),
                          "-f", "f32le", "-"], check=True, capture_output=True).stdout
    pcm = np.frombuffer(raw, dtype="<f4")
    loud = np.nonzero(np.abs(pcm) > 0.005)[0]
    return pcm[loud[0] : loud[-1] + 1].copy()


def write(path: Path, frames: np.ndarray, rate: int, *codec: str) -> Path:
    """Float samples (n, channels) to any format ffmpeg writes."""
    frames = frames.reshape(len(frames), -1).astype("<f4")
    ffmpeg("-f", "f32le", "-ar", str(rate), "-ac", str(frames.shape[1]), "-i", "-", *codec, str(path),
           stdin=frames.tobytes())
    return path


@dataclass(frozen=True)
class Utterance:
    channel: int
    start: float
    end: float
    run: int | None = None  # the long speech run it belongs to, if any


@pytest.fixture(scope="module")
def voices(tmp_path_factory: pytest.TempPathFactory) -> dict[str, np.ndarray]:
    """Each sentence once, at 8 kHz (telephone) and 16 kHz."""
    folder = tmp_path_factory.mktemp("voices")
    return {f"{name}@{rate}": speak(text, rate, folder) for name, text in SENTENCES.items() for rate in (8000, 16000)}


@pytest.fixture(scope="module")
def media(tmp_path_factory: pytest.TempPathFactory, voices: dict[str, np.ndarray]) -> dict[str, Path]:
    """Bad and odd-but-valid files, each made once."""
    d = tmp_path_factory.mktemp("intake")
    invoice8, invoice16 = voices["invoice@8000"], voices["invoice@16000"]
    m: dict[str, Path] = {}

    def placed(clip: np.ndarray, rate: int, seconds: float, at: float = 0.5) -> np.ndarray:
        out = np.zeros(int(seconds * rate), dtype=np.float32)
        out[int(at * rate) : int(at * rate) + len(clip)] = clip
        return out

    # bad
    m["empty.wav"] = d / "empty.wav"
    m["empty.wav"].write_bytes(b"")
    full = write(d / "full.wav", placed(invoice16, SR, 10.0), SR, "-c:a", "pcm_s16le")
    m["truncated.wav"] = d / "truncated.wav"
    m["truncated.wav"].write_bytes(full.read_bytes()[: full.stat().st_size // 4])
    full_mp3 = write(d / "full.mp3", placed(invoice16, SR, 10.0), SR, "-c:a", "libmp3lame")
    m["truncated.mp3"] = d / "truncated.mp3"
    m["truncated.mp3"].write_bytes(full_mp3.read_bytes()[: full_mp3.stat().st_size // 4])
    full_m4a = write(d / "full.m4a", placed(invoice16, SR, 10.0), SR, "-c:a", "aac")
    m["truncated.m4a"] = d / "truncated.m4a"
    m["truncated.m4a"].write_bytes(full_m4a.read_bytes()[: full_m4a.stat().st_size // 2])
    m["notes.wav"] = d / "notes.wav"
    m["notes.wav"].write_text("Call notes: customer asked about the invoice.\n" * 40)
    png = d / "picture.png"
    ffmpeg("-f", "lavfi", "-i", "color=c=blue:s=64x64", "-frames:v", "1", str(png))
    m["picture.wav"] = d / "picture.wav"
    m["picture.wav"].write_bytes(png.read_bytes())
    m["video.mp4"] = d / "video.mp4"
    ffmpeg("-f", "lavfi", "-i", "testsrc=d=2:s=64x64:r=10", "-pix_fmt", "yuv420p", str(m["video.mp4"]))
    srt = d / "subs.srt"
    srt.write_text("1\n00:00:00,000 --> 00:00:02,000\nHello\n")
    m["subtitles.mkv"] = d / "subtitles.mkv"
    ffmpeg("-i", str(srt), str(m["subtitles.mkv"]))
    m["ten_seconds.wav"] = full
    m["no_duration.mka"] = d / "no_duration.mka"  # Opus in Matroska written to a pipe: no duration anywhere
    m["no_duration.mka"].write_bytes(subprocess.run(
        ["ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i", "sine=d=10", "-c:a", "libopus",
         "-f", "matroska", "-"],
        check=True, capture_output=True).stdout)
    # odd but valid
    m["mono_8k.wav"] = write(d / "mono_8k.wav", placed(invoice8, 8000, 6.0), 8000, "-c:a", "pcm_s16le")
    stereo = np.zeros((int(9 * 8000), 2), dtype=np.float32)
    stereo[4000 : 4000 + len(invoice8), 0] = invoice8
    fee8 = voices["fee@8000"]
    stereo[5 * 8000 : 5 * 8000 + len(fee8), 1] = fee8
    m["stereo_8k.wav"] = write(d / "stereo_8k.wav", stereo, 8000, "-c:a", "pcm_mulaw")
    six = np.zeros((int(6 * SR), 6), dtype=np.float32)
    six[:, 2] = placed(invoice16, SR, 6.0)  # the centre channel of 5.1
    m["six_channel.wav"] = write(d / "six_channel.wav", six, SR, "-c:a", "pcm_s16le", "-channel_layout", "5.1")
    invoice48 = speak(SENTENCES["invoice"], 48000, d)
    m["float_48k.wav"] = write(d / "float_48k.wav", placed(invoice48, 48000, 6.0), 48000, "-c:a", "pcm_f32le")
    mp3 = write(d / "speech.mp3", placed(invoice16, SR, 6.0), SR, "-c:a", "libmp3lame")
    m["mp3_named.wav"] = d / "mp3_named.wav"
    m["mp3_named.wav"].write_bytes(mp3.read_bytes())
    m["one_second.wav"] = write(d / "one_second.wav", placed(voices["yes@16000"], SR, 1.0, at=0.3), SR,
                                "-c:a", "pcm_s16le")
    m["silence.wav"] = write(d / "silence.wav", np.zeros((30 * 8000, 2), dtype=np.float32), 8000,
                             "-c:a", "pcm_s16le")
    return m


def run_stage(source: Path, name: str, settings: Settings) -> tuple[StageResult, LocalStore]:
    """Drop a file into the day's folder of a fresh store and preprocess it as the DAG does."""
    store = LocalStore(settings.storage.path("store_root"))
    store.put_file(settings.storage.recordings_bucket, PREFIX + name, source)
    (rec,) = [r for r in sense(store, settings, DAY) if r.key == PREFIX + name]
    return preprocess(rec, store, settings), store


def manifest(result: StageResult, store: LocalStore, settings: Settings) -> Preprocessed:
    return Preprocessed.from_dict(get_json(store, settings.storage.artefacts_bucket, result.version.manifest))


# --- bad inputs: quarantined, with the reason ------------------------------------------------

BAD = [
    ("empty.wav", {}, r"empty file \(0 bytes\)"),
    ("truncated.wav", {}, r"truncated: the WAV header declares 10\.0 s of audio, the file holds 2\.5 s"),
    ("truncated.mp3", {}, r"truncated or corrupt: decoded 2\.\d s of the 10\.\d s its header declares"),
    ("truncated.m4a", {}, r"not a decodable media file: moov atom not found; Invalid data found when processing input"),
    ("notes.wav", {}, r"not a decodable media file: Invalid data found when processing input"),
    ("picture.wav", {}, r"no audio stream: the file holds video \(png_pipe\)"),
    ("video.mp4", {}, r"no audio stream: the file holds video \(mov,mp4,m4a,3gp,3g2,mj2\)"),
    ("subtitles.mkv", {}, r"no audio stream: the file holds subtitle \(matroska,webm\)"),
    ("ten_seconds.wav", {"max_duration_seconds": 5.0}, r"too long: 10 s > max_duration_seconds 5"),
    ("no_duration.mka", {"max_duration_seconds": 5.0}, r"too long: more than max_duration_seconds 5 s decoded"),
    ("ten_seconds.wav", {"max_size_bytes": 100_000}, r"file too large: 320\d\d\d bytes > max_size_bytes 100000"),
]


@pytest.mark.parametrize(("name", "overrides", "reason"), BAD,
                         ids=[f"{n}-{'-'.join(o) or 'default'}" for n, o, _ in BAD])
def test_bad_input_is_quarantined_with_its_reason(
    media: dict[str, Path], settings: Settings, name: str, overrides: dict[str, float], reason: str
) -> None:
    settings = settings.override(**overrides)
    result, store = run_stage(media[name], name, settings)
    assert result.state == RecordingState.QUARANTINED
    assert result.reason is not None and re.fullmatch(reason, result.reason), result.reason
    bucket = settings.storage.artefacts_bucket
    record = Quarantine.from_dict(get_json(store, bucket, result.version.quarantine))
    assert record.reason == result.reason and record.recording.key == PREFIX + name
    assert not store.exists(bucket, result.version.manifest)
    assert not list(settings.storage.path("work_dir").iterdir())  # nothing left behind
    again, _ = run_stage(media[name], name, settings)
    assert again == result  # the quarantine record is the checkpoint: not probed twice


# --- odd but valid: transcribable, with the speech where it was put --------------------------


def covers(chunks: list[AudioChunk], start: float, end: float) -> bool:
    return any(c.start <= start and end <= c.end for c in chunks)


@pytest.mark.parametrize(
    ("name", "speakers", "duration", "speech"),
    [
        ("mono_8k.wav", ["mixed"], 6.0, [(0, "invoice", 0.5)]),
        ("stereo_8k.wav", ["agent", "customer"], 9.0, [(0, "invoice", 0.5), (1, "fee", 5.0)]),
        ("six_channel.wav", ["mixed"], 6.0, [(0, "invoice", 0.5)]),
        ("float_48k.wav", ["mixed"], 6.0, [(0, "invoice", 0.5)]),
        ("mp3_named.wav", ["mixed"], 6.0, [(0, "invoice", 0.5)]),
        ("one_second.wav", ["mixed"], 1.0, [(0, "yes", 0.3)]),
        ("no_duration.mka", ["mixed"], 10.0, []),  # a tone: no speech, but no header length is no reason to refuse
    ],
)
def test_odd_but_valid_input_is_preprocessed(
    media: dict[str, Path], voices: dict[str, np.ndarray], settings: Settings,
    name: str, speakers: list[str], duration: float, speech: list[tuple[int, str, float]],
) -> None:
    result, store = run_stage(media[name], name, settings)
    assert (result.state, result.reason) == ("preprocessed", None)
    pre = manifest(result, store, settings)
    assert [c.speaker for c in pre.channels] == speakers
    assert pre.duration == pytest.approx(duration, abs=0.06)
    for channel in pre.channels:  # 16 kHz s16 mono PCM of the whole recording, per channel
        pcm = settings.storage.path("store_root") / settings.storage.artefacts_bucket / channel.pcm_key
        assert pcm.stat().st_size == pytest.approx(duration * SR * 2, abs=0.06 * SR * 2)
    for channel, sentence, at in speech:
        clip = voices[f"{sentence}@16000"]
        start, end = at, at + len(clip) / SR
        mine = [c for c in pre.chunks if c.channel == channel]
        assert covers(mine, start, end), (sentence, start, end, mine)
        assert all(c.start >= start - 0.5 and c.end <= end + 0.5 for c in mine), mine  # nothing but the speech
    assert not store.exists(settings.storage.artefacts_bucket, result.version.quarantine)


def test_total_silence_is_preprocessed_and_then_needs_review(media: dict[str, Path], settings: Settings) -> None:
    result, store = run_stage(media["silence.wav"], "silence.wav", settings)
    assert (result.state, result.reason, result.speech_seconds) == ("preprocessed", None, 0.0)
    pre = manifest(result, store, settings)
    assert [c.speaker for c in pre.channels] == ["mixed"]  # two silent sides are one silent recording
    assert pre.duration == pytest.approx(30.0, abs=0.01) and pre.chunks == []
    transcript = transcript_of(pre, [], "none")
    assert transcript.state == "needs_review" and (transcript.reason or "").startswith("no speech detected")


# --- the stereo sample: two speakers ---------------------------------------------------------


def test_stereo_sample_comes_out_as_agent_and_customer(settings: Settings) -> None:
    """One speaker per side: kept as two channels, each cut where its own speaker talks
    (the agent's sentence runs to about 4.9 s, the customer's ends near 2.8 s)."""
    result, store = run_stage(DATA / "stereo_diarization.wav", "stereo_diarization.wav", settings)
    pre = manifest(result, store, settings)
    assert [(c.channel, c.speaker) for c in pre.channels] == [(0, "agent"), (1, "customer")]
    by_speaker = {speaker: [c for c in pre.chunks if c.speaker == speaker] for speaker in ("agent", "customer")}
    assert all(len(chunks) == 1 for chunks in by_speaker.values()), pre.chunks
    agent, customer = by_speaker["agent"][0], by_speaker["customer"][0]
    assert (agent.channel, customer.channel) == (0, 1)
    assert agent.start < 0.3 and agent.end > 4.6
    assert customer.start < 0.4 and 2.6 < customer.end < 3.4


# --- a long call built from known utterances at known offsets --------------------------------


def synthetic_call(
    seconds: float, voices: dict[str, np.ndarray], folder: Path, seed: int
) -> tuple[Path, list[Utterance]]:
    """A stereo 8 kHz call: agent left, customer right, turns with pauses, and now and then a
    monologue whose utterances follow each other too closely for a pause (a run longer than a chunk)."""
    rate = 8000
    rng = np.random.default_rng(seed)
    clips = [v for k, v in voices.items() if k.endswith("@8000") and not k.startswith("yes")]
    n = int(seconds * rate)
    pcm = np.zeros((n, 2), dtype="<i2")
    for lo in range(0, n, 60 * rate):  # a -64 dBFS line-noise floor, made a minute at a time
        block = pcm[lo : lo + 60 * rate]
        block[:] = (rng.standard_normal(block.shape, dtype=np.float32) * 20).astype("<i2")
    truth: list[Utterance] = []
    t, turn, runs = 1.0, 0, 0
    while t < seconds - 60:  # a turn lasts under a minute: none is cut short by the end of the call
        side, monologue = turn % 2, turn % 7 == 3
        run, start, wanted, placed = (runs if monologue else None), t, int(rng.integers(1, 3)), 0
        while (t - start < 40.0) if monologue else placed < wanted:  # a monologue: 40 s of speech
            placed += 1
            clip = clips[int(rng.integers(len(clips)))]
            at = int(t * rate)
            pcm[at : at + len(clip), side] += (clip * 0.5 * 32767).astype("<i2")
            truth.append(Utterance(side, at / rate, (at + len(clip)) / rate, run))
            t = truth[-1].end + (float(rng.uniform(0.08, 0.15)) if monologue else float(rng.uniform(1.2, 2.0)))
        t += float(rng.uniform(0.6, 3.0)) + (float(rng.uniform(20.0, 45.0)) if turn % 11 == 10 else 0.0)
        runs += monologue
        turn += 1
    path = folder / f"call_{int(seconds)}s.wav"
    ffmpeg("-f", "s16le", "-ar", str(rate), "-ac", "2", "-i", "-", "-c:a", "pcm_s16le", str(path), stdin=pcm.tobytes())
    return path, truth


def check_long_call(seconds: float, voices: dict[str, np.ndarray], settings: Settings, tmp_path: Path) -> None:
    path, truth = synthetic_call(seconds, voices, tmp_path, seed=int(seconds))
    result, store = run_stage(path, path.name, settings)
    pre = manifest(result, store, settings)
    assert [c.speaker for c in pre.channels] == ["agent", "customer"]
    assert pre.duration == pytest.approx(seconds, abs=0.01)
    limit, pad = settings.audio.chunk_max_seconds, settings.audio.vad_speech_pad_ms / 1000

    assert max(c.duration for c in pre.chunks) <= limit
    assert all(round(c.start, 3) == c.start and round(c.end, 3) == c.end for c in pre.chunks)
    runs: dict[int, list[Utterance]] = {}
    for u in truth:
        if u.run is not None:
            runs.setdefault(u.run, []).append(u)
    assert runs and all(r[-1].end - r[0].start > limit for r in runs.values())  # the material has long runs

    for u in truth:
        mine = [c for c in pre.chunks if c.channel == u.channel and c.start < u.end and u.start < c.end]
        if covers(mine, u.start, u.end):
            continue
        assert u.run is not None, f"{u} is cut although it is not part of a long run: {mine}"
        mine.sort(key=lambda c: c.start)  # cut at a forced split: the pieces overlap and cover it together
        assert mine[0].start <= u.start and u.end <= mine[-1].end, (u, mine)
        assert all(b.start < a.end for a, b in zip(mine, mine[1:])), (u, mine)
    for run in runs.values():  # every long run is split, and only with the configured overlap
        pieces = sorted((c for c in pre.chunks if c.channel == run[0].channel and c.start < run[-1].end
                         and run[0].start < c.end), key=lambda c: c.start)
        assert len(pieces) >= 2
        seams = [round(a.end - b.start, 3) for a, b in zip(pieces, pieces[1:]) if b.start < a.end]
        assert seams and all(s == settings.audio.chunk_overlap_seconds for s in seams), seams

    # Times on the recording's clock: the stage's speech regions, unpadded, against the truth (±0.2 s) ...
    vad = get_vad()
    for channel in pre.channels:
        pcm = settings.storage.path("store_root") / settings.storage.artefacts_bucket / channel.pcm_key
        regions = speech_regions(vad.probabilities(pcm), SR, threshold=settings.audio.vad_threshold,
                                 min_silence_ms=settings.audio.vad_min_silence_ms, speech_pad_ms=0,
                                 levels=frame_levels(pcm))
        spans = [[u] for u in truth if u.channel == channel.channel and u.run is None]
        spans += [r for r in runs.values() if r[0].channel == channel.channel]
        for span in spans:
            start, end = span[0].start, span[-1].end
            found = [r for r in regions if r.start < end + 0.2 and start - 0.2 < r.end]
            assert found, span
            assert min(r.start for r in found) == pytest.approx(start, abs=0.2), span
            assert max(r.end for r in found) == pytest.approx(end, abs=0.2), span
    # ... and the chunks start and end where that speech does, give or take the configured padding.
    for chunk in pre.chunks:
        touched = [u for u in truth if u.channel == chunk.channel and u.start < chunk.end and chunk.start < u.end]
        continues = any(c.channel == chunk.channel and c.start < chunk.start < c.end for c in pre.chunks)
        continued = any(c.channel == chunk.channel and c.start < chunk.end < c.end for c in pre.chunks)
        if not continues:  # not the later piece of a split run: the chunk opens with an utterance
            assert chunk.start + pad == pytest.approx(min(u.start for u in touched), abs=0.2), chunk
        if not continued:  # nor the earlier one: it closes with one
            assert chunk.end - pad == pytest.approx(max(u.end for u in touched), abs=0.2), chunk


def test_ten_minute_call_is_cut_at_pauses(voices: dict[str, np.ndarray], settings: Settings, tmp_path: Path) -> None:
    check_long_call(600.0, voices, settings, tmp_path)


@pytest.mark.slow
def test_one_hour_call_is_cut_at_pauses(voices: dict[str, np.ndarray], settings: Settings, tmp_path: Path) -> None:
    check_long_call(3600.0, voices, settings, tmp_path)


# --- stitching the overlap of a split run ----------------------------------------------------


def seg(channel: int, start: float, end: float, text: str) -> Segment:
    return Segment("rec", channel, "agent" if channel == 0 else "customer", start, end, text)


def test_stitch_drops_the_words_heard_twice_in_the_overlap() -> None:
    out = stitch([
        seg(0, 0.0, 20.25, "Please call me back about the invoice"),
        seg(0, 19.75, 24.0, "the Invoice, tomorrow morning."),
        seg(1, 19.8, 21.0, "Invoice?"),  # the other channel: never compared with channel 0
    ])
    assert [(s.channel, s.start, s.end, s.text) for s in out] == [
        (0, 0.0, 20.25, "Please call me back about the invoice"),
        (1, 19.8, 21.0, "Invoice?"),
        (0, 20.25, 24.0, "tomorrow morning."),
    ]


def test_stitch_keeps_repeats_that_do_not_overlap_in_time() -> None:
    out = stitch([seg(0, 0.0, 5.0, "no no"), seg(0, 5.0, 6.0, "no no"), seg(0, 7.0, 8.0, "no")])
    assert [s.text for s in out] == ["no no", "no no", "no"]


def test_stitch_drops_a_segment_that_only_repeats() -> None:
    out = stitch([seg(0, 0.0, 20.25, "about the invoice."), seg(0, 19.8, 20.3, "Invoice"), seg(0, 21.0, 22.0, " ")])
    assert [s.text for s in out] == ["about the invoice."]


def test_stitch_compares_chinese_by_character() -> None:
    out = stitch([seg(0, 0.0, 20.25, "我们明天再谈"), seg(0, 19.9, 23.0, "再谈这个问题。")])
    assert [(s.start, s.text) for s in out] == [(0.0, "我们明天再谈"), (20.25, "这个问题。")]


def test_stitch_leaves_the_input_segments_unchanged() -> None:
    later = seg(0, 19.75, 24.0, "the invoice tomorrow")
    stitch([seg(0, 0.0, 20.25, "about the invoice"), later])
    assert (later.start, later.text) == (19.75, "the invoice tomorrow")


@pytest.mark.parametrize(("field", "value", "kept"), [
    ("customer_id", "CU-5501", True), ("customer_id", "4711", True), ("customer_id", "4155552671", False), ("customer_id", "+44 20 7946 0958", False),
    ("customer_id", "4111111111111111", False), ("customer_id", "John Smith", False), ("customer_id", 12345678, False),
    ("customer_id", "x" * 65, False), ("agent_id", "AG-1001", True), ("agent_id", "agent.7:desk_2", True), ("agent_id", "a@b.example", False),
    ("agent_id", "<script>", False), ("direction", "inbound", True), ("direction", "Call me at 555-0100", False),
    ("started_at", "2026-11-27T09:00:00+08:00", True), ("started_at", "yesterday at nine", False),
    ("customer_id", True, False),
])
def test_a_sidecar_field_of_another_shape_is_kept_nowhere(settings: Settings, caplog: pytest.LogCaptureFixture,
                                                          field: str, value: object, kept: bool) -> None:
    """A phone or card number given as a customer id is personal data in a field that is shown and indexed: only
    the shape the bank declares is kept, and the log names the recording and the field, not the value."""
    import json

    from asr_tasks.intake.days import list_recordings

    store = LocalStore(settings.storage.path("store_root"))
    store.put_bytes("recordings", "calls/2026/11/27/c1.wav", b"RIFF")
    store.put_bytes("recordings", "calls/2026/11/27/c1.json", json.dumps({field: value}).encode())
    with caplog.at_level("WARNING", logger="asr_tasks.intake.days"):
        (rec,) = list_recordings(store, settings.storage, date(2026, 11, 27))
    assert getattr(rec, field) == (str(value) if kept else None)
    if not kept and not isinstance(value, bool):
        assert f"recording {rec.recording_id}: the sidecar's {field} is not kept" in caplog.text
        assert str(value) not in caplog.text


def test_a_bank_declares_the_shape_of_its_ids(settings: Settings) -> None:
    """Numeric customer numbers, where a bank has them, are a setting away; a broken pattern fails at start-up."""
    from asr_tasks.config import ConfigError
    from asr_tasks.intake.days import kept_fields

    numeric = settings.override(party_id_pattern=r"C\d{8}").storage
    assert kept_fields({"customer_id": "C00012345"}, numeric, "r")["customer_id"] == "C00012345"
    assert kept_fields({"customer_id": "CU-5501"}, numeric, "r")["customer_id"] is None
    with pytest.raises((ConfigError, ValueError), match="party_id_pattern|regular expression"):
        settings.override(party_id_pattern="(unclosed")
