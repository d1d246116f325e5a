"""Crash safety and exactly-once processing.

A transcription task killed with SIGKILL in the middle of its shard, then retried,
leaves every recording in exactly one final state, indexes nothing twice and
keeps ledger and bucket in agreement. Real Airflow runs over consecutive days
(``airflow dags test`` per logical date, with MinIO reached through an Airflow
connection) process each day's prefix once, and a second run of a day redoes
nothing.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import date, datetime
from pathlib import Path

import pytest
from conftest import S3Server
from test_dag import airflow_env

from asr_tasks import PIPELINE_VERSION
from asr_tasks.config import PROJECT_ROOT, Settings
from asr_tasks.index.sqlite import SqliteIndex
from asr_tasks.intake.demo_corpus import JFK
from asr_tasks.intake.stores import MinioStore, ObjectStore, open_store
from asr_tasks.pipeline.gate import gate_shard
from asr_tasks.pipeline.index import index_results
from asr_tasks.pipeline.preprocess import preprocess
from asr_tasks.pipeline.results import preprocessed
from asr_tasks.pipeline.sense import sense
from asr_tasks.pipeline.transcribe import load_engine, transcribe_shard, unit_seconds
from asr_tasks.records.ledger import Ledger, open_ledger
from asr_tasks.states import FINAL_STATES
from asr_tasks.version import model_tag

DAY = date(2026, 11, 20)
PREFIX = "calls/2026/11/20/"

CHILD = """
import json, sys
from asr_tasks.config import get_settings
from asr_tasks.intake.stores import open_store
from asr_tasks.pipeline.transcribe import transcribe_shard
from asr_tasks.version import RecordingVersion

settings = get_settings()
transcribe_shard([RecordingVersion.at(p) for p in json.loads(sys.argv[1])], open_store(settings.storage), settings)
"""


def as_env(settings: Settings) -> dict[str, str]:
    """Every setting as an ASR_* variable: the child process sees exactly these settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASR_")}
    for name, value in (item for section in settings.as_dict().values() for item in section.items()):
        text = json.dumps(value) if isinstance(value, (dict, list)) else "null" if value is None else str(value)
        env[f"ASR_{name.upper()}"] = text.lower() if isinstance(value, bool) else text
    return env | {"HF_HUB_OFFLINE": "1"}


def recording_artefacts(store: ObjectStore, settings: Settings) -> dict[str, object]:
    """Every per-recording artefact (v<pipeline>/<day>/<recording_id>/...) and when it was written."""
    return {k.key: k.last_modified for k in store.list_keys(settings.storage.artefacts_bucket, f"v{PIPELINE_VERSION}/")
            if k.key.count("/") >= 3}


def stamp(store: ObjectStore, settings: Settings, key: str) -> tuple[str, object]:
    info = store.stat(settings.storage.artefacts_bucket, key)
    assert info is not None, key
    return info.etag, info.last_modified


