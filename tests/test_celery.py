"""The distributed path: CeleryExecutor on PostgreSQL (metadata) and Redis (broker) servers the tests start.

Starts the Airflow components as separate processes (api-server, scheduler,
dag-processor, a Celery worker on the default queue and one on the gpu queue,
each with its own hostname), sets pools and connections up from the same
include/airflow/ files as the compose stack, triggers transcribe_daily through
the REST API, and reads from the task_instance table which worker ran each task.
Run with ``pytest -m celery`` (or ``make test-celery``).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import sqlite3
import string
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import psycopg2
import pytest
import redis
from services import free_port, throwaway_database

from asr_tasks.config import PROJECT_ROOT, Settings

DAY = "2026-11-27"
RUN_ID = "celery_test_run"
BIN = Path(sys.executable).parent
TESTS = Path(__file__).parent
DATA = TESTS / "data"
INCLUDE = PROJECT_ROOT / "include" / "airflow"
SETTINGS = Settings()
WORKERS = {"worker-default": SETTINGS.airflow.default_queue, "worker-gpu": SETTINGS.airflow.gpu_queue}
ADMIN = "admin"


@dataclass
class Component:
    """One Airflow process, in its own process group so everything it forks is stopped with it."""

    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    def tail(self, chars: int = 3000) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return f"--- {self.name} (exit {self.proc.poll()}) ---\n{text[-chars:]}"

    def signal(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)


def stop_all(components: list[Component], grace: float = 30.0) -> None:
    """SIGTERM every group at once (Celery workers shut down warm), SIGKILL what is left after ``grace``."""
    for c in components:
        c.signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    for c in components:
        with contextlib.suppress(subprocess.TimeoutExpired):
            c.proc.wait(max(0.1, deadline - time.monotonic()))
    for c in components:
        c.signal(signal.SIGKILL)  # stragglers of the group, e.g. forked task runners
        c.proc.wait(10)


@pytest.fixture
def metadata_db(postgres_server: str) -> Iterator[str]:
    """A throw-away PostgreSQL database for Airflow's metadata and Celery's results; yields its URL."""
    with throwaway_database(postgres_server, "asr_celery") as url:
        yield url


@pytest.fixture
def broker_url(redis_server: str) -> Iterator[str]:
    """Database 1 of the test Redis, for the broker: empty when a test starts, emptied when it ends (a killed
    worker leaves its unacknowledged messages behind)."""
    broker = redis.Redis.from_url(f"{redis_server}/1")
    assert broker.dbsize() == 0
    try:
        yield f"{redis_server}/1"
    finally:
        broker.flushdb()


def celery_env(tmp: Path, db: str, broker: str, api_port: int, model_dir: Path) -> dict[str, str]:
    """One Airflow installation on CeleryExecutor, configured like the compose stack; project state under ``tmp``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "ASR_"))}
    pg = db.split("://", 1)[1]
    env.update({
        "AIRFLOW_HOME": str(tmp / "airflow"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(PROJECT_ROOT / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(PROJECT_ROOT / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
        "AIRFLOW__CORE__HOSTNAME_CALLABLE": "celery_support.hostname",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{api_port}/execution/",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{ADMIN}:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(tmp / "passwords.json"),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"postgresql+psycopg2://{pg}",
        "AIRFLOW__CELERY__BROKER_URL": broker,
        "AIRFLOW__CELERY__RESULT_BACKEND": f"db+postgresql+psycopg2://{pg}",
        "AIRFLOW__OPERATORS__DEFAULT_QUEUE": SETTINGS.airflow.default_queue,
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(32),
        "AIRFLOW__API__SECRET_KEY": secrets.token_urlsafe(32),
        "PYTHONPATH": str(TESTS),
        "ASR_STORE_ROOT": str(tmp / "store"),
        "ASR_INDEX_PATH": str(tmp / "index.sqlite"),
        "ASR_LEDGER_URL": f"sqlite:///{tmp / 'ledger.sqlite'}",
        "ASR_WORK_DIR": str(tmp / "work"),
        "ASR_MODEL_DIR": str(model_dir),
        "ASR_TASK_RETRIES": "0",
        "ASR_SHARD_MAX_RECORDINGS": "1",  # two shards: the GPU worker can start before the second is preprocessed
        "HF_HUB_OFFLINE": "1",
    })
    return env


def cli(args: list[str], env: dict[str, str], timeout: int = 180) -> str:
    proc = subprocess.run(
        args, env={**env, "CELERY_TEST_HOSTNAME": "cli"}, capture_output=True, text=True, timeout=timeout,
        cwd=PROJECT_ROOT,
    )
    assert proc.returncode == 0, f"{' '.join(args)}:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}"
    return proc.stdout


def start(name: str, args: list[str], env: dict[str, str], logs: Path, log_name: str | None = None) -> Component:
    log = logs / f"{log_name or name}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            args, env={**env, "CELERY_TEST_HOSTNAME": name}, stdout=out, stderr=subprocess.STDOUT,
            cwd=PROJECT_ROOT, start_new_session=True,
        )
    return Component(name, proc, log)


class Api:
    """The api-server's public REST API, as an operator's script would use it."""

    def __init__(self, port: int, password: str) -> None:
        self.base = f"http://127.0.0.1:{port}"
        self.password = password
        self.token: str | None = None

    def _send(self, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode(errors="replace")

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
        if self.token is None:
            status, answer = self._send("POST", "/auth/token", {"username": ADMIN, "password": self.password})
            assert status == 201, f"login: {status} {answer}"
            self.token = answer["access_token"]
        return self._send(method, path, body)

    def up(self) -> bool:
        try:
            return self._send("GET", "/api/v2/monitor/health")[0] == 200
        except OSError:
            return False


def query(db: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    conn = psycopg2.connect(db)
    try:
        with conn.cursor() as cur:
            cur.execute(sql, params)
            return cur.fetchall()
    finally:
        conn.close()


def wait_for(what: str, check: Callable[[], Any], timeout: float, components: list[Component]) -> Any:
    """Poll ``check`` until it returns something truthy; fail early when a component died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        dead = [c for c in components if c.proc.poll() is not None]
        if dead:
            pytest.fail(f"{what}: {', '.join(c.name for c in dead)} exited\n" + "\n".join(c.tail() for c in dead))
        value = check()
        if value:
            return value
        time.sleep(1)
    pytest.fail(f"{what}: not within {timeout:.0f} s\n" + "\n".join(c.tail() for c in components))


def task_logs(airflow_home: Path, chars: int = 3000) -> str:
    logs = sorted((airflow_home / "logs").rglob("*.log")) if (airflow_home / "logs").exists() else []
    return "\n".join(f"--- {p.relative_to(airflow_home)}\n{p.read_text(errors='replace')[-chars:]}" for p in logs)


def render_connections(template: Path, values: dict[str, str]) -> str:
    """``${VAR}`` placeholders filled JSON-escaped, as the compose stack's airflow-init does."""
    escaped = {k: json.dumps(v)[1:-1] for k, v in values.items()}
    return string.Template(template.read_text(encoding="utf-8")).substitute(escaped)


def test_dag_routes_transcription_to_the_gpu_queue_and_the_rest_to_the_default_queue() -> None:
    """Both queue names come from the settings (here overridden through ASR_* variables)."""
    code = (
        "import json, runpy; dag = runpy.run_path('dags/transcribe_daily.py')['transcribe_daily']();"
        "print(json.dumps({t.task_id: [t.queue, t.pool] for t in dag.tasks}))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASR_")}
    env.update({"ASR_DEFAULT_QUEUE": "cpu-pool-a", "ASR_GPU_QUEUE": "a100"})
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=PROJECT_ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    tasks = json.loads(proc.stdout.strip().splitlines()[-1])
    assert tasks.pop("shard.transcribe") == ["a100", SETTINGS.airflow.gpu_pool]
    assert tasks and {queue for queue, _ in tasks.values()} == {"cpu-pool-a"}


@dataclass
class Cluster:
    """One CeleryExecutor installation: its components, REST API, metadata DB and environment."""

    env: dict[str, str]
    api: Api
    metadata_db: str
    logs: Path
    components: list[Component]

    def worker(self, name: str, concurrency: int, log_name: str | None = None) -> Component:
        """A Celery worker on the queue ``WORKERS`` gives ``name``, known to Airflow by that name."""
        worker = start(name, [
            str(BIN / "airflow"), "celery", "worker", "-q", WORKERS[name], "-c", str(concurrency),
            "-H", f"{name}@%h", "--skip-serve-logs", "--without-gossip", "--without-mingle",
        ], self.env, self.logs, log_name)
        self.components.append(worker)
        return worker

    def kill(self, component: Component) -> None:
        """SIGKILL the component and everything it forked, as when its machine dies."""
        component.signal(signal.SIGKILL)
        component.proc.wait(30)
        self.components.remove(component)

    def wait(self, what: str, check: Callable[[], Any], timeout: float) -> Any:
        return wait_for(what, check, timeout, self.components)


@contextlib.contextmanager
def cluster(tmp: Path, db: str, broker: str, model_dir: Path, gpu_concurrency: int = 1,
            env: dict[str, str] | None = None) -> Iterator[Cluster]:
    """The metadata DB migrated; api-server, scheduler, DAG processor, a default and a gpu worker started;
    pools and connections imported from the compose stack's files; transcribe_daily parsed. Stopped after."""
    api_port = free_port()
    environment = celery_env(tmp, db, broker, api_port, model_dir) | (env or {})
    airflow = str(BIN / "airflow")
    logs = tmp / "component-logs"
    logs.mkdir()
    password = secrets.token_urlsafe(16)
    (tmp / "passwords.json").write_text(json.dumps({ADMIN: password}))
    rendered = tmp / "connections.json"
    rendered.write_text(render_connections(
        INCLUDE / "connections.json",
        {"MINIO_ENDPOINT": "minio.example:9000", "MINIO_ASR_ACCESS_KEY": "asr", "MINIO_ASR_SECRET_KEY": 's3"cr\\t',
         "MINIO_SECURE": "false", "MINIO_CA_BUNDLE": ""},
    ))
    cli([airflow, "db", "migrate"], environment, timeout=300)
    running = Cluster(environment, Api(api_port, password), db, logs, [])
    try:
        running.components += [
            start("api-server", [airflow, "api-server", "-H", "127.0.0.1", "-p", str(api_port), "-w", "1"],
                  environment, logs),
            start("scheduler", [airflow, "scheduler"], environment, logs),
            start("dag-processor", [airflow, "dag-processor"], environment, logs),
        ]
        running.worker("worker-default", 2)
        running.worker("worker-gpu", gpu_concurrency)
        cli([airflow, "pools", "import", str(INCLUDE / "pools.json")], environment)
        cli([airflow, "connections", "import", "--overwrite", str(rendered)], environment)
        running.wait("api-server health", running.api.up, 180)
        running.wait("transcribe_daily parsed",
                     lambda: running.api.call("GET", "/api/v2/dags/transcribe_daily")[0] == 200, 180)
        yield running
    finally:
        stop_all(running.components)


def day_folder(tmp: Path, day: str) -> Path:
    folder = tmp / "store" / SETTINGS.storage.recordings_bucket / SETTINGS.storage.recordings_prefix
    folder = folder / day.replace("-", "/")
    folder.mkdir(parents=True)
    return folder


def corrupt_wav(path: Path) -> None:
    path.write_bytes(b"RIFF\x24\x08\x00\x00WAVEfmt " + os.urandom(2048))


@pytest.mark.celery
@pytest.mark.timeout(600)
def test_transcription_runs_on_the_gpu_worker_and_the_rest_on_the_default_worker(
    tmp_path: Path, metadata_db: str, broker_url: str, model_dir: Path, jfk: Path
) -> None:
    airflow, asr = str(BIN / "airflow"), str(BIN / "asr")
    started = time.monotonic()
    phases: dict[str, float] = {}

    def phase(name: str) -> None:
        phases[name] = time.monotonic() - started - sum(phases.values())

    day = day_folder(tmp_path, DAY)
    shutil.copy(jfk, day / "call_0001_jfk.flac")
    corrupt_wav(day / "call_0002_corrupt.wav")
    table = ""
    with cluster(tmp_path, metadata_db, broker_url, model_dir) as running:
        env, api = running.env, running.api
        phase("metadata DB, components up, pools and connections imported, DAG parsed")
        status, answer = api.call("POST", "/api/v2/dags/transcribe_daily/dagRuns",
                                  {"dag_run_id": RUN_ID, "logical_date": f"{DAY}T00:00:00Z"})
        assert status == 200, f"trigger: {status} {answer}"
        status, answer = api.call("PATCH", "/api/v2/dags/transcribe_daily", {"is_paused": False})
        assert status == 200, f"unpause: {status} {answer}"

        def finished() -> str | None:
            state = api.call("GET", f"/api/v2/dags/transcribe_daily/dagRuns/{RUN_ID}")[1]["state"]
            return state if state in ("success", "failed") else None

        state = running.wait("the DAG run", finished, 420)
        phase("DAG run")
        tis = query(
            metadata_db,
            "select task_id, map_index, state, queue, hostname, extract(epoch from end_date - start_date)"
            " from task_instance where dag_id = 'transcribe_daily' and run_id = %s"
            " order by start_date nulls last, task_id, map_index",
            RUN_ID,
        )
        table = "\n".join(f"{t:<20} {m:>3} {s:<8} {q:<8} {h:<15} {d or 0:5.1f} s" for t, m, s, q, h, d in tis)
        assert state == "success", f"{table}\n{task_logs(tmp_path / 'airflow')}"
    phase("shutdown")
    print("\n" + ", ".join(f"{k}: {v:.0f} s" for k, v in phases.items()) + f"; total {sum(phases.values()):.0f} s")
    print(f"{'task':<20} map {'state':<8} {'queue':<8} {'hostname':<15} duration\n{table}")

    ran = [(task, queue, host) for task, _, state, queue, host, _ in tis if state == "success"]
    assert {task for task, _, _ in ran} >= {"sense", "shard.preprocess", "plan_shards", "shard.transcribe",
                                            "index"}, table
    for task, queue, host in ran:
        expected = "worker-gpu" if task == "shard.transcribe" else "worker-default"
        assert (queue, host) == (WORKERS[expected], expected), table
    assert len([1 for task, *_ in ran if task == "shard.preprocess"]) == 2, table
    assert len([1 for task, *_ in ran if task == "shard.transcribe"]) == 2, table

    status_json = json.loads(cli([asr, "status", "--date", DAY, "--json"], env))
    states = {row["key"].rsplit("/", 1)[-1]: row["state"] for row in status_json["recordings"]}
    assert states == {"call_0001_jfk.flac": "indexed", "call_0002_corrupt.wav": "quarantined"}
    hits = json.loads(cli([asr, "search", "ask not what your country", "--json"], env))
    assert hits and hits[0]["key"].endswith("call_0001_jfk.flac")

    conn = json.loads(cli([airflow, "connections", "get", "asr_minio", "-o", "json"], env))[0]
    assert (conn["host"], conn["login"], conn["password"]) == ("minio.example:9000", "asr", 's3"cr\\t')
    assert conn["extra_dejson"] == {"secure": "false", "ca_bundle": ""}
    pools = json.loads((INCLUDE / "pools.json").read_text())
    assert query(metadata_db, "select slots from slot_pool where pool = %s", SETTINGS.airflow.gpu_pool) == [
        (pools[SETTINGS.airflow.gpu_pool]["slots"],)
    ]


BACKFILL_FROM, BACKFILL_DAYS = date(2026, 10, 5), 7
NIGHTLY_DAY, NIGHTLY_RUN = DAY, "nightly_during_backfill"
FINAL = {"indexed", "needs_review", "quarantined"}


def backfill_days() -> list[str]:
    return [(BACKFILL_FROM + timedelta(days=n)).isoformat() for n in range(BACKFILL_DAYS)]


def day_of_calls(folder: Path, day: str, jfk: Path, n: int, corrupt: bool = False) -> dict[str, str]:
    """A day of calls (JFK's speech, a stereo or a Mandarin clip, a corrupt one on some days); their final states."""
    stem = day.replace("-", "")
    expected = {f"call_{stem}_1.flac": "indexed"}
    shutil.copy(jfk, folder / f"call_{stem}_1.flac")
    other = DATA / ("zh/wenet_aishell-BAC009S0724W0121.wav" if n % 2 else "stereo_diarization.wav")
    shutil.copy(other, folder / f"call_{stem}_2{other.suffix}")
    expected[f"call_{stem}_2{other.suffix}"] = "final"
    if corrupt:
        corrupt_wav(folder / f"call_{stem}_3.wav")
        expected[f"call_{stem}_3.wav"] = "quarantined"
    return expected


def peak_overlap(intervals: list[tuple[float, float]]) -> int:
    """The most intervals open at one instant (one ending as another starts counts once)."""
    events = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals],
                    key=lambda e: (e[0], e[1]))
    peak = open_now = 0
    for _, step in events:
        open_now += step
        peak = max(peak, open_now)
    return peak


ALL_TRIES = (
    "select run_id, task_id, map_index, try_number, state, pool, hostname,"
    " extract(epoch from start_date)::float8, extract(epoch from end_date)::float8,"
    " extract(epoch from scheduled_dttm)::float8, extract(epoch from queued_dttm)::float8 from {table}"
    " where dag_id = 'transcribe_daily' and start_date is not null"
)


def overtaken(waiting: list[tuple[float, float]], others: list[float]) -> int:
    """How many of ``others`` (times they were queued) were queued while one of ``waiting`` (from its being
    scheduled until it was queued) waited for a slot."""
    return sum(1 for queued in others for ready, taken in waiting if ready < queued < taken)


@pytest.mark.celery
@pytest.mark.timeout(1200)
def test_a_backfill_survives_a_killed_gpu_worker_within_the_pool_and_leaves_the_nightly_run_its_share(
    tmp_path: Path, metadata_db: str, broker_url: str, model_dir: Path, jfk: Path, postgres_server: str
) -> None:
    """Seven days at most three at a time, a nightly run triggered during it, the gpu worker SIGKILLed in the
    middle of a transcription and started again: every call ends in one state, indexed once."""
    airflow, asr = str(BIN / "airflow"), str(BIN / "asr")
    expected: dict[str, dict[str, str]] = {}
    for n, day in enumerate(backfill_days()):
        expected[day] = day_of_calls(day_folder(tmp_path, day), day, jfk, n, corrupt=n == 2)
    expected[NIGHTLY_DAY] = day_of_calls(day_folder(tmp_path, NIGHTLY_DAY), NIGHTLY_DAY, jfk, 0)
    slots = json.loads((INCLUDE / "pools.json").read_text())[SETTINGS.airflow.gpu_pool]["slots"]
    heartbeat_timeout = 30
    faults = {
        "ASR_TASK_RETRIES": "2",
        "ASR_RETRY_DELAY_SECONDS": "1",
        # a task whose worker died is failed (and retried) after this long without a heartbeat
        "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": str(heartbeat_timeout),
        "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "5",
        # a message the dead worker had taken but not started is queued again after this long
        "AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT": "120",
    }
    with (
        throwaway_database(postgres_server, "asr_backfill_ledger") as ledger_url,
        cluster(tmp_path, metadata_db, broker_url, model_dir, gpu_concurrency=slots + 1,  # the pool must bound it
                env={**faults, "ASR_LEDGER_URL": ledger_url}) as running,
    ):
        api = running.api
        assert api.call("PATCH", "/api/v2/dags/transcribe_daily", {"is_paused": False})[0] == 200
        days = backfill_days()
        created = time.time()
        cli([airflow, "backfill", "create", "--dag-id", "transcribe_daily", "--from-date", days[0],
             "--to-date", days[-1], "--max-active-runs", "3"], running.env)

        def backfill_runs(state: str | None = None) -> list[tuple[Any, ...]]:
            return query(metadata_db, "select run_id, state, extract(epoch from start_date)::float8,"
                         " extract(epoch from end_date)::float8 from dag_run where dag_id = 'transcribe_daily'"
                         " and run_type = 'backfill'" + (" and state = %s" if state else ""),
                         *([state] if state else []))

        def transcribing() -> list[tuple[Any, ...]]:
            return query(metadata_db, "select ti.run_id, ti.map_index, ti.try_number from task_instance ti"
                         " join dag_run dr on dr.dag_id = ti.dag_id and dr.run_id = ti.run_id"
                         " where ti.task_id = 'shard.transcribe' and ti.state = 'running'"
                         " and dr.run_type = 'backfill'")

        def nightly_state() -> str | None:
            state = api.call("GET", f"/api/v2/dags/transcribe_daily/dagRuns/{NIGHTLY_RUN}")[1]["state"]
            return state if state in ("success", "failed") else None

        # The nightly run starts once the backfill holds the gpu pool, and ends before the fault.
        running.wait("the backfill's first transcription", transcribing, 420)
        status, answer = api.call("POST", "/api/v2/dags/transcribe_daily/dagRuns",
                                  {"dag_run_id": NIGHTLY_RUN, "logical_date": f"{NIGHTLY_DAY}T00:00:00Z"})
        assert status == 200, f"trigger: {status} {answer}"
        running.wait("the nightly run", nightly_state, 420)
        assert len(backfill_runs("success")) < len(days), "the backfill ended before the fault"

        victim = running.wait("a backfill transcription in flight", transcribing, 300)[0]
        gpu = next(c for c in running.components if c.name == "worker-gpu")
        running.kill(gpu)
        killed_at = time.time()
        time.sleep(5)
        running.worker("worker-gpu", slots + 1, log_name="worker-gpu-restarted")

        def finished() -> bool:
            runs = backfill_runs()
            return len(runs) == len(days) and all(r[1] in ("success", "failed") for r in runs)

        running.wait("the backfill", finished, 900)
        runs = backfill_runs()
        nightly = query(metadata_db, "select state, extract(epoch from start_date)::float8, extract(epoch from end_date)::float8"
                        " from dag_run where run_id = %s", NIGHTLY_RUN)[0]
        tries = query(metadata_db, ALL_TRIES.format(table="task_instance"))
        tries += query(metadata_db, ALL_TRIES.format(table="task_instance_history"))
        assert {r[1] for r in runs} == {"success"} and nightly[0] == "success", (
            f"{runs}\n{nightly}\n{task_logs(tmp_path / 'airflow')}")
        progress = json.loads(cli([asr, "progress", "--from", days[0], "--to", days[-1], "--by", "day", "--json"],
                                  running.env))
        ledger = query(ledger_url, "select call_date, key, state, audio_seconds from recording_ledger")
        hits = json.loads(cli([asr, "search", "ask not what your country", "--limit", "50", "--json"], running.env))

    # Every call of every day in one final state, the one expected where it is known.
    got: dict[str, dict[str, str]] = {}
    for call_date, key, state, _ in ledger:
        got.setdefault(call_date, {})[key.rsplit("/", 1)[-1]] = state
    assert set(got) == set(expected)
    for day, calls in expected.items():
        assert set(got[day]) == set(calls), day
        for name, state in calls.items():
            assert got[day][name] == state if state != "final" else got[day][name] in FINAL, (day, name, got[day])
    assert [p["period"] for p in progress["periods"]] == days
    assert all(p["share_done"] == 1.0 for p in progress["periods"]), progress

    # Indexed once: one document per indexed call, its segments once in the table and once in the full text.
    index = sqlite3.connect(tmp_path / "index.sqlite")
    indexed = sorted(k.rsplit("/", 1)[-1] for (k,) in index.execute("select key from recordings where state = 'indexed'"))
    assert indexed == sorted(n for calls in got.values() for n, s in calls.items() if s == "indexed")
    segments = index.execute("select count(*), count(distinct recording_id || ':' || seq) from segments").fetchone()
    assert segments[0] == segments[1] == index.execute("select sum(segments) from recordings").fetchone()[0]
    assert index.execute("select count(*) from segments_fts").fetchone()[0] == segments[0]
    assert sorted(h["key"].rsplit("/", 1)[-1] for h in hits) == sorted(
        n for calls in expected.values() for n in calls if n.endswith("_1.flac"))

    # The pool: never more transcriptions at once than its slots, though the gpu worker could take one more.
    gpu_tries = [(t[7], t[8] or time.time()) for t in tries if t[5] == SETTINGS.airflow.gpu_pool]
    peak = peak_overlap(gpu_tries)
    assert 1 <= peak <= slots, gpu_tries

    # The killed transcription failed without its worker and its retry succeeded on the restarted one.
    run_id, map_index, try_number = victim
    victim_tries = sorted((t[3], t[4], t[6], t[7], t[8]) for t in tries
                          if (t[0], t[1], t[2]) == (run_id, "shard.transcribe", map_index))
    assert [t[1] for t in victim_tries] == ["failed", "success"], victim_tries
    assert victim_tries[0][0] == try_number and victim_tries[1][2] == "worker-gpu"
    killed_try, retry = victim_tries
    assert retry[3] > killed_at

    # The nightly run went ahead: no backfill transcription took a pool slot while one of its own waited for it.
    backfill_end = max(r[3] for r in runs)
    gpu_waits = [(t[0], t[9], t[10]) for t in tries if t[5] == SETTINGS.airflow.gpu_pool]
    nightly_waits = [(ready, taken) for run, ready, taken in gpu_waits if run == NIGHTLY_RUN]
    backfill_queued = [taken for run, _, taken in gpu_waits if run != NIGHTLY_RUN]
    assert nightly_waits and overtaken(nightly_waits, backfill_queued) == 0, (nightly_waits, gpu_waits)
    assert nightly[2] < backfill_end, (nightly, runs)

    backfill_audio = sum(a or 0.0 for d, _, _, a in ledger if d in days)
    wall = backfill_end - created
    busy = sum(end - start for start, end in gpu_tries)
    figures = {
        "days": len(days), "recordings": sum(len(expected[d]) for d in days), "max_active_runs": 3,
        "wall_seconds": round(wall, 1), "audio_seconds": round(backfill_audio, 1),
        "audio_hours_per_wall_hour": round(backfill_audio / wall, 3),
        "gpu_pool_slots": slots, "gpu_worker_concurrency": slots + 1, "gpu_pool_peak": peak,
        "gpu_pool_busy_share": round(busy / (slots * wall), 3),
        "nightly_run_seconds": round(nightly[2] - nightly[1], 1),
        "nightly_longest_wait_for_a_gpu_slot_seconds": round(max(taken - ready for ready, taken in nightly_waits), 1),
        "nightly_ended_before_backfill_by_seconds": round(backfill_end - nightly[2], 1),
        "backfill_run_seconds_median": round(sorted(r[3] - r[2] for r in runs)[len(runs) // 2], 1),
        "killed": {"heartbeat_timeout_seconds": heartbeat_timeout,
                   "work_lost_seconds": round(killed_at - killed_try[3], 1),
                   "failed_after_kill_seconds": round(killed_try[4] - killed_at, 1),
                   "retry_started_after_kill_seconds": round(retry[3] - killed_at, 1)},
    }
    artefacts = PROJECT_ROOT / "var" / "test-artefacts"
    artefacts.mkdir(parents=True, exist_ok=True)
    (artefacts / "celery-backfill.json").write_text(json.dumps(figures, indent=2) + "\n")
    print("\n" + json.dumps(figures, indent=2))
