"""`make standalone` for real: sized to the machine, every port on 127.0.0.1, stopped whole by one Ctrl-C or
`make standalone-stop`; and a two-day backfill of the daily DAG through it, started with `asr backfill` (which
refuses a DAG Airflow does not know yet, and a paused one)."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from datetime import date, timedelta
from pathlib import Path

import pytest

from asr_tasks.config import PROJECT_ROOT

BIN = Path(sys.executable).parent
DAYS = ("2026-11-20", "2026-11-21")
SCRIPT = PROJECT_ROOT / "include" / "airflow" / "standalone.py"


def test_make_standalone_runs_the_script_as_makes_own_child() -> None:
    for target, line in (("standalone", "exec .venv/bin/python include/airflow/standalone.py"),
                         ("standalone-stop", ".venv/bin/python include/airflow/standalone.py stop")):
        # as a user's make, not a sub-make of CI's (which would print the directories it enters and leaves)
        env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
        dry = subprocess.run(["make", "-n", "--no-print-directory", target], cwd=PROJECT_ROOT, env=env,
                             capture_output=True, text=True, timeout=60)
        assert dry.returncode == 0, dry.stderr
        assert dry.stdout.splitlines()[-1] == line


def test_the_makefiles_airflow_database_waits_for_another_processs_write(tmp_path: Path) -> None:
    """A scheduler, a DAG processor, tasks and `asr backfill` write one SQLite file at once: a write that waits
    longer than Python's default 5 s for another's still goes through."""
    import threading

    import sqlalchemy

    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    proc = subprocess.run(["make", "-s", "--no-print-directory", "--eval",
                           "print-conn: ; @echo $$AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "print-conn"],
                          cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    url = sqlalchemy.engine.make_url(proc.stdout.strip()).set(database=str(tmp_path / "airflow.db"))
    with sqlite3.connect(tmp_path / "airflow.db") as setup:
        setup.execute("PRAGMA journal_mode=WAL")
        setup.execute("CREATE TABLE runs (day TEXT)")
    holder = sqlite3.connect(tmp_path / "airflow.db", isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    release = threading.Timer(7.0, holder.execute, ("COMMIT",))
    release.start()
    try:
        with sqlalchemy.create_engine(url).begin() as conn:
            conn.execute(sqlalchemy.text("INSERT INTO runs VALUES ('2026-11-20')"))
    finally:
        release.join()
        holder.close()
    with sqlite3.connect(tmp_path / "airflow.db") as check:
        assert check.execute("SELECT day FROM runs").fetchall() == [("2026-11-20",)]


LOCKED_STDERR = ("Traceback (most recent call last):\n  File \"backfill.py\", line 803, in _create_runs\n"
                 "sqlalchemy.exc.OperationalError: (sqlite3.OperationalError) database is locked\n"
                 "[SQL: INSERT INTO dag_run (dag_id, queued_at) VALUES (?, ?)]\n"
                 "[parameters: ('transcribe_daily', '2026-12-02 13:44:55.767939')]\n"
                 "(Background on this error at: https://sqlalche.me/e/21/e3q8)\n")


def test_asr_backfill_reports_airflows_error_not_sqlalchemys_statement() -> None:
    from asr_tasks.cli.backfill import _said

    said = _said(subprocess.CompletedProcess(["airflow"], 1, "", LOCKED_STDERR))
    assert said == "sqlalchemy.exc.OperationalError: (sqlite3.OperationalError) database is locked"
    assert _said(subprocess.CompletedProcess(["airflow"], 1, "", "\nno such DAG\n")) == "no such DAG"
    assert _said(subprocess.CompletedProcess(["airflow"], 3, "", "")) == "exit 3"


@pytest.mark.parametrize("locked_times, attempts, code", [(2, 6, 0), (3, 3, 1)])
def test_asr_backfill_creates_again_after_sqlites_lock(monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str], locked_times: int,
                                                       attempts: int, code: int) -> None:
    """Airflow removes a backfill it could not finish for SQLite's lock so that it can be retried: asr retries it,
    and gives up after its attempts with Airflow's error; any other error is not retried."""
    from asr_tasks.cli import airflow_shell, backfill, main

    calls: list[tuple[str, ...]] = []

    def airflow(*args: str, **_: bool) -> subprocess.CompletedProcess[str]:
        calls.append(args)
        if args[:2] == ("dags", "details"):
            return subprocess.CompletedProcess(args, 0, '[{"dag_id": "transcribe_daily", "is_paused": "False"}]', "")
        if sum(call[:2] == ("backfill", "create") for call in calls) <= locked_times:
            return subprocess.CompletedProcess(args, 1, "", LOCKED_STDERR)
        return subprocess.CompletedProcess(args, 0, "Created backfill Dag run.\n", "")

    monkeypatch.setattr(airflow_shell, "run", airflow)
    monkeypatch.setattr(backfill.retry.random, "uniform", lambda low, high: 0.001)  # no real back-off in a test
    argv = ["backfill", "--from", DAYS[0], "--to", DAYS[-1], "--attempts", str(attempts)]
    assert main.main(argv) == code
    creates = [call for call in calls if call[:2] == ("backfill", "create")]
    assert len(creates) == min(locked_times + 1, attempts)
    out, err = capsys.readouterr()
    if code == 0:
        assert "backfill of transcribe_daily from 2026-11-20 to 2026-11-21 created" in out
        assert "Created backfill Dag run." not in out  # Airflow's log of each run: a line per day, left out
    else:
        assert err.strip().endswith("asr: airflow backfill create failed: sqlalchemy.exc.OperationalError: "
                                    "(sqlite3.OperationalError) database is locked")

    calls.clear()
    refused = "airflow.exceptions.AlreadyRunningBackfill: Another backfill is running"

    def refusing(*args: str, **_: bool) -> subprocess.CompletedProcess[str]:
        if args[0] == "dags":
            return airflow(*args)
        calls.append(args)
        return subprocess.CompletedProcess(args, 1, "", refused)

    monkeypatch.setattr(airflow_shell, "run", refusing)
    assert main.main(argv) == 1
    assert len(calls) == 2  # details, then one create
    err = capsys.readouterr().err
    assert "AlreadyRunningBackfill: Another backfill is running" in err and "/api/v2/backfills/ID/cancel" in err