def transcripts(store: ObjectStore, settings: Settings) -> list[str]:
    return [k.key for k in store.list_keys(settings.storage.artefacts_bucket, f"v{PIPELINE_VERSION}/{DAY}/")
            if "/transcript." in k.key]


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first words of jfk.flac ("And so, my fellow Americans"): real speech, quick to transcribe."""
    path = tmp_path_factory.mktemp("clip") / "clip.flac"
    subprocess.run(["ffmpeg", "-v", "error", "-i", str(JFK), "-t", "3.5", str(path)], check=True)
    return path


@pytest.fixture(scope="module")
def long_call(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """jfk.flac 15 times over (165 s, about 135 s of speech): more than one engine work unit at batch size 1."""
    path = tmp_path_factory.mktemp("long") / "long.flac"
    subprocess.run(["ffmpeg", "-v", "error", "-stream_loop", "14", "-i", str(JFK), str(path)],
                   check=True)
    return path


@pytest.fixture(params=[pytest.param("local", marks=pytest.mark.slow), pytest.param("minio", marks=pytest.mark.minio)])
def conf(request: pytest.FixtureRequest, settings: Settings) -> Settings:
    """The crash on MinIO (the test server or MINIO_ENDPOINT) by default; on the local folder with -m slow."""
    fast = settings.override(beam_size=1, batch_size=1, language="en", checkpoint_speech_seconds=0)
    if request.param == "local":
        return fast
    s3: S3Server = request.getfixturevalue("s3_server")
    suffix = os.urandom(5).hex()
    return s3.settings(fast, recordings_bucket=f"rec-{suffix}", artefacts_bucket=f"art-{suffix}")


def test_shard_killed_mid_way_then_retried(conf: Settings, model_dir: Path, long_call: Path, jfk: Path) -> None:
    """A shard is transcribed in work units of ``unit_seconds`` of speech, each written when done.

    The first recording fills a unit of its own; the task is killed once its
    transcript is written, while the unit with the other two is in the engine.
    """
    store = open_store(conf.storage)
    bucket = conf.storage.recordings_bucket
    store.put_file(bucket, PREFIX + "c1.flac", long_call)
    for name in ("c2.flac", "c3.flac"):
        store.put_file(bucket, PREFIX + name, jfk)
    store.put_bytes(bucket, PREFIX + "c4.wav", b"RIFF, but not really" * 50)
    store.put_bytes(bucket, PREFIX + "c1.json", json.dumps({"agent_id": "AG-1"}).encode())
    store.put_bytes(bucket, PREFIX + "_READY", b"")
    recordings = [o.key for o in store.list(bucket, PREFIX) if not o.key.endswith((".json", "_READY"))]

    results = [preprocess(r, store, conf) for r in sense(store, conf, DAY)]
    shard = preprocessed(results)
    assert len(shard) == 3 and results[0].key.endswith("c1.flac")
    unit = unit_seconds(load_engine(conf), conf)
    assert results[0].speech_seconds >= unit > results[1].speech_seconds + results[2].speech_seconds

    # The task's process dies (OOM killer, node loss) once the first transcript is written.
    child = subprocess.Popen([sys.executable, "-c", CHILD, json.dumps([v.prefix for v in shard])], env=as_env(conf), cwd=PROJECT_ROOT,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    while not store.exists(conf.storage.artefacts_bucket, shard[0].transcript(model_tag(conf.asr))):
        assert child.poll() is None, child.stderr.read().decode()[-3000:] if child.stderr else ""
        assert time.monotonic() < deadline, "no transcript written in time"
        time.sleep(0.1)
    os.kill(child.pid, signal.SIGKILL)
    assert child.wait(30) == -signal.SIGKILL
    survived = transcripts(store, conf)
    assert 1 <= len(survived) < 3
    written = {key: stamp(store, conf, key) for key in survived}
    ledger = open_ledger(conf.ledger)
    counts = ledger.counts(str(DAY))  # may lag one transcript behind: the kill can fall between the two writes
    assert counts.get("transcribed", 0) in (len(survived) - 1, len(survived))
    assert counts.get("transcribed", 0) + counts["preprocessed"] == 3 and counts["quarantined"] == 1

    # Airflow retries the task: what was written is reused, the rest is transcribed.
    assert transcribe_shard(shard, store, conf)["recordings"] == 3 - len(survived)
    assert {key: stamp(store, conf, key) for key in survived} == written
    assert len(transcripts(store, conf)) == 3

    index = SqliteIndex(conf.index.path("index_path"))
    gate_shard(results, store, conf)
    first = index_results(results, store, index, conf)
    assert first["quarantined"] == 1 and first.get("indexed", 0) + first.get("needs_review", 0) == 3
    assert {r["key"]: r["state"] for r in ledger.rows(str(DAY))}[PREFIX + "c2.flac"] == "indexed"
    assert index_results(results, store, index, conf) == {"unchanged": 4}  # the index task retried as well

    rows = ledger.rows(str(DAY))
    assert sorted(r["key"] for r in rows) == sorted(recordings)  # the ledger is the bucket, one row per object
    assert all(r["state"] in FINAL_STATES for r in rows)
    assert sum(ledger.counts(str(DAY)).values()) == len(recordings) == 4
    indexed = index.recordings(str(DAY))
    assert sorted(r["key"] for r in indexed) == sorted(recordings)  # nothing indexed twice
    assert {r["key"]: r["state"] for r in indexed} == {r["key"]: r["state"] for r in rows}
    with sqlite3.connect(conf.index.path("index_path")) as db:
        segments = db.execute("SELECT count(*), count(DISTINCT recording_id || '/' || seq) FROM segments").fetchone()
        fts = db.execute("SELECT count(*) FROM segments_fts").fetchone()[0]
    assert segments[0] == segments[1] == fts == sum(r["segments"] or 0 for r in rows) > 0
    print(f"\ncrash test ({conf.storage.store_backend}): {len(recordings)} objects, killed after {len(survived)} of 3 "
          f"transcripts, retry transcribed {3 - len(survived)}; ledger {ledger.counts(str(DAY))}; "
          f"{segments[0]} segments indexed once each")


RUN_CLI = """
import json, sys, time
from datetime import datetime, timezone
from airflow.__main__ import main

