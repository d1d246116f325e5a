"""The whole daily DAG against the engine alone and the naive loop, on one synthetic day.

The day holds a few hundred short calls (2-15 s, 8 kHz mono: IVR legs and
call-backs) and some long stereo calls (agent left, customer right), all of
known text. Three measurements of the same audio:

- pipeline: the real ``transcribe_daily`` DAG on the embedded defaults, from
  the sensor to the index: decoding, loudness, VAD, ASR, stitching,
  post-processing, the quality gate, indexing and Airflow itself. By default in
  this process (``dag.test()``: one task at a time); with ``--scheduler``, under
  the scheduler `make standalone` runs (LocalExecutor, one worker per core), the
  day cut into shards of ``--shard-recordings``, so that the next shard is
  preprocessed while the GPU pool's one slot transcribes the one before;
- engine: ``transcribe_batch`` alone over the chunks the pipeline cut, already
  in memory, with the model already loaded;
- naive: the seed article's loop, faster-whisper's ``transcribe`` on each whole
  file (``--naive-every N`` times every N-th file only; its speed is a rate, so a
  sample measures it, at a fraction of the time).

Seconds per stage are the tasks' own; in this process, peak RSS per task comes
from a task listener that resets the process's high-water mark
(``/proc/self/clear_refs``) when a task starts and reads it when the task ends
(ffmpeg's children not included). Under the scheduler, the times are Airflow's
own records of each task instance, the run's wall time spans its first task's
queueing to its last task's end (``pipeline.asr_backfill_to_done_s`` adds the
command and the scheduler's pick-up), ``pipeline.preprocessing_overlapped_s``
says how long shards were preprocessed while another was being transcribed, and
``pipeline.no_task_running_s`` how long no task ran at all
(packing's figures and peak RSS are the tasks' processes', not shown there).

    .venv/bin/python bench/pipeline.py [--json] [--quick] [--short-calls 200] [--long-calls 2] [--long-minutes 5]
                                       [--naive-every 1] [--scheduler [--shard-recordings 50]]

``--quick`` runs the same day with four short calls and one long call of 15 s,
the naive loop on one file of them.
The JSON's keys: ``machine``, ``day``, ``engine``, ``pipeline``,
``packing_in_the_dag``, ``engine_alone``, ``naive``, ``pipeline_over_engine``,
``pipeline_over_naive``, ``wer_pipeline``, ``wer_pipeline_on_naive_files``,
``wer_naive``.
"""

from __future__ import annotations

import argparse
import os
import runpy
import subprocess
import sys
import tempfile
import time
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any

from pluggy import HookimplMarker
from scheduler import Standalone, TaskInstance, airflow_env, by_task
from synthetic import Call, Naive, parse_args, print_report, synthesise, synthesise_conversation, timed, wer

from asr_tasks.config import PROJECT_ROOT

QUICK = {"short_calls": 4, "long_calls": 1, "long_minutes": 0.25, "naive_every": 5}
DAY = date(2026, 11, 28)
BIN = Path(sys.executable).parent
hookimpl = HookimplMarker("airflow")


class TaskMeter:
    """Airflow task listener: wall seconds and peak RSS of every task instance run in this process."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.started = 0.0

    @hookimpl
    def on_task_instance_running(self, previous_state: Any, task_instance: Any) -> None:
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS
        self.started = time.perf_counter()

    @hookimpl
    def on_task_instance_success(self, previous_state: Any, task_instance: Any) -> None:
        self._end(task_instance, "success")

    @hookimpl
    def on_task_instance_failed(self, previous_state: Any, task_instance: Any, error: Any) -> None:
        self._end(task_instance, "failed")

    def _end(self, ti: Any, state: str) -> None:
        peak_kib = next(int(line.split()[1]) for line in Path("/proc/self/status").read_text().splitlines()
                        if line.startswith("VmHWM:"))
        self.rows.append({"task": ti.task_id, "map_index": ti.map_index, "state": state,
                          "seconds": round(time.perf_counter() - self.started, 2),
                          "peak_rss_mib": round(peak_kib / 1024, 1)})


def build_day(folder: Path, store_root: Path, args: argparse.Namespace) -> dict[str, Call]:
    """The synthetic day's recordings, written into the local store; returns them by object key."""
    from asr_tasks.config import get_settings
    from asr_tasks.intake.days import day_prefix
    from asr_tasks.intake.stores import LocalStore

    (folder / "short").mkdir(parents=True)
    calls = synthesise(folder / "short", minutes=1e9, count=args.short_calls)
    calls += [synthesise_conversation(folder / f"long{n}.wav", args.long_minutes, seed=100 + n)
              for n in range(args.long_calls)]
    settings = get_settings()
    store = LocalStore(store_root)
    prefix = day_prefix(settings.storage, DAY)
    by_key = {}
    for n, call in enumerate(calls):
        key = f"{prefix}call_{n:04d}.wav"
        store.put_file(settings.storage.recordings_bucket, key, call.path)
        by_key[key] = call
    return by_key


