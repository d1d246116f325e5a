"""The distributed path: CeleryExecutor on PostgreSQL (metadata) and Redis (broker) servers the tests start.

Starts the Airflow components as separate processes (api-server, scheduler,
dag-processor, a Celery worker on the default queue and one on the gpu queue,
each with its own hostname), sets pools and connections up from the same
include/airflow/ files as the compose stack, triggers transcribe_daily through
the REST API, and reads from the task_instance table which worker ran each task.
Run with ``pytest -m celery`` (or ``make test-celery``).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import string
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg2
import pytest
import redis
from services import free_port

from asr_tasks.config import PROJECT_ROOT, Settings

DAY = "2026-11-27"
RUN_ID = "celery_test_run"
BIN = Path(sys.executable).parent
TESTS = Path(__file__).parent
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
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass


def stop_all(components: list[Component], grace: float = 30.0) -> None:
    """SIGTERM every group at once (Celery workers shut down warm), SIGKILL what is left after ``grace``."""
    for c in components:
        c.signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    for c in components:
        try:
            c.proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for c in components:
        c.signal(signal.SIGKILL)  # stragglers of the group, e.g. forked task runners
        c.proc.wait(10)


@pytest.fixture
def metadata_db(postgres_server: str) -> Iterator[str]:
    """A throw-away PostgreSQL database for Airflow's metadata and Celery's results; yields its URL."""
    name = f"asr_celery_{secrets.token_hex(4)}"
    admin = psycopg2.connect(postgres_server)
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f'CREATE DATABASE "{name}"')
    try:
        yield postgres_server.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with admin.cursor() as cur:
            cur.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


@pytest.fixture
def broker_url(redis_server: str) -> str:
    """Database 1 of the test Redis, for the broker."""
    assert redis.Redis.from_url(f"{redis_server}/1").dbsize() == 0
    return f"{redis_server}/1"


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


def start(name: str, args: list[str], env: dict[str, str], logs: Path) -> Component:
    log = logs / f"{name}.log"
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


@pytest.mark.celery
@pytest.mark.timeout(600)
def test_transcription_runs_on_the_gpu_worker_and_the_rest_on_the_default_worker(
    tmp_path: Path, metadata_db: str, broker_url: str, model_dir: Path, jfk: Path
) -> None:
    started = time.monotonic()
    phases: dict[str, float] = {}

    def phase(name: str) -> None:
        phases[name] = time.monotonic() - started - sum(phases.values())

    api_port = free_port()
    env = celery_env(tmp_path, metadata_db, broker_url, api_port, model_dir)
    airflow, asr = str(BIN / "airflow"), str(BIN / "asr")
    logs = tmp_path / "component-logs"
    logs.mkdir()
    password = secrets.token_urlsafe(16)
    (tmp_path / "passwords.json").write_text(json.dumps({ADMIN: password}))

    day = tmp_path / "store" / SETTINGS.storage.recordings_bucket / SETTINGS.storage.recordings_prefix / DAY.replace("-", "/")
    day.mkdir(parents=True)
    shutil.copy(jfk, day / "call_0001_jfk.flac")
    (day / "call_0002_corrupt.wav").write_bytes(b"RIFF\x24\x08\x00\x00WAVEfmt " + os.urandom(2048))
    rendered = tmp_path / "connections.json"
    rendered.write_text(render_connections(
        INCLUDE / "connections.json",
        {"MINIO_ENDPOINT": "minio.example:9000", "MINIO_ASR_ACCESS_KEY": "asr", "MINIO_ASR_SECRET_KEY": 's3"cr\\t',
         "MINIO_SECURE": "false", "MINIO_CA_BUNDLE": ""},
    ))

    cli([airflow, "db", "migrate"], env, timeout=300)
    phase("metadata DB")
    components: list[Component] = []
    api = Api(api_port, password)
    table = ""
    try:
        components += [
            start("api-server", [airflow, "api-server", "-H", "127.0.0.1", "-p", str(api_port), "-w", "1"], env, logs),
            start("scheduler", [airflow, "scheduler"], env, logs),
            start("dag-processor", [airflow, "dag-processor"], env, logs),
        ]
        for name, queue in WORKERS.items():
            components.append(start(name, [
                airflow, "celery", "worker", "-q", queue, "-c", "2" if queue == SETTINGS.airflow.default_queue else "1",
                "-H", f"{name}@%h", "--skip-serve-logs", "--without-gossip", "--without-mingle",
            ], env, logs))
        cli([airflow, "pools", "import", str(INCLUDE / "pools.json")], env)
        cli([airflow, "connections", "import", "--overwrite", str(rendered)], env)
        wait_for("api-server health", api.up, 180, components)
        wait_for("transcribe_daily parsed", lambda: api.call("GET", "/api/v2/dags/transcribe_daily")[0] == 200,
                 180, components)
        phase("components up, pools and connections imported, DAG parsed")

        status, answer = api.call("POST", "/api/v2/dags/transcribe_daily/dagRuns",
                                  {"dag_run_id": RUN_ID, "logical_date": f"{DAY}T00:00:00Z"})
        assert status == 200, f"trigger: {status} {answer}"
        status, answer = api.call("PATCH", "/api/v2/dags/transcribe_daily", {"is_paused": False})
        assert status == 200, f"unpause: {status} {answer}"

        def finished() -> str | None:
            state = api.call("GET", f"/api/v2/dags/transcribe_daily/dagRuns/{RUN_ID}")[1]["state"]
            return state if state in ("success", "failed") else None

        state = wait_for("the DAG run", finished, 420, components)
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
    finally:
        stop_all(components)
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
