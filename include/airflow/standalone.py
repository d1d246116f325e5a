"""Airflow on one machine for `make standalone`: scheduler, DAG processor, triggerer and API server, with the
two log servers, sized to the machine's cores and listening on 127.0.0.1 only; one Ctrl-C (SIGINT), a SIGTERM
or a SIGHUP stops every process it started, and `make standalone-stop` sends that SIGTERM.

    python include/airflow/standalone.py          # run until stopped
    python include/airflow/standalone.py stop     # stop the one running for this AIRFLOW_HOME

Airflow's own `airflow standalone` starts 32 LocalExecutor workers whatever the machine, binds its log servers
to every interface and leaves its parts running when it gets a SIGTERM; this runs the same parts itself:

- ``[core] parallelism`` (the LocalExecutor's worker processes, and the tasks running at once): one per core,
  at least two, unless AIRFLOW__CORE__PARALLELISM says otherwise;
- the API server on 127.0.0.1 (``[api] port``); the scheduler's and the triggerer's log servers
  (``[logging] worker_log_server_port``, ``trigger_log_server_port``) run here on 127.0.0.1, and
  ``hostname_callable`` names this machine 127.0.0.1, so the API server fetches a running task's log there;
- the script is the subreaper of everything under it, so a process whose parent exits is still its own to
  stop: on a signal each part gets SIGTERM (the scheduler, DAG processor and triggerer first, so that running
  tasks can still report to the API server), and whatever is left after GRACE_SECONDS gets SIGKILL.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from contextlib import suppress
from functools import partial
from pathlib import Path

GRACE_SECONDS = 20.0
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
LIBC = ctypes.CDLL(None, use_errno=True)
LOOPBACK = "127.0.0.1"
BIN = Path(sys.executable).parent


def airflow_home() -> Path:
    return Path(os.environ.get("AIRFLOW_HOME", Path.home() / "airflow"))


def pid_file() -> Path:
    return airflow_home() / "standalone.pid"


def cores() -> int:
    return len(os.sched_getaffinity(0))


def descendants(root: int) -> set[int]:
    """Every process below ``root``, from /proc (parent links)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    found: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def reap(own: set[int]) -> None:
    """Collect the exit status of orphans handed to this subreaper (its own Popen children it leaves to Popen)."""
    for pid in descendants(os.getpid()) - own:
        with suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def settings() -> tuple[dict[str, str], int, int, int]:
    """The environment of every part, and the API server's and the two log servers' ports."""
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"  # parts start further parts as `airflow ...`
    env.setdefault("AIRFLOW__CORE__PARALLELISM", str(max(2, cores())))
    env["AIRFLOW__API__HOST"] = LOOPBACK
    env.setdefault("AIRFLOW__CORE__HOSTNAME_CALLABLE", "urllib.request.localhost")  # 127.0.0.1: the log servers
    os.environ.update(env)
    from airflow.configuration import conf

    port = conf.getint("api", "port")
    env.setdefault("AIRFLOW__CORE__EXECUTION_API_SERVER_URL", f"http://{LOOPBACK}:{port}/execution/")
    return (env, port, conf.getint("logging", "worker_log_server_port"),
            conf.getint("logging", "trigger_log_server_port", fallback=8794))


class Part:
    """One process of the standalone Airflow, in a session of its own (a Ctrl-C reaches this script alone),
    sent SIGTERM by the kernel should this script die without stopping it, its output prefixed with its name."""

    def __init__(self, name: str, command: list[str], env: dict[str, str]) -> None:
        self.name = name
        self.process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        start_new_session=True, preexec_fn=_terminate_with_parent)

    def copy_output(self) -> None:
        threading.Thread(target=self._copy, daemon=True).start()

    def _copy(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            say(self.name, line.decode(errors="replace").rstrip())

    def terminate(self) -> None:
        if self.process.poll() is None:
            with suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)


def _terminate_with_parent() -> None:
    """In the child before it runs (no thread but the main one exists yet when the parts start)."""
    LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def say(name: str, line: str) -> None:
    print(f"{name:13} | {line}", flush=True)


def healthy(port: int) -> bool:
    import json

    try:
        with urllib.request.urlopen(f"http://{LOOPBACK}:{port}/api/v2/monitor/health", timeout=2) as answer:
            health = json.load(answer)
        return all(health[part]["status"] == "healthy" for part in ("scheduler", "dag_processor", "triggerer"))
    except (OSError, KeyError, ValueError):
        return False