def test_asr_backfill_unpauses_the_dag_only_once_the_backfill_is_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """A scheduler that had begun the runs of a half-made backfill would fail on the rows Airflow removes after
    SQLite's lock: the DAG stays paused while the backfill is created, and is unpaused after, never if it failed."""
    from asr_tasks.cli import airflow_shell, backfill, main

    calls: list[tuple[str, ...]] = []
    outcomes = iter([LOCKED_STDERR, ""])

    def airflow(*args: str, **_: bool) -> subprocess.CompletedProcess[str]:
        calls.append(args[:2])
        if args[:2] == ("dags", "details"):
            return subprocess.CompletedProcess(args, 0, '[{"dag_id": "transcribe_daily", "is_paused": "True"}]', "")
        if args[:2] == ("backfill", "create"):
            stderr = next(outcomes, "airflow.exceptions.AirflowException: no")
            return subprocess.CompletedProcess(args, 1 if stderr else 0, "", stderr)
        return subprocess.CompletedProcess(args, 0, "", "")

    monkeypatch.setattr(airflow_shell, "run", airflow)
    monkeypatch.setattr(backfill.retry.random, "uniform", lambda low, high: 0.001)
    argv = ["backfill", "--from", DAYS[0], "--to", DAYS[-1], "--unpause"]
    assert main.main(argv) == 0
    assert calls == [("dags", "details"), ("backfill", "create"), ("backfill", "create"), ("dags", "unpause")]
    calls.clear()
    assert main.main(argv) == 1  # the create fails: the DAG stays paused
    assert ("dags", "unpause") not in calls


@pytest.mark.parametrize("url, refused", [("sqlite:////srv/airflow.db?timeout=60", True),
                                         ("postgresql+psycopg2://airflow@db/airflow", False), (None, True)])
