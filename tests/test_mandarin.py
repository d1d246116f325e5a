"""Real Mandarin speech through the day's stages, with packing on: no clip loses its words.

The recordings are the five real clips of tests/data/zh/ (4-8 s), short complete
utterances cut from them at their natural pauses (1-2 s: what Whisper tends to
skip when it shares a window with a long chunk), and one long call made of two
clips joined without a pause (a 12 s chunk). Two days, with ``language: zh``:

- ``window``: a 12 s, a 3.6 s and two short chunks, so all four share one window,
  where Whisper-base leaves the short ones without words; only decoding them
  again alone gives them their text;
- ``mixed``: all twelve recordings, packed and unpacked: every recording must
  come out with text, the two runs' texts must agree closely, every segment must
  sit on its own recording's clock, and the index must hold simplified script
  and find two-character words.
"""

from __future__ import annotations

import dataclasses
import subprocess
from datetime import date
from pathlib import Path

import opencc
import pytest
from conftest import DATA

from asr_tasks.config import Settings
from asr_tasks.index.sqlite import SqliteIndex
from asr_tasks.intake.artefacts import Artefacts
from asr_tasks.intake.stores import LocalStore
from asr_tasks.models import Transcript
from asr_tasks.pipeline.gate import gate_shard
from asr_tasks.pipeline.index import index_results
from asr_tasks.pipeline.preprocess import preprocess_shard
from asr_tasks.pipeline.results import preprocessed
from asr_tasks.pipeline.sense import plan_shards, sense
from asr_tasks.pipeline.transcribe import load_engine, transcribe_shard

ZH = DATA / "zh"
DAY = date(2026, 11, 30)
PREFIX = "calls/2026/11/30/"
# (recording, source clip, from, to): cut where the VAD hears a pause of 0.1-0.3 s inside the clip.
CUTS = [
    ("short_sensevoice", "funasr_sensevoice_sample.wav", 0.8, 2.4),  # 1.6 s
    ("short_aishell_a", "wenet_aishell-BAC009S0724W0121.wav", 0.2, 1.42),  # 1.2 s
    ("short_aishell_c", "wenet_aishell-BAC009S0724W0121.wav", 2.27, 3.9),  # 1.6 s
    ("short_mid", "funasr_mid.wav", 3.7, 4.7),  # 1.0 s
    ("half_long_a", "funasr_long.wav", 0.3, 3.95),
    ("half_long_b", "funasr_long.wav", 3.95, 7.6),
]


WINDOW = ["long_call", "wenet_aishell-BAC009S0724W0121", "short_aishell_a", "short_aishell_c"]
Day = tuple[dict[str, Transcript], SqliteIndex, dict[str, float]]


def _ffmpeg(*args: str) -> None:
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", *args], check=True)


def _write_day(folder: Path) -> dict[str, Path]:
    files = {path.stem: path for path in sorted(ZH.glob("*.wav"))}
    for name, source, start, end in CUTS:
        files[name] = folder / f"{name}.wav"
        _ffmpeg("-i", str(ZH / source), "-ss", str(start), "-to", str(end), "-c:a", "pcm_s16le", str(files[name]))
    files["long_call"] = folder / "long_call.wav"  # 7.0 s + 4.5 s of speech with 0.15 s between: one chunk
    _ffmpeg("-i", str(ZH / "funasr_long.wav"), "-i", str(ZH / "funasr_asr_example.wav"), "-filter_complex",
            "[0]atrim=0.4:7.45,apad=pad_dur=0.15[a];[1]atrim=0.8:5.35[b];[a][b]concat=n=2:v=0:a=1", str(files["long_call"]))
    return files


def _run_day(settings: Settings, files: dict[str, Path]) -> Day:
    store = LocalStore(settings.storage.path("store_root"))
    for name, path in files.items():
        store.put_file(settings.storage.recordings_bucket, f"{PREFIX}{name}.wav", path)
    index = SqliteIndex(settings.index.path("index_path"))
    [shard] = plan_shards(sense(store, settings, DAY), settings.airflow)
    results = preprocess_shard(shard, store, settings)
    engine = load_engine(settings)
    before = dataclasses.replace(engine.packing_stats)  # type: ignore[attr-defined]
    transcribe_shard(preprocessed(results), store, settings)
    fallbacks = engine.packing_stats.since(before).as_dict()  # type: ignore[attr-defined]
    gate_shard(results, store, settings)
    index_results(results, store, index, settings)
    transcripts = {
        r.key.rsplit("/", 1)[-1].removesuffix(".wav"):
            Artefacts.of(store, settings).transcript(r.version)
        for r in results
    }
    return transcripts, index, fallbacks