def environment(tmp: Path, extra: dict[str, str]) -> None:
    """Embedded defaults, with every file of the run under ``tmp``, for this process and the scheduler's tasks."""
    os.environ.update(airflow_env(tmp, {"AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING", **extra}))
    (tmp / "airflow").mkdir()


def prepare_database() -> None:
    for step in ([str(BIN / "airflow"), "db", "migrate"], [str(BIN / "asr"), "pools", "--apply"]):
        subprocess.run(step, check=True, capture_output=True)


def run_dag(meter: TaskMeter) -> float:
    """One real run of transcribe_daily for the day, in this process; returns its wall seconds."""
    from airflow.sdk.listener import get_listener_manager

    get_listener_manager().add_listener(meter)
    dag = runpy.run_path(str(PROJECT_ROOT / "dags" / "transcribe_daily.py"))["transcribe_daily"]()
    started = time.perf_counter()
    run = dag.test(logical_date=datetime(DAY.year, DAY.month, DAY.day, tzinfo=timezone.utc))
    wall = time.perf_counter() - started
    if run.state != "success":
        raise SystemExit(f"transcribe_daily ended {run.state}: {meter.rows}")
    return wall


def run_on_scheduler(tmp: Path) -> tuple[float, list[dict[str, Any]], dict[str, float]]:
    """One run of transcribe_daily for the day under a real scheduler: its wall seconds, its task instances, and
    how long preprocessing overlapped a transcription and no task ran at all (between the first start and the last
    end: the scheduler's own time)."""
    with Standalone(tmp, dict(os.environ)) as airflow:
        backfill = airflow.backfill(DAY, DAY, max_active_runs=1)
        instances = airflow.task_instances()
    rows = [{"task": ti.task, "map_index": ti.map_index, "state": ti.state, "seconds": round(ti.seconds, 2)}
            for ti in instances]
    wall = max(ti.end for ti in instances) - min(ti.queued for ti in instances)  # the run, from its first queued task
    return wall, rows, {"preprocessing_overlapped_s": overlapped(instances, "shard.preprocess", "shard.transcribe"),
                        "no_task_running_s": idle(instances), "asr_backfill_to_done_s": round(backfill, 1)}


def overlapped(instances: list[TaskInstance], task: str, other: str) -> float:
    """Seconds during which an instance of ``task`` ran while one of ``other`` did."""
    others = sorted((ti.start, ti.end) for ti in instances if ti.task == other)
    return round(sum(max(0.0, min(ti.end, end) - max(ti.start, start))
                     for ti in instances if ti.task == task for start, end in others), 1)


def idle(instances: list[TaskInstance]) -> float:
    """Seconds between the first task's start and the last one's end when no task ran."""
    busy, reach = 0.0, float("-inf")
    for ti in sorted(instances, key=lambda ti: ti.start):
        busy += max(0.0, ti.end - max(ti.start, reach))
        reach = max(reach, ti.end)
    first, last = min(ti.start for ti in instances), max(ti.end for ti in instances)
    return round(last - first - busy, 1)


def transcript_texts(by_key: dict[str, Call]) -> tuple[dict[str, str], list[Any]]:
    """The indexed text of every recording (segments in time order), and the preprocessing manifests."""
    from asr_tasks.config import get_settings
    from asr_tasks.index.backends import open_index
    from asr_tasks.intake.artefacts import Artefacts
    from asr_tasks.intake.days import list_recordings
    from asr_tasks.intake.stores import open_store
    from asr_tasks.version import RecordingVersion

    settings = get_settings()
    store = open_store(settings.storage)
    artefacts = Artefacts.of(store, settings)
    states = {row["key"]: row["state"] for row in open_index(settings.index).recordings(DAY.isoformat())}
    if sorted(states) != sorted(by_key):
        raise SystemExit(f"{len(by_key)} recordings in the day, {len(states)} in the index")
    texts, manifests = {}, []
    for rec in list_recordings(store, settings.storage, DAY):
        version = RecordingVersion.of(rec)
        manifests.append(artefacts.manifest(version))
        transcript = artefacts.transcript(version)
        texts[rec.key] = " ".join(s.text for s in sorted(transcript.segments, key=lambda s: s.start))
    return texts, manifests