def test_asr_backfill_makes_at_most_ten_years_at_once_on_sqlite(monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str], url: str | None,
                                                                refused: bool) -> None:
    """Airflow's other processes wait while a backfill's runs are made on SQLite: longer than ten years is refused
    there, with the range that fits, before Airflow is asked anything but its database (Airflow's own default,
    SQLite, where the environment does not say)."""
    from asr_tasks.cli import airflow_shell, backfill, main

    calls: list[tuple[str, ...]] = []

    def airflow(*args: str, **_: bool) -> subprocess.CompletedProcess[str]:
        calls.append(args[:2])
        if args[:2] == ("config", "get-value"):
            return subprocess.CompletedProcess(args, 0, "sqlite:////root/airflow/airflow.db\n", "")
        if args[:2] == ("dags", "details"):
            return subprocess.CompletedProcess(args, 0, '[{"dag_id": "transcribe_daily", "is_paused": "False"}]', "")
        return subprocess.CompletedProcess(args, 0, "", "")

    if url is None:
        monkeypatch.delenv("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", raising=False)
    else:
        monkeypatch.setenv("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", url)
    monkeypatch.setattr(airflow_shell, "run", airflow)
    assert main.main(["backfill", "--from", "1990-01-01", "--to", "2015-12-31"]) == (2 if refused else 0)
    err = capsys.readouterr().err
    if refused:
        assert "9496 days in one backfill on SQLite" in err and "--from 1990-01-01 --to 2000-01-08" in err
        assert not {("dags", "details"), ("backfill", "create")} & set(calls)
    else:
        assert ("backfill", "create") in calls
    calls.clear()
    ten_years = (date(1990, 1, 1) + timedelta(days=backfill.SQLITE_MAX_DAYS - 1)).isoformat()
    assert main.main(["backfill", "--from", "1990-01-01", "--to", ten_years]) == 0  # ten years pass everywhere
    assert ("backfill", "create") in calls
    if refused:  # newest first: the range that fits ends where the backfill starts
        assert main.main(["backfill", "--from", "1990-01-01", "--to", "2015-12-31", "--backwards"]) == 2
        assert "--from 2005-12-24 --to 2015-12-31" in capsys.readouterr().err