def _cer(reference: str, hypothesis: str) -> float:
    """Character error rate (Levenshtein over characters, punctuation dropped)."""
    ref = [c for c in reference if c.isalnum()]
    hyp = [c for c in hypothesis if c.isalnum()]
    row = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        prev, row[0] = row[0], i
        for j, h in enumerate(hyp, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (r != h))
    return row[-1] / max(len(ref), 1)


@pytest.fixture(scope="module")
def days(tmp_path_factory: pytest.TempPathFactory, model_dir: Path) -> dict[str, Day]:
    folder = tmp_path_factory.mktemp("zh-day")
    files = _write_day(folder)
    out = {}
    for name, names, packed in (("window", WINDOW, True), ("packed", list(files), True),
                                ("unpacked", list(files), False)):
        root = folder / name
        settings = Settings().override(store_root=str(root / "store"), index_path=str(root / "index.sqlite"), work_dir=str(root / "work"), model_dir=str(model_dir), ledger_url=f"sqlite:///{root / 'ledger.sqlite'}", language="zh", pack_windows=packed)
        out[name] = _run_day(settings, {n: files[n] for n in names})
    return out


def _text(transcript: Transcript) -> str:
    return "".join(s.text for s in transcript.segments)


def test_short_chunks_left_empty_by_a_shared_window_get_their_words(days: dict[str, Day]) -> None:
    transcripts, _, fallbacks = days["window"]
    assert fallbacks["shared"] == 4  # one window for the four
    assert {name: bool(_text(t).strip()) for name, t in transcripts.items()} == dict.fromkeys(WINDOW, True)
    assert "广州" in _text(transcripts["short_aishell_a"]) and "协会" in _text(transcripts["short_aishell_c"])
    assert fallbacks["empty_redone"] >= 1, "Whisper-base kept every chunk's words: this case no longer tests it"


def test_every_clip_keeps_its_words_when_packed(days: dict[str, Day]) -> None:
    transcripts, _, fallbacks = days["packed"]
    assert fallbacks["shared"] >= 10  # the short clips really shared windows with long chunks
    assert sorted(name for name, t in transcripts.items() if not _text(t).strip()) == []
    for name, transcript in transcripts.items():
        assert "no text" not in (transcript.reason or "") and transcript.language == "zh", name
        assert len(_text(transcript)) >= 1.5 * transcript.speech_seconds, name  # Mandarin: 3-5 characters a second


def test_packed_and_unpacked_text_agree(days: dict[str, Day]) -> None:
    packed, unpacked = days["packed"][0], days["unpacked"][0]
    rates = {name: _cer(_text(unpacked[name]), _text(packed[name])) for name in packed}
    assert sum(rates.values()) / len(rates) <= 0.25, rates
    assert max(rates.values()) <= 0.6, rates


def test_segments_stay_on_their_recordings_clock(days: dict[str, Day]) -> None:
    for name, transcript in [*days["packed"][0].items(), *days["window"][0].items()]:
        for seg in transcript.segments:
            assert 0.0 <= seg.start < seg.end <= transcript.duration + 0.01, (name, seg)
            assert seg.recording_id == transcript.recording.recording_id
    long_call = days["packed"][0]["long_call"]
    assert long_call.segments[0].start < 1.0 and long_call.segments[-1].end > 10.0  # the whole 12 s call


def test_the_index_holds_simplified_script_and_finds_two_character_words(days: dict[str, Day]) -> None:
    transcripts, index, _ = days["packed"]
    to_simplified = opencc.OpenCC("t2s")
    for transcript in transcripts.values():
        for seg in transcript.segments:
            assert to_simplified.convert(seg.text) == seg.text, seg.text
    for name, transcript in transcripts.items():
        text = "".join(c for s in transcript.segments for c in s.text if "\u4e00" <= c <= "\u9fff")
        word = next(text[i : i + 2] for i in range(len(text) - 1))
        hits = index.search(word, limit=200)
        assert transcript.recording.recording_id in {h.recording_id for h in hits}, (name, word)
        assert all(word in h.text for h in hits)  # a phrase of its characters, never the two apart