for argv in json.loads(sys.argv[1]):
    time.sleep(1.1)  # whole seconds apart: S3 and the ledger keep second resolution
    print("== start " + datetime.now(timezone.utc).isoformat() + " airflow " + " ".join(argv), flush=True)
    sys.argv = ["airflow", *argv]
    main()
"""
DAYS = ["2026-11-20", "2026-11-21"]


@pytest.mark.e2e
@pytest.mark.minio
def test_consecutive_days_are_each_processed_once(
    tmp_path: Path, model_dir: Path, clip: Path, s3_server: S3Server
) -> None:
    """Two logical dates, the first one again, then a backfill plan: one Airflow process, as ``airflow ...`` runs."""
    suffix = os.urandom(5).hex()
    buckets = {"ASR_RECORDINGS_BUCKET": f"rec-{suffix}", "ASR_ARTEFACTS_BUCKET": f"art-{suffix}"}
    conf = s3_server.settings(Settings(), recordings_bucket=buckets["ASR_RECORDINGS_BUCKET"],
                              artefacts_bucket=buckets["ASR_ARTEFACTS_BUCKET"], work_dir=str(tmp_path / "work"))
    store = open_store(conf.storage)
    assert isinstance(store, MinioStore)
    for day in DAYS:
        prefix = f"calls/{day.replace('-', '/')}/"
        store.put_file(conf.storage.recordings_bucket, prefix + "speech.flac", clip)
        store.put_bytes(conf.storage.recordings_bucket, prefix + "broken.wav", b"not audio at all" * 40)
        store.put_bytes(conf.storage.recordings_bucket, prefix + "_READY", b"")

    # The tasks reach MinIO only through the Airflow connection: the settings point nowhere.
    host, port = s3_server.endpoint.rsplit(":", 1)
    env = airflow_env(tmp_path) | buckets | {
        "ASR_STORE_BACKEND": "minio", "ASR_MINIO_ENDPOINT": "nowhere.invalid:9", "ASR_STORE_RETRIES": "0",
        "ASR_READY_CHECK": "marker", "ASR_MODEL_DIR": str(model_dir), "ASR_BEAM_SIZE": "1",
        "AIRFLOW_CONN_ASR_MINIO": json.dumps({
            "conn_type": "aws", "host": host, "port": int(port), "login": s3_server.access_key,
            "password": s3_server.secret_key, "extra": {"secure": s3_server.secure, "ca_bundle": s3_server.ca_bundle},
        }),
    }
    runs = [["db", "migrate"], ["pools", "set", "gpu", "1", "ASR transcription"],
            *(["dags", "test", "transcribe_daily", day] for day in DAYS),
            ["dags", "test", "transcribe_daily", DAYS[0]],
            ["backfill", "create", "--dag-id", "transcribe_daily", "--from-date", "2026-11-19",
             "--to-date", "2026-11-22", "--max-active-runs", "2", "--dry-run"]]
    proc = subprocess.run([sys.executable, "-c", RUN_CLI, json.dumps(runs)], env=env, cwd=PROJECT_ROOT,
                          capture_output=True, text=True, timeout=900)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-6000:]
    assert len(re.findall(r"DagRun Finished: dag_id=transcribe_daily, .*state=success", log)) == 3
    assert log.count("_READY exists") == 3

    ledger = Ledger(env["ASR_LEDGER_URL"])
    for day in DAYS:
        rows = ledger.rows(day)
        assert {r["key"].rsplit("/", 1)[-1]: r["state"] for r in rows} == {
            "speech.flac": "indexed", "broken.wav": "quarantined"}
        assert all(r["key"].startswith(f"calls/{day.replace('-', '/')}/") for r in rows)
        made = [k.key for k in store.list_keys(conf.storage.artefacts_bucket, f"v{PIPELINE_VERSION}/{day}/")]
        assert sum("/transcript." in k for k in made) == 1 and sum(k.endswith("/quarantine.json") for k in made) == 1

    # The first day's second run wrote no recording's artefact and changed no ledger row.
    rerun = datetime.fromisoformat(re.findall(r"== start (\S+) airflow dags test", log)[-1]).replace(microsecond=0)
    assert max(recording_artefacts(store, conf).values()) < rerun
    assert max(datetime.fromisoformat(r["updated_at"]) for r in ledger.rows()) < rerun

    # A backfill over the week plans only the days that have no run yet.
    planned = proc.stdout.split("Runs to be attempted", 1)[1]
    assert "2026-11-19" in planned and "2026-11-22" in planned
    assert "2026-11-20" not in planned and "2026-11-21" not in planned
