"""Preprocessing speed and memory: a day's short calls, and long calls of 10 minutes, 1 hour and 3 hours.

Short calls: ``--short-calls`` synthetic calls of 2-15 s (8 kHz mono espeak-ng
speech, as ``bench/pipeline.py``'s day holds) preprocessed one after another in
one worker process; prints audio seconds per wall second, and per CPU second of
the worker and its ffmpeg children together (what one core does).

Synthesises stereo call recordings from an 8 kHz source (espeak-ng speech, the
agent on the left channel and the customer on the right, with a few speech runs
longer than a chunk), then preprocesses each one exactly as the DAG does
(``pipeline.preprocess``: probe, decode per channel, loudness normalisation, VAD,
chunking, artefacts into a throw-away local store) in a fresh worker process.
Prints, per length, audio seconds processed per wall second and the peak RSS of
the worker process (ffmpeg runs in child processes; their peak is shown apart).

    .venv/bin/python bench/preprocess.py [--json] [--quick] [--short-calls 200] [--lengths 600,3600,10800]

``--quick`` preprocesses four short calls and one recording of 60 s the same
way. The JSON's keys: ``short_calls`` (``calls``, ``audio_seconds``,
``wall_seconds``, ``cpu_seconds``, ``audio_s_per_wall_s``,
``audio_s_per_cpu_s``, ``ms_per_call``), ``source``, then one object per length (``10min``, ``1h``, ``3h``, or ``<N>s``)
with ``audio_seconds``, ``wall_seconds``, ``audio_s_per_wall_s``,
``peak_rss_mb``, ``ffmpeg_peak_rss_mb``, ``channels``, ``chunks``,
``longest_chunk_s``, ``speech_seconds``; ``rss_ratio_3h_to_10min`` when both
lengths ran.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import wave
from datetime import date
from pathlib import Path

import numpy as np
from synthetic import parse_args, synthesise

QUICK = {"lengths": "60", "short_calls": 4}
SOURCE_RATE = 8000
BASE_SECONDS = 300.0  # one synthetic call, repeated to the wanted length
DAY = date(2026, 11, 27)
LABELS = {600: "10min", 3600: "1h", 10800: "3h"}
AGENT = [
    "Thank you for calling Harbour Bank, my name is Anna, how can I help you today?",
    "I can see the transfer on your account, it was sent on the third of November.",
    "Let me check the interest rate on that savings product for you.",
    "For security, could you please confirm the last four digits of your card?",
    "The fund does not guarantee any return, the value can go down as well as up.",
    "I have updated your address, you will receive a confirmation letter by post.",
]
CUSTOMER = [
    "Hello, I have a question about a payment that has not arrived yet.",
    "Yes, the last four digits are seven two one nine.",
    "Is there a fee if I close the account before the end of the year?",
    "Okay, and how long will the refund take to reach my account?",
    "I would like to speak to someone about my mortgage as well.",
    "That is all, thank you very much for your help.",
]


def speak(text: str, folder: Path, name: str) -> np.ndarray:
    """One utterance as 8 kHz s16 samples, trimmed to where it is audible."""
    wav = folder / f"{name}.wav"
    subprocess.run(["espeak-ng", "-s", "165", "-w", str(wav), text], check=True, capture_output=True)
    raw = subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-i", str(wav), "-ac", "1", "-ar", str(SOURCE_RATE),
                          "-f", "s16le", "-"], check=True, capture_output=True).stdout
    pcm = np.frombuffer(raw, dtype="<i2")
    loud = np.nonzero(np.abs(pcm.astype(np.int32)) > 200)[0]
    return pcm[loud[0] : loud[-1] + 1]


def base_call(folder: Path) -> Path:
    """A five-minute two-party call: turns with pauses, and now and then one side speaks for 40 s on end."""
    rng = np.random.default_rng(7)
    voices = ([speak(t, folder, f"a{i}") for i, t in enumerate(AGENT)],
              [speak(t, folder, f"c{i}") for i, t in enumerate(CUSTOMER)])
    n = int(BASE_SECONDS * SOURCE_RATE)
    stereo = (rng.standard_normal((n, 2)) * 20).astype(np.int32)  # a -64 dBFS line-noise floor
    t, turn = 0.5, 0
    while t < BASE_SECONDS - 50:  # room for one more turn, a monologue included
        side = turn % 2
        run_end = t + (40.0 if turn % 12 == 6 else 0.0)  # a monologue: gaps too short to end a speech run
        while True:
            clip = voices[side][int(rng.integers(len(voices[side])))]
            at = int(t * SOURCE_RATE)
            stereo[at : at + len(clip), side] += clip
            t += len(clip) / SOURCE_RATE
            if t >= run_end:
                break
            t += float(rng.uniform(0.1, 0.2))
        t += float(rng.uniform(0.4, 2.5))
        turn += 1
    path = folder / "base.wav"
    pcm = np.clip(stereo, -32768, 32767).astype("<i2")
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-f", "s16le", "-ar", str(SOURCE_RATE), "-ac", "2",
                    "-i", "-", "-c:a", "pcm_s16le", str(path)], input=pcm.tobytes(), check=True)
    return path


def long_call(base: Path, seconds: int, target: Path) -> None:
    """The base call repeated to ``seconds`` by ffmpeg's concat demuxer (a stream copy: fast)."""
    listing = base.with_name(f"{target.stem}.txt")
    listing.write_text(f"file '{base}'\n" * math.ceil(seconds / BASE_SECONDS))
    target.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-f", "concat", "-safe", "0", "-i", str(listing),
                    "-t", str(seconds), "-c", "copy", str(target)], check=True)
    listing.unlink()