def test_a_backfill_that_starts_after_today_is_refused_before_airflow(monkeypatch: pytest.MonkeyPatch,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    from asr_tasks.cli import airflow_shell, main

    monkeypatch.setattr(airflow_shell, "run", lambda *args, **_: pytest.fail(f"Airflow asked: {args}"))
    later = (date.today() + timedelta(days=30)).isoformat()
    for extra in ([], ["--dry-run"]):
        assert main.main(["backfill", "--from", later, "--to", later, *extra]) == 2
        assert f"asr: nothing to backfill: --from {later} is after today" in capsys.readouterr().err


# Airflow's dry run: a table with a row per run it would make (a day that has not begun, or has a run, has none)
DRY_RUN_TABLE = """Runs to be attempted:
+---------------------------+-----------------+------------------+
| logical_date              | interval_start  | interval_end     |
+===========================+=================+==================+
| 1990-01-01 00:00:00+00:00 |                 |                  |
+---------------------------+-----------------+------------------+
| 1990-01-03 00:00:00+00:00 |                 |                  |
+---------------------------+-----------------+------------------+
"""


def test_a_dry_run_says_what_the_real_backfill_would_do(monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """Airflow's dry run lists a row per run and nothing else: after it, the runs it would make of the days asked
    for, then what the real command would refuse (the SQLite cap, a paused DAG) or do; nothing made or unpaused."""
    from asr_tasks.cli import airflow_shell, main

    calls: list[tuple[str, ...]] = []

    def airflow(*args: str, **_: bool) -> subprocess.CompletedProcess[str]:
        calls.append(args[:2])
        if args[:2] == ("dags", "details"):
            return subprocess.CompletedProcess(args, 0, '[{"dag_id": "transcribe_daily", "is_paused": "True"}]', "")
        return subprocess.CompletedProcess(args, 0, DRY_RUN_TABLE, "")

    monkeypatch.setattr(airflow_shell, "run", airflow)
    monkeypatch.setenv("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "sqlite:////srv/airflow.db?timeout=60")
    assert main.main(["backfill", "--from", "1990-01-01", "--to", "2015-12-31", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(DRY_RUN_TABLE)  # Airflow's list first, then one line
    assert out.removeprefix(DRY_RUN_TABLE) == (
        "dry run, nothing made: Airflow would make 2 runs for the 9496 days asked for (the other 9494 have not "
        "begun yet or have a run already); the real command is refused on SQLite, at most 3660 days at once "
        "(--from 1990-01-01 --to 2000-01-08); without --unpause the real command is refused: transcribe_daily is "
        "paused\n")
    assert calls == [("dags", "details"), ("backfill", "create")]
    calls.clear()
    monkeypatch.setenv("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "postgresql+psycopg2://airflow@db/airflow")
    assert main.main(["backfill", "--from", "1990-01-01", "--to", "1990-01-02", "--dry-run", "--unpause"]) == 0
    out = capsys.readouterr().out.removeprefix(DRY_RUN_TABLE)
    assert out == ("dry run, nothing made: Airflow would make 2 runs for the 2 days asked for; the real command "
                   "unpauses transcribe_daily once its runs are made\n")
    assert ("dags", "unpause") not in calls

def test_asr_backfill_creates_a_year_while_another_process_commits(tmp_path: Path) -> None:
    """The scheduler and the DAG processor commit to SQLite all the time; Airflow makes each backfill run in a
    transaction that reads before it writes, whose first write fails at once after another's commit. A year's
    runs are made whole on the first attempt: each transaction takes the write lock first and waits for it."""
    import threading

    from test_dag import airflow_env

    env = {**airflow_env(tmp_path), "PATH": f"{BIN}:/usr/bin:/bin"}
    for step in (["airflow", "db", "migrate"], ["airflow", "dags", "reserialize"]):
        proc = subprocess.run(step, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert proc.returncode == 0, f"{step}: {proc.stderr[-2000:]}"
    database = tmp_path / "airflow" / "airflow.db"
    stop = threading.Event()
    commits: list[float] = []

    def commit_every_few_ms() -> None:
        with contextlib.closing(sqlite3.connect(database, timeout=60, isolation_level=None)) as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS heartbeat (at REAL)")
            while not stop.is_set():
                conn.execute("INSERT INTO heartbeat VALUES (?)", (time.time(),))
                commits.append(time.time())
                time.sleep(0.003)

    writer = threading.Thread(target=commit_every_few_ms)
    writer.start()
    try:
        proc = subprocess.run(["asr", "backfill", "--from", "2025-01-01", "--to", "2025-12-31", "--unpause",
                               "--max-active-runs", "4", "--attempts", "1"], env=env, capture_output=True,
                              text=True, timeout=300, cwd=tmp_path)
    finally:
        stop.set()
        writer.join()
    assert proc.returncode == 0, proc.stderr[-3000:]
    with sqlite3.connect(database) as conn:
        runs = conn.execute("SELECT count(*) FROM dag_run WHERE run_type = 'backfill'").fetchone()[0]
    assert runs == 365
    assert len(commits) > 200  # the other process did commit all along


def standalone_env(tmp_path: Path) -> dict[str, str]:
    """The DAG tests' isolated Airflow, on free ports: the API server's and the two log servers'."""
    from services import free_port
    from test_dag import airflow_env

    return {**airflow_env(tmp_path), "PATH": f"{BIN}:/usr/bin:/bin", "AIRFLOW__API__PORT": str(free_port()),
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port())}


def make(target: str, env: dict[str, str]) -> list[str]:
    """`make <target>` on this isolated Airflow (the Makefile's own AIRFLOW_* settings overridden), its
    prerequisites taken as made: the test prepares the database itself."""
    return ["make", "-s", "-o", "setup", "-o", "airflow-init", target,
            *(f"{k}={v}" for k, v in env.items() if k.startswith("AIRFLOW"))]


def prepare(env: dict[str, str], cwd: Path) -> None:
    for step in (["airflow", "db", "migrate"], ["asr", "pools", "--apply"]):
        proc = subprocess.run(step, env=env, capture_output=True, text=True, timeout=300, cwd=cwd)
        assert proc.returncode == 0, f"{step}: {proc.stderr[-2000:]}"


def wait_until_healthy(env: dict[str, str], server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 180
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{env['AIRFLOW__API__PORT']}/api/v2/monitor/health",
                                        timeout=5) as answer:
                health = json.load(answer)
            if all(health[part]["status"] == "healthy" for part in ("scheduler", "dag_processor", "triggerer")):
                return
        except (OSError, KeyError):
            pass
        assert time.monotonic() < deadline and server.poll() is None, log.read_text()[-3000:]
        time.sleep(1)


def processes() -> dict[int, tuple[int, int, str]]:
    """Every process that is not a zombie: pid -> (parent, session, command line)."""
    found = {}
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit():
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if stat[0] != "Z":
                    command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
                    found[int(entry.name)] = (int(stat[1]), int(stat[3]), command)
        except OSError:
            continue
    return found


def below(root: int) -> dict[int, tuple[int, int, str]]:
    """The processes under ``root``."""
    everything = processes()
    found: dict[int, tuple[int, int, str]] = {}
    todo = [root]
    while todo:
        parent = todo.pop()
        for pid, row in everything.items():
            if row[0] == parent and pid not in found:
                found[pid] = row
                todo.append(pid)
    return found


def left_over(sessions: set[int], home: str) -> dict[int, str]:
    """What is still running of a standalone: any process in one of the sessions its processes were in (a
    process whose parent died keeps its session), or whose environment names its AIRFLOW_HOME (Airflow's
    renamed processes overwrite theirs, hence the sessions)."""
    needle = f"AIRFLOW_HOME={home}".encode()
    found = {}
    for pid, (_, session, command) in processes().items():
        try:
            named = needle in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            named = False
        if session in sessions or named:
            found[pid] = command
    return found


def listening(pids: set[int]) -> set[tuple[str, int]]:
    """The TCP addresses these processes listen on, from /proc/net: (address, port)."""
    inodes = set()
    for pid in pids:
        try:
            links = [os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir()]
        except OSError:
            continue
        inodes |= {link[len("socket:[") : -1] for link in links if link.startswith("socket:[")}
    found = set()
    for table, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        for row in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            fields = row.split()
            if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
                address, port = fields[1].split(":")
                raw = b"".join(bytes.fromhex(address[i : i + 8])[::-1] for i in range(0, len(address), 8))
                found.add((socket.inet_ntop(family, raw), int(port, 16)))
    return found


@pytest.mark.e2e
def test_one_ctrl_c_stops_every_process_of_make_standalone(tmp_path: Path) -> None:
    """Sized to the machine (one LocalExecutor worker per core, at least two, not Airflow's 32), listening on
    127.0.0.1 only, and after one SIGINT to make's process group (what Ctrl-C in a terminal sends) make returns
    with no process of it left."""
    env = standalone_env(tmp_path)
    home = env["AIRFLOW_HOME"]
    prepare(env, tmp_path)
    log = tmp_path / "standalone.log"
    with log.open("w") as out:
        server = subprocess.Popen(make("standalone", env), env=env, cwd=PROJECT_ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until_healthy(env, server, log)
        deadline = time.monotonic() + 60  # the scheduler forks its executor's workers all at once, once started
        while not (workers := [c for _, _, c in below(server.pid).values() if c.startswith("airflow worker")]):
            assert time.monotonic() < deadline, below(server.pid)
            time.sleep(0.5)
        assert len(workers) == max(2, len(os.sched_getaffinity(0))), workers
        assert all("LocalExecutor" in worker for worker in workers), workers
        running = below(server.pid)
        addresses = listening(set(running))
        ports = {int(env[k]) for k in ("AIRFLOW__API__PORT", "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT",
                                       "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT")}
        assert {port for _, port in addresses} == ports, addresses
        assert all(ipaddress.ip_address(address).is_loopback for address, _ in addresses), addresses

        sessions = {session for _, session, _ in below(server.pid).values()}
        os.killpg(server.pid, signal.SIGINT)
        server.wait(timeout=120)
        assert left_over(sessions, home) == {}, log.read_text()[-3000:]
        assert not (Path(home) / "standalone.pid").exists()
        assert "SIGINT: stopping every part" in log.read_text()
    finally:
        stop_for_good(server, home)


def stop_for_good(server: subprocess.Popen[bytes], home: str) -> None:
    """What a failed test leaves: one SIGTERM to all of it, then SIGKILL to what is still there."""
    sessions = {server.pid} | {session for _, session, _ in below(server.pid).values()}
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
    for pid in left_over(sessions, home):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.e2e
def test_standalone_runs_a_backfill_of_two_days(tmp_path: Path, model_dir: Path, jfk: Path) -> None:
    """The script `make standalone` runs, with a backfill through it to the end; `make standalone-stop` then
    stops it whole."""
    env = standalone_env(tmp_path)
    home = env["AIRFLOW_HOME"]
    for day in DAYS:
        folder = tmp_path / "store" / "recordings" / "calls" / day.replace("-", "/")
        folder.mkdir(parents=True)
        shutil.copy(jfk, folder / f"call_{day[-2:]}.flac")
    prepare(env, tmp_path)
    backfill = ["asr", "backfill", "--from", DAYS[0], "--to", DAYS[-1], "--max-active-runs", "2"]

    def asr_backfill(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(backfill + list(extra), env=env, capture_output=True, text=True, timeout=300,
                              cwd=tmp_path)

    proc = asr_backfill()
    assert proc.returncode == 2 and "Airflow does not know transcribe_daily" in proc.stderr, proc
    log = tmp_path / "standalone.log"
    with log.open("w") as out:
        server = subprocess.Popen([sys.executable, str(SCRIPT)], env=env, cwd=tmp_path, stdout=out,
                                  stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until_healthy(env, server, log)
        proc = subprocess.run(["airflow", "dags", "reserialize"], env=env, capture_output=True, text=True,
                              timeout=300, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-2000:]
        proc = asr_backfill()
        assert proc.returncode == 2 and "transcribe_daily is paused" in proc.stderr and "--unpause" in proc.stderr
        proc = asr_backfill("--dry-run")
        assert proc.returncode == 0 and all(day in proc.stdout for day in DAYS), proc
        assert (f"nothing made: Airflow would make {len(DAYS)} runs for the {len(DAYS)} days asked for; "
                "without --unpause the real command is refused") in proc.stdout, proc.stdout
        proc = asr_backfill("--unpause")
        assert proc.returncode == 0, f"{proc.stdout[-2000:]}{proc.stderr[-2000:]}"
        assert "transcribe_daily unpaused" in proc.stdout and f"asr progress --from {DAYS[0]}" in proc.stdout
        deadline = time.monotonic() + 480
        states: dict[str, str] = {}
        while time.monotonic() < deadline:
            if (tmp_path / "ledger.sqlite").exists():
                with sqlite3.connect(tmp_path / "ledger.sqlite") as conn:
                    states = dict(conn.execute("SELECT call_date, state FROM recording_ledger").fetchall())
            if sorted(states) == list(DAYS) and set(states.values()) == {"indexed"}:
                break
            time.sleep(2)
        assert states == dict.fromkeys(DAYS, "indexed"), (states, log.read_text()[-4000:])
        report = json.loads(subprocess.run(["asr", "progress", "--from", DAYS[0], "--to", DAYS[-1], "--by", "day",
                                            "--json"], env=env, capture_output=True, text=True, timeout=120,
                                           check=True).stdout)
        assert [(p["period"], p["states"]) for p in report["periods"]] == [(d, {"indexed": 1}) for d in DAYS]
        assert report["audio_hours_done"] == pytest.approx(2 * 11.0 / 3600, abs=1e-3)

        sessions = {session for _, session, _ in below(server.pid).values()}
        proc = subprocess.run(make("standalone-stop", env), env=env, cwd=PROJECT_ROOT, capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 0 and f"stopped (pid {server.pid})" in proc.stdout, proc
        assert server.wait(timeout=10) == 0
        assert left_over(sessions, home) == {}, log.read_text()[-3000:]
        assert "SIGTERM: stopping every part" in log.read_text()
    finally:
        stop_for_good(server, home)
