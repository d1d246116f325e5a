"""Hostile and broken uploads: each ends in exactly one state with the reason it deserves, and the day goes on.

The corpus is made at test time: playlists and concat lists that point at another
customer's recording, absurd headers, truncated and mislabelled files of the
supported containers, files that are no audio at all, and a few valid calls in
odd clothing. A real ``airflow dags test`` run takes all of them together.
"""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from test_dag import BIN, airflow_env, run

from asr_tasks.config import Settings
from asr_tasks.intake.audio import InvalidAudio, _run, command_timeout
from asr_tasks.intake.stores import LocalStore
from asr_tasks.pipeline.preprocess import preprocess, recording_fault
from asr_tasks.pipeline.sense import sense
from asr_tasks.records.ledger import open_ledger
from asr_tasks.states import RecordingState

DAY = "2026-11-27"
PREFIX = "calls/2026/11/27/"
VICTIM = "victim.aac"  # another customer's call, in the same folder as the attacks that point at it
VICTIM_WORDS = "country"  # said in the victim's call only
# A valid call is transcribed: indexed, or flagged for review by the quality gate (never quarantined).
TRANSCRIBED = "transcribed"


def ffmpeg(*args: str) -> None:
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", *args], check=True)


def wav_header(channels: int, rate: int, bits: int = 16, data_size: int = 0, tag: int = 1) -> bytes:
    """A RIFF/WAVE header that claims whatever it is told to."""
    block = max(1, channels * bits // 8) & 0xFFFF
    fmt = struct.pack("<HHIIHH", tag, channels & 0xFFFF, rate & 0xFFFFFFFF, (rate * block) & 0xFFFFFFFF, block, bits)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + b"data" + struct.pack("<I", data_size)
    return b"RIFF" + struct.pack("<I", (len(body) + data_size) & 0xFFFFFFFF) + body


def build_corpus(folder: Path, jfk: Path) -> dict[str, tuple[str, str]]:
    """Every file of the hostile day, by name: (the state it must end in, a regex its reason must match)."""
    folder.mkdir(parents=True, exist_ok=True)
    speech = folder / ".speech.wav"
    subprocess.run(["espeak-ng", "-v", "en-us", "-s", "150", "-w", str(speech),
                    "Thank you for calling, your balance is fine."], check=True, capture_output=True)
    tone = folder / ".tone.wav"
    ffmpeg("-f", "lavfi", "-i", "sine=f=440:d=4", "-ar", "8000", str(tone))
    expected: dict[str, tuple[str, str]] = {}

    def made(name: str, state: str, reason: str = "") -> Path:
        expected[name] = (state, reason)
        return folder / name

    ffmpeg("-i", str(jfk), "-c:a", "aac", "-f", "adts", str(made(VICTIM, TRANSCRIBED)))
    made("hls_playlist.wav", RecordingState.QUARANTINED, r"refused: an HLS playlist is not a call recording").write_text(
        f"#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:11\n#EXTINF:11.0,\n{VICTIM}\n#EXT-X-ENDLIST\n")
    made("live_playlist.mp3", RecordingState.QUARANTINED, r"refused: an HLS playlist").write_text(
        f"#EXTM3U\n#EXT-X-TARGETDURATION:11\n#EXTINF:11.0,\n{VICTIM}\n")  # no end: a live stream that never ends
    made("concat_list.wav", RecordingState.QUARANTINED, r"refused: an ffconcat list is not a call recording").write_text(
        f"ffconcat version 1.0\nfile '{VICTIM}'\nfile '{VICTIM}'\n")
    made("channels_65535.wav", RecordingState.QUARANTINED, r"implausible header: 65535 channels > max_channels 8").write_bytes(
        wav_header(65535, 8000, data_size=65535 * 2 * 100) + bytes(65535 * 2 * 100))
    made("nine_channels.wav", RecordingState.QUARANTINED, r"implausible header: 9 channels > max_channels 8").write_bytes(
        wav_header(9, 8000, data_size=9 * 2 * 8000) + bytes(9 * 2 * 8000))
    made("rate_4ghz.wav", RecordingState.QUARANTINED, r"implausible header: sample rate 4000000000 Hz").write_bytes(
        wav_header(1, 4_000_000_000, data_size=16000) + bytes(16000))
    made("declares_an_hour.wav", RecordingState.QUARANTINED, r"truncated: the WAV header declares 3600\.0 s").write_bytes(
        wav_header(1, 8000, data_size=8000 * 2 * 3600) + bytes(8000 * 2))
    made("header_only.wav", RecordingState.QUARANTINED, r"not a decodable media file").write_bytes(b"RIFF\x24\x00\x00\x00WAVE")
    made("empty.wav", RecordingState.QUARANTINED, r"empty file \(0 bytes\)").write_bytes(b"")
    made("notes.wav", RecordingState.QUARANTINED, r"not a decodable media file").write_text("call notes, not audio\n" * 40)
    made("page.html", RecordingState.QUARANTINED, r"not a decodable media file").write_text(
        "<html><body><script>alert(document.cookie)</script></body></html>\n" * 10)
    made("drawing.svg", RecordingState.QUARANTINED, r"not a decodable media file|no audio stream").write_text(
        '<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"><rect width="9" height="9"/></svg>\n' * 10)
    ffmpeg("-f", "lavfi", "-i", "color=c=red:s=16x16:d=1", "-frames:v", "1", "-f", "image2", "-c:v", "png",
           str(made("picture.wav", RecordingState.QUARANTINED, r"no audio stream: the file holds video")))
    ffmpeg("-f", "lavfi", "-i", "color=c=blue:s=32x32:d=2", "-c:v", "mpeg4",
           str(made("video_only.mp4", RecordingState.QUARANTINED, r"no audio stream: the file holds video")))
    subtitles = folder / ".subs.srt"
    subtitles.write_text("1\n00:00:00,000 --> 00:00:01,000\nhello\n")
    ffmpeg("-i", str(subtitles), "-c:s", "srt", "-f", "matroska",
           str(made("subtitles_only.mkv", RecordingState.QUARANTINED, r"no audio stream: the file holds subtitle")))
    long_flac = folder / ".long.flac"
    ffmpeg("-stream_loop", "3", "-i", str(speech), "-ar", "16000", str(long_flac))
    data = long_flac.read_bytes()
    made("truncated.flac", RecordingState.QUARANTINED, r"truncated or corrupt").write_bytes(data[: len(data) // 3])
    m4a = folder / ".call.m4a"
    ffmpeg("-i", str(speech), "-c:a", "aac", "-movflags", "+faststart", str(m4a))
    data = m4a.read_bytes()
    made("truncated.m4a", RecordingState.QUARANTINED, r"truncated or corrupt|not a decodable media file").write_bytes(
        data[: len(data) // 3])
    made("no_data.wav", RecordingState.QUARANTINED, r"no audio data|not a decodable|truncated").write_bytes(
        wav_header(1, 8000, data_size=0))
    # Valid calls in odd clothing: transcribed, and never with another file's words.
    ffmpeg("-i", str(speech), "-c:a", "libmp3lame", "-f", "mp3", str(made("mp3_named.wav", TRANSCRIBED)))
    ffmpeg("-i", str(speech), "-ar", "8000", "-c:a", "pcm_mulaw", str(made("mulaw_8k.wav", TRANSCRIBED)))
    ffmpeg("-i", str(speech), "-ac", "3", str(made("three_channels.wav", TRANSCRIBED)))
    ffmpeg("-i", str(speech), "-f", "wav", str(made("concat:victim.aac|x.wav", TRANSCRIBED)))
    ffmpeg("-i", str(speech), "-c:a", "libopus", "-f", "ogg", str(made("opus_named.mp4", TRANSCRIBED)))
    ffmpeg("-f", "lavfi", "-i", "anullsrc=r=8000:cl=mono", "-t", "5",
           str(made("silence.wav", "needs_review", r"no speech detected")))
    shutil.copy(tone, made("tone.wav", "needs_review", r"no speech detected|quality gate failed"))
    for n in range(20):  # many small files: a tenth of a second each
        ffmpeg("-f", "lavfi", "-i", f"sine=f={300 + 20 * n}:d=0.1", "-ar", "8000",
               str(made(f"blip_{n:02d}.wav", "needs_review", r"no speech detected")))
    ffmpeg("-i", str(speech), "-f", "lavfi", "-i", "anoisesrc=r=8000:color=pink:amplitude=0.002:d=1200",
           "-filter_complex", "[0:a]aresample=8000[s];[s][1:a]concat=n=2:v=0:a=1", "-ac", "1",
           str(made("twenty_minutes.wav", TRANSCRIBED)))  # a very long one: a sentence, then 20 minutes of line hiss
    return expected


def test_a_command_that_runs_too_long_is_stopped_and_named() -> None:
    import ffmpeg as ff

    slow = ff.input("sine=f=440:d=30", f="lavfi", re=None).output("-", f="null")
    with pytest.raises(InvalidAudio, match=r"decoding failed: ffmpeg did not finish within 1 s"):
        _run(slow, "decoding failed", timeout=1.0)
    assert command_timeout(3600) > command_timeout(60) >= 60


@pytest.mark.parametrize(("exc", "fault"), [
    (InvalidAudio("truncated"), "truncated"),
    (OSError(7, "Argument list too long"), "preprocessing failed: OSError: [Errno 7] Argument list too long"),
    (ValueError("cannot reshape"), "preprocessing failed: ValueError: cannot reshape"),
    (OSError(28, "No space left on device"), None),
    (FileNotFoundError(2, "No such file or directory", "ffmpeg"), None),
    (MemoryError(), None),
])
def test_what_is_the_recordings_fault_and_what_is_the_workers(exc: Exception, fault: str | None) -> None:
    assert recording_fault(exc) == fault


def test_an_object_deleted_after_listing_is_quarantined_and_the_rest_go_on(settings: Settings, jfk: Path) -> None:
    store = LocalStore(settings.storage.path("store_root"))
    bucket = settings.storage.recordings_bucket
    for name in ("gone.flac", "kept.flac"):
        store.put_file(bucket, PREFIX + name, jfk)
    from datetime import date

    recordings = sense(store, settings, date.fromisoformat(DAY))
    (settings.storage.path("store_root") / bucket / PREFIX / "gone.flac").unlink()
    results = {r.key.rsplit("/", 1)[-1]: r for r in (preprocess(rec, store, settings) for rec in recordings)}
    assert results["gone.flac"].state == RecordingState.QUARANTINED
    assert results["gone.flac"].reason == "the object is gone: deleted after the day was listed"
    assert results["kept.flac"].state == "preprocessed"
    rows = {row["key"].rsplit("/", 1)[-1]: row for row in open_ledger(settings.ledger).rows(DAY)}
    assert rows["gone.flac"]["state"] == RecordingState.QUARANTINED and rows["kept.flac"]["state"] == "preprocessed"


@pytest.mark.e2e
def test_a_hostile_day_through_the_dag(tmp_path: Path, jfk: Path, model_dir: Path) -> None:
    """Every object ends in exactly one state with its reason; no transcript holds words from another file."""
    env = {**airflow_env(tmp_path), "ASR_READY_CHECK": "marker"}
    folder = tmp_path / "store" / "recordings" / PREFIX
    expected = build_corpus(folder, jfk)
    for hidden in folder.glob(".*"):
        hidden.unlink()
    (folder / "_READY").write_bytes(b"")
    airflow, asr = str(BIN / "airflow"), str(BIN / "asr")
    for step in ([airflow, "db", "migrate"], [airflow, "pools", "set", "gpu", "1", "ASR transcription"]):
        proc = run(step, env)
        assert proc.returncode == 0, proc.stderr[-2000:]
    proc = run([airflow, "dags", "test", "transcribe_daily", DAY], env)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "state=success" in log, log[-5000:]

    status = json.loads(run([asr, "status", "--date", DAY, "--json"], env).stdout)
    rows = {row["key"].removeprefix(PREFIX): row for row in status["recordings"]}
    assert sorted(rows) == sorted(expected), "every object in the ledger, once"
    seen = {name: (rows[name]["state"], rows[name]["reason"]) for name in expected}
    for name, (state, reason) in expected.items():
        if state == TRANSCRIBED:
            assert seen[name][0] == "indexed" or (seen[name][0] == "needs_review" and seen[name][1].startswith(
                "quality gate failed")), (name, seen[name])
            continue
        assert seen[name][0] == state, (name, seen[name])
        if reason:
            assert re.search(reason, seen[name][1] or ""), (name, seen[name])
    assert len(expected) >= 20

    artefacts = tmp_path / "store" / "asr-artefacts"
    for path in artefacts.rglob("gated.*.json"):
        transcript = json.loads(path.read_text())
        text = " ".join(s["text"] for s in transcript["segments"]).lower()
        name = transcript["recording"]["key"].removeprefix(PREFIX)
        assert (VICTIM_WORDS in text) == (name == VICTIM), (name, text)