def worker(store_root: str, work_dir: str) -> None:
    """Preprocess the day's one recording, as an Airflow worker would; print what it cost."""
    from asr_tasks.config import get_settings
    from asr_tasks.intake.stores import LocalStore, get_json
    from asr_tasks.models import Preprocessed
    from asr_tasks.pipeline.preprocess import preprocess
    from asr_tasks.pipeline.sense import sense

    ledger_url = f"sqlite:///{Path(work_dir).parent / 'ledger.sqlite'}"  # throw-away, like the store
    settings = get_settings().override(store_root=store_root, work_dir=work_dir, ledger_url=ledger_url)
    store = LocalStore(Path(store_root))
    (rec,) = sense(store, settings, DAY)
    t0 = time.perf_counter()
    result = preprocess(rec, store, settings)
    wall = time.perf_counter() - t0
    if result.state != "preprocessed":
        raise SystemExit(f"{rec.key}: {result.state}: {result.reason}")
    pre = Preprocessed.from_dict(get_json(store, settings.storage.artefacts_bucket, result.version.manifest))
    print(json.dumps({
        "audio_seconds": pre.duration,
        "wall_seconds": round(wall, 2),
        "audio_s_per_wall_s": round(pre.duration / wall, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "ffmpeg_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1),
        "channels": [c.speaker for c in pre.channels],
        "chunks": len(pre.chunks),
        "longest_chunk_s": round(max((c.duration for c in pre.chunks), default=0.0), 3),
        "speech_seconds": pre.speech_seconds,
    }))


def short_worker(store_root: str, work_dir: str) -> None:
    """Preprocess every recording of the day one after another, as one worker slot would; print what it cost."""
    from asr_tasks.config import get_settings
    from asr_tasks.intake.stores import LocalStore
    from asr_tasks.intake.vad import get_vad
    from asr_tasks.pipeline.preprocess import preprocess
    from asr_tasks.pipeline.sense import sense

    ledger_url = f"sqlite:///{Path(work_dir).parent / 'ledger.sqlite'}"
    settings = get_settings().override(store_root=store_root, work_dir=work_dir, ledger_url=ledger_url)
    store = LocalStore(Path(store_root))
    recordings = sense(store, settings, DAY)
    get_vad()  # loaded once per worker process, as in a task: not a per-call cost
    cpu = _cpu_seconds()
    t0 = time.perf_counter()
    results = [preprocess(rec, store, settings) for rec in recordings]
    wall = time.perf_counter() - t0
    cpu = _cpu_seconds() - cpu
    if bad := [f"{r.key}: {r.reason}" for r in results if r.state != "preprocessed"]:
        raise SystemExit("\n".join(bad))
    audio = sum(_wav_seconds(Path(store_root) / rec.bucket / rec.key) for rec in recordings)
    print(json.dumps({
        "calls": len(recordings), "audio_seconds": round(audio, 1), "wall_seconds": round(wall, 2),
        "cpu_seconds": round(cpu, 2), "audio_s_per_wall_s": round(audio / wall, 1),
        "audio_s_per_cpu_s": round(audio / cpu, 1), "ms_per_call": round(1000 * wall / len(recordings), 1),
    }))


def _cpu_seconds() -> float:
    """User and system time of this process and its waited-for children (ffmpeg, ffprobe)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _wav_seconds(path: Path) -> float:
    with wave.open(str(path)) as wav:
        return wav.getnframes() / wav.getframerate()


def short_calls(count: int, tmp: Path) -> dict[str, object]:
    calls = synthesise(tmp / "speech", minutes=count, count=count)
    day = tmp / "short" / "store" / "recordings" / f"calls/{DAY:%Y/%m/%d}"
    day.mkdir(parents=True)
    for call in calls:
        shutil.copy(call.path, day / call.path.name)
    root = tmp / "short"
    proc = subprocess.run([sys.executable, __file__, "--short-worker", str(root / "store"), str(root / "work")],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"worker for the short calls failed:\n{proc.stderr}")
    shutil.rmtree(root)
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--lengths", default="600,3600,10800", help="recording lengths in seconds")
    parser.add_argument("--short-calls", type=int, default=200, help="short calls to preprocess (0: none)")
    parser.add_argument("--worker", nargs=2, metavar=("STORE_ROOT", "WORK_DIR"), help=argparse.SUPPRESS)
    parser.add_argument("--short-worker", nargs=2, metavar=("STORE_ROOT", "WORK_DIR"), help=argparse.SUPPRESS)
    args = parse_args(parser, QUICK)
    if args.worker:
        worker(*args.worker)
        return
    if args.short_worker:
        short_worker(*args.short_worker)
        return

    lengths = [int(x) for x in args.lengths.split(",") if x]
    runs: dict[str, dict[str, object]] = {}
    short: dict[str, object] | None = None
    with tempfile.TemporaryDirectory(prefix="bench-preprocess-") as tmp:
        if args.short_calls:
            (Path(tmp) / "speech").mkdir()
            short = short_calls(args.short_calls, Path(tmp))
        base = base_call(Path(tmp))
        for seconds in lengths:
            label = LABELS.get(seconds, f"{seconds}s")
            root = Path(tmp) / label
            long_call(base, seconds, root / "store" / "recordings" / f"calls/{DAY:%Y/%m/%d}/call_{label}.wav")
            proc = subprocess.run([sys.executable, __file__, "--worker", str(root / "store"), str(root / "work")],
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                raise SystemExit(f"worker for {label} failed:\n{proc.stderr}")
            runs[label] = json.loads(proc.stdout.strip().splitlines()[-1])
            shutil.rmtree(root)
    report: dict[str, object] = {**({"short_calls": short} if short else {}),
                                 "source": f"stereo {SOURCE_RATE} Hz s16 WAV, espeak-ng dialogue", **runs}
    if "10min" in runs and "3h" in runs:
        report["rss_ratio_3h_to_10min"] = round(
            float(runs["3h"]["peak_rss_mb"]) / float(runs["10min"]["peak_rss_mb"]), 3  # type: ignore[arg-type]
        )
    if args.json:
        print(json.dumps(report, indent=2))
        return
    if short:
        print(f" short  {short['audio_s_per_wall_s']:>8} audio s / wall s  {short['audio_s_per_cpu_s']} audio s / CPU s"
              f"  ({short['calls']} calls, {short['ms_per_call']} ms each)")
    for label, run in runs.items():
        print(f"{label:>6}  {run['audio_s_per_wall_s']:>8} audio s / wall s  peak RSS {run['peak_rss_mb']:>7} MB"
              f"  (ffmpeg {run['ffmpeg_peak_rss_mb']} MB)  {run['chunks']} chunks")
    if "rss_ratio_3h_to_10min" in report:
        print(f"rss_ratio_3h_to_10min {report['rss_ratio_3h_to_10min']}")


if __name__ == "__main__":
    main()