def stop(groups: list[list[Part]], stopping: list[int]) -> None:
    """SIGTERM to each group of parts in turn, waiting for each to exit; then SIGTERM and at last SIGKILL to
    whatever is still below this process. A second signal cuts the waiting for a SIGTERM short."""
    parts = [part for group in groups for part in group]
    own = {part.process.pid for part in parts}

    def wait(done: Callable[[], bool], patient: bool = True) -> None:
        deadline = time.monotonic() + GRACE_SECONDS
        while not done() and time.monotonic() < deadline and not (patient and len(stopping) > 1):
            reap(own)
            time.sleep(0.2)

    def exited(group: list[Part]) -> bool:
        return all(part.process.poll() is not None for part in group)

    def nothing_left() -> bool:
        for part in parts:
            part.process.poll()  # collects a part's exit status: no zombie of it is left below us
        return not descendants(os.getpid())

    for group in groups:
        for part in group:
            part.terminate()
        wait(partial(exited, group))
    for signum, patient in ((signal.SIGTERM, True), (signal.SIGKILL, False)):
        for pid in descendants(os.getpid()):
            with suppress(ProcessLookupError):
                os.kill(pid, signum)
        wait(nothing_left, patient)


def start() -> int:
    path = pid_file()
    if (running := read_pid(path)) is not None:
        print(f"standalone: already running for {airflow_home()} (pid {running}): make standalone-stop",
              file=sys.stderr)
        return 1
    stopping: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        stopping.append(signum)

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, on_signal)
    LIBC.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    env, port, worker_logs, trigger_logs = settings()
    if stopping:
        return 0
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{os.getpid()}\n")
    airflow, here = str(BIN / "airflow"), str(Path(__file__).resolve())
    say("standalone", f"{env['AIRFLOW__CORE__PARALLELISM']} LocalExecutor workers ({cores()} cores); API server"
                      f" http://{LOOPBACK}:{port}; log servers on {LOOPBACK}:{worker_logs} and :{trigger_logs}")
    workers: list[Part] = []
    servers: list[Part] = []
    failed = None
    try:
        workers += [Part("scheduler", [airflow, "scheduler", "--skip-serve-logs"], env),
                    Part("dag-processor", [airflow, "dag-processor"], env),
                    Part("triggerer", [airflow, "triggerer", "--skip-serve-logs"], env)]
        servers += [Part("api-server", [airflow, "api-server", "--host", LOOPBACK, "--port", str(port)], env),
                    Part("worker-logs", [sys.executable, here, "serve-logs", str(worker_logs)], env),
                    Part("trigger-logs", [sys.executable, here, "serve-logs", str(trigger_logs)], env)]
        failed = supervise(workers + servers, port, stopping)
    finally:
        stop([workers, servers], stopping)
        path.unlink(missing_ok=True)
    say("standalone", "stopped")
    return 1 if failed is not None else 0


def supervise(parts: list[Part], port: int, stopping: list[int]) -> Part | None:
    """Copy the parts' output until a signal comes or a part exits (returned): then say why it stops."""
    for part in parts:
        part.copy_output()
    ready, failed = False, None
    while not stopping and failed is None:
        failed = next((part for part in parts if part.process.poll() is not None), None)
        if not ready and healthy(port):
            ready = True
            password = airflow_home() / "simple_auth_manager_passwords.json.generated"
            login = f" (user admin, password in {password})" if password.exists() else ""
            say("standalone", f"Airflow is ready: http://{LOOPBACK}:{port}{login};"
                              " stop it with Ctrl-C or make standalone-stop")
        reap({part.process.pid for part in parts})
        time.sleep(0.5)
    if failed is not None:
        say("standalone", f"{failed.name} exited with {failed.process.returncode}: stopping the others")
    else:
        say("standalone", f"{signal.Signals(stopping[0]).name}: stopping every part")
    return failed


def read_pid(path: Path) -> int | None:
    """The pid in the pid file, if that process is a standalone of this script still running."""
    try:
        pid = int(path.read_text().split()[0])
        running = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError, IndexError):
        return None
    return pid if Path(__file__).name.encode() in running else None


def running(pid: int) -> bool:
    """Whether the process runs still: not gone, and not a zombie its parent has yet to collect."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def stop_running() -> int:
    pid = read_pid(pid_file())
    if pid is None:
        print(f"standalone: not running for {airflow_home()}")
        return 0
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 5 * GRACE_SECONDS  # what stop() may take at the most, and some
    while running(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if running(pid):
        print(f"standalone: pid {pid} is still stopping", file=sys.stderr)
        return 1
    print(f"standalone: stopped (pid {pid})")
    return 0


def serve_logs(port: int) -> None:
    """Airflow's log server (what `airflow scheduler` starts on every interface) on 127.0.0.1 only."""
    import uvicorn
    from setproctitle import setproctitle

    setproctitle("airflow serve-logs")
    uvicorn.run("airflow.utils.serve_logs.log_server:get_app", factory=True, host=LOOPBACK, port=port,
                log_config=None, access_log=False)


def main(argv: list[str]) -> int:
    if argv[:1] == ["stop"]:
        return stop_running()
    if argv[:1] == ["serve-logs"]:
        serve_logs(int(argv[1]))
        return 0
    if argv:
        print(__doc__, file=sys.stderr)
        return 2
    return start()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