def engine_alone(manifests: list[Any]) -> tuple[float, int]:
    """Wall seconds of one ``transcribe_batch`` over every chunk of the day, read into memory beforehand."""
    from asr_tasks.config import get_settings
    from asr_tasks.intake.stores import open_store
    from asr_tasks.pipeline.transcribe import load_chunks, load_engine

    settings = get_settings()
    engine = load_engine(settings)  # the instance the DAG's transcription task loaded
    items, _ = load_chunks(manifests, open_store(settings.storage), settings.storage.artefacts_bucket)
    _, wall = timed(engine.transcribe_batch, items)
    return wall, len(items)


def packing_stats() -> dict[str, float]:
    """What packing did in the DAG's transcription tasks (they ran in this process): the fallbacks among them."""
    from asr_tasks.config import get_settings
    from asr_tasks.pipeline.transcribe import load_engine

    return load_engine(get_settings()).packing_stats.as_dict()  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--short-calls", type=int, default=200, help="short calls (2-15 s) in the day")
    parser.add_argument("--long-calls", type=int, default=2, help="long stereo calls in the day")
    parser.add_argument("--long-minutes", type=float, default=5.0, help="length of each long call")
    parser.add_argument("--naive-every", type=int, default=1, help="the naive loop runs on every N-th file")
    parser.add_argument("--scheduler", action="store_true", help="run the DAG under a real scheduler, in shards")
    parser.add_argument("--shard-recordings", type=int, default=50, help="recordings per shard with --scheduler")
    args = parse_args(parser, QUICK)

    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        environment(tmp, {"ASR_SHARD_MAX_RECORDINGS": str(args.shard_recordings)} if args.scheduler else {})
        by_key = build_day(tmp / "synth", tmp / "store", args)
        audio = sum(call.duration for call in by_key.values())

        if args.scheduler:
            pipeline_wall, rows, timing = run_on_scheduler(tmp)
            packing = None
        else:
            prepare_database()
            meter = TaskMeter()
            pipeline_wall, rows = run_dag(meter), meter.rows
            timing = {"outside_tasks_s": round(pipeline_wall - sum(r["seconds"] for r in rows), 1)}
            packing = packing_stats()
        texts, manifests = transcript_texts(by_key)
        engine_wall, chunks = engine_alone(manifests)

        from asr_tasks.config import get_settings

        settings = get_settings()
        sample = sorted(by_key)[:: args.naive_every]
        naive, naive_load = timed(Naive, settings)
        naive_texts, naive_wall = timed(naive.run, [by_key[k] for k in sample])
        sample_audio = sum(by_key[k].duration for k in sample)

    keys = sorted(by_key)
    tasks = by_task(rows)
    pipeline_rate, engine_rate, naive_rate = audio / pipeline_wall, audio / engine_wall, sample_audio / naive_wall
    report = {
        "machine": {"cpus": os.cpu_count(), "load_average_before": [round(x, 2) for x in load_before]},
        "day": {"recordings": len(by_key), "short_calls": args.short_calls, "long_calls": args.long_calls,
                "audio_s": round(audio, 1), "speech_s": round(sum(m.speech_seconds for m in manifests), 1),
                "chunks": chunks},
        "engine": f"{settings.asr.engine} {settings.asr.model_family} {settings.asr.compute_type} on {settings.asr.device}, "
                  f"beam {settings.asr.beam_size}, batch {settings.asr.batch_size}, packing {settings.asr.pack_windows}, "
                  f"language {settings.asr.language or 'detected'}",
        "pipeline": {"mode": f"scheduler, shards of {args.shard_recordings}" if args.scheduler else "dags test",
                     "wall_s": round(pipeline_wall, 1), "audio_s_per_wall_s": round(pipeline_rate, 3),
                     "task_instances": len(rows), "tasks": tasks, **timing},
        "packing_in_the_dag": packing,
        "engine_alone": {"wall_s": round(engine_wall, 1), "audio_s_per_wall_s": round(engine_rate, 3)},
        "naive": {"files": len(sample), "audio_s": round(sample_audio, 1), "wall_s": round(naive_wall, 1),
                  "audio_s_per_wall_s": round(naive_rate, 3), "model_load_s": round(naive_load, 2)},
        "pipeline_over_engine": round(pipeline_rate / engine_rate, 3),
        "pipeline_over_naive": round(pipeline_rate / naive_rate, 3),
        "wer_pipeline": round(wer([by_key[k] for k in keys], [texts[k] for k in keys]), 4),
        "wer_pipeline_on_naive_files": round(wer([by_key[k] for k in sample], [texts[k] for k in sample]), 4),
        "wer_naive": round(wer([by_key[k] for k in sample], naive_texts), 4),
    }
    print_report(report, args.json)


if __name__ == "__main__":
    main()
