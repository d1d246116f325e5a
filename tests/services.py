"""The servers the test suite runs against, fetched, started and stopped in one place.

- Elasticsearch 9: Elastic's minimal server distribution (``integ-test-zip``) from
  Maven Central, fetched with ``mvn``, run on a JDK 21+ found beside the default one,
  with security on (TLS from a throw-away CA, a file-realm user with the pipeline's role).
- MinIO: built from source with ``go install`` at a pinned version (a test peer only).
- PostgreSQL and Redis: Debian's packages (``make test-deps`` installs them).

Downloads and builds are cached under ``var/test-services/cache``; every start gets a
throw-away folder under ``var/test-services/run`` with the server's log in it, and a
start that fails raises with that log's tail. Elasticsearch and PostgreSQL refuse to
run as root: as root they run as the unprivileged user ``asr-test`` (created when
missing). ``python tests/services.py prepare`` fetches and builds ahead of a run
(``make test`` calls it); ``python tests/services.py run NAME`` serves one until Ctrl-C.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import glob
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

PROJECT_ROOT = Path(__file__).resolve().parent.parent
HOME = PROJECT_ROOT / "var" / "test-services"
CACHE = HOME / "cache"
RUNS = HOME / "run"

ES_VERSION = "9.5.4"
ES_ARTIFACT = f"org.elasticsearch.distribution.integ-test-zip:elasticsearch:{ES_VERSION}:zip"
ES_MIN_JAVA = 21
# RELEASE.2025-10-15T17-29-55Z and the 11 fixes after it: the community repository's last commit, and the one
# version of the module that the Go module proxy serves (it refuses the RELEASE tags themselves).
MINIO_MODULE = "github.com/minio/minio"
MINIO_VERSION = "v0.0.0-20260212201848-7aac2a2c5b7c"
SERVICE_USER = "asr-test"
HUNSPELL_EN = Path("/usr/share/hunspell")
# The role docs/production.md asks a production cluster to give the pipeline, on the test prefixes too.
ES_ROLES = """asr_pipeline:
  cluster: [monitor, manage_index_templates]
  indices:
    - names: ["asr*", "bench*"]
      privileges: [all]
"""


class ServiceUnavailable(RuntimeError):
    """A server cannot be had on this machine (a tool is missing); the message says what to install."""


def required() -> bool:
    """In CI every server must start: a missing one is a failure there, never a skip."""
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run(cmd: list[str], what: str, timeout: float, **kwargs: object) -> str:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kwargs)  # type: ignore[call-overload]
    except FileNotFoundError as exc:
        raise ServiceUnavailable(f"{what}: {cmd[0]} is not installed") from exc
    if proc.returncode != 0:
        raise RuntimeError(f"{what}: {' '.join(cmd)} exited {proc.returncode}:\n{(proc.stdout + proc.stderr)[-3000:]}")
    return str(proc.stdout)


# -- who runs the servers ---------------------------------------------------------------------------------------


def service_ids() -> tuple[int, int] | None:
    """(uid, gid) to run root-shy servers as, or None when the tests are not root."""
    if os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam(SERVICE_USER)
    except KeyError:
        _run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", SERVICE_USER],
             f"creating the user {SERVICE_USER}", 60)
        entry = pwd.getpwnam(SERVICE_USER)
    return entry.pw_uid, entry.pw_gid


def _own(path: Path, ids: tuple[int, int] | None) -> None:
    if ids is None:
        return
    for folder, _, files in os.walk(path):
        os.chown(folder, *ids)
        for name in files:
            os.chown(os.path.join(folder, name), *ids)


def _as(ids: tuple[int, int] | None) -> dict[str, object]:
    return {} if ids is None else {"user": ids[0], "group": ids[1], "extra_groups": []}


# -- a running server ---------------------------------------------------------------------------------------------


@dataclass
class Server:
    """One server process in its own process group, its folder and its log."""

    name: str
    proc: subprocess.Popen[bytes]
    folder: Path
    log: Path
    url: str
    env: dict[str, str] = field(default_factory=dict)

    def tail(self, chars: int = 4000) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else "(no log)"
        return f"--- {self.name} log {self.log} (exit {self.proc.poll()}) ---\n{text[-chars:]}"

    def wait_until(self, ready: Callable[[], bool], seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not ready():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                state = "exited" if self.proc.poll() is not None else f"not ready after {seconds:.0f} s"
                raise RuntimeError(f"{self.name} at {self.url} {state}\n{self.tail()}")
            time.sleep(0.2)

    def stop(self, grace: float = 30.0) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        shutil.rmtree(self.folder / "data", ignore_errors=True)


def _folder(name: str) -> Path:
    folder = RUNS / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
    folder.mkdir(parents=True)
    return folder


def _spawn(name: str, cmd: list[str], folder: Path, url: str, ids: tuple[int, int] | None = None,
           env: dict[str, str] | None = None) -> Server:
    log = folder / f"{name}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=folder,
                                env={**os.environ, **(env or {})}, start_new_session=True, **_as(ids))  # type: ignore[call-overload]
    return Server(name, proc, folder, log, url)


def _http_ok(url: str, context: ssl.SSLContext | None = None, headers: dict[str, str] | None = None) -> bool:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=2,
                                    context=context) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def make_tls(folder: Path, names: tuple[str, ...] = ("127.0.0.1",)) -> tuple[Path, Path, Path]:
    """A throw-away CA and a server certificate for loopback; returns (ca.pem, server.pem, server.key)."""
    folder.mkdir(parents=True, exist_ok=True)

    def openssl(*args: str) -> None:
        _run(["openssl", *args], "making test certificates", 60, cwd=folder)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
            "-subj", "/CN=asr test CA")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
            "-subj", f"/CN={names[0]}")
    alt = ",".join(f"IP:{n}" if re.fullmatch(r"[\d.]+", n) else f"DNS:{n}" for n in names)
    (folder / "ext.cnf").write_text(f"subjectAltName={alt}\nbasicConstraints=CA:FALSE\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "server.pem", "-days", "2", "-extfile", "ext.cnf")
    return folder / "ca.pem", folder / "server.pem", folder / "server.key"


# -- Elasticsearch ----------------------------------------------------------------------------------------------


def java_home() -> Path:
    """``ES_JAVA_HOME``, else the newest JDK of at least version 21 beside the default java."""
    if os.environ.get("ES_JAVA_HOME"):
        return Path(os.environ["ES_JAVA_HOME"])
    java = shutil.which("java")
    roots = {Path("/usr/lib/jvm")}
    if java:
        roots.add(Path(os.path.realpath(java)).parent.parent.parent)
    found: list[tuple[int, Path]] = []
    for root in roots:
        for home in root.glob("*"):
            release = home / "release"
            if (home / "bin" / "java").is_file() and release.is_file():
                match = re.search(r'JAVA_VERSION="(\d+)', release.read_text(errors="replace"))
                if match and int(match.group(1)) >= ES_MIN_JAVA:
                    found.append((int(match.group(1)), home))
    if not found:
        raise ServiceUnavailable(f"Elasticsearch {ES_VERSION} needs a JDK {ES_MIN_JAVA} or newer: none in "
                                 f"{', '.join(map(str, sorted(roots)))} (set ES_JAVA_HOME)")
    return max(found)[1]


def es_home() -> Path:
    """The unpacked distribution, fetched from Maven Central with mvn on first use."""
    home = CACHE / f"elasticsearch-{ES_VERSION}"
    if (home / "bin" / "elasticsearch").is_file():
        return home
    CACHE.mkdir(parents=True, exist_ok=True)
    zip_path = CACHE / f"elasticsearch-{ES_VERSION}.zip"
    if not zip_path.is_file():
        _run(["mvn", "-q", "-B", "dependency:copy", f"-Dartifact={ES_ARTIFACT}", f"-DoutputDirectory={CACHE}",
              "-Dmdep.overWriteIfNewer=true"], f"fetching {ES_ARTIFACT} from Maven Central", 900, cwd=CACHE)
    partial = CACHE / f"elasticsearch-{ES_VERSION}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    with zipfile.ZipFile(zip_path) as archive:
        archive.extractall(partial)
    for script in (partial / f"elasticsearch-{ES_VERSION}" / "bin").iterdir():
        script.chmod(0o755)
    (partial / f"elasticsearch-{ES_VERSION}").rename(home)
    partial.rmdir()
    return home


def es_modules() -> list[str]:
    """The modules the distribution ships (the default distribution has many more)."""
    return sorted(p.name for p in (es_home() / "modules").iterdir())


@dataclass(frozen=True)
class EsNode:
    """A running node and what reaches it: HTTPS with a CA bundle, a user with the pipeline's role."""

    url: str
    username: str
    password: str
    ca_certs: str
    server: Server


def start_elasticsearch(heap: str = "512m", wait_seconds: float = 180.0) -> EsNode:
    home, java = es_home(), java_home()
    if not (HUNSPELL_EN / "en_US.dic").is_file():
        raise ServiceUnavailable("the English stemmer of the test node needs Debian's hunspell-en-us "
                                 f"({HUNSPELL_EN}/en_US.dic is missing)")
    ids = service_ids()
    folder = _folder("elasticsearch")
    config = folder / "config"
    shutil.copytree(home / "config", config)
    (config / "hunspell" / "en_US").mkdir(parents=True)
    for suffix in ("aff", "dic"):
        shutil.copy(HUNSPELL_EN / f"en_US.{suffix}", config / "hunspell" / "en_US" / f"en_US.{suffix}")
    ca, cert, key = make_tls(config / "certs")
    http_port, transport_port = free_port(), free_port()
    (config / "elasticsearch.yml").write_text(f"""cluster.name: asr-test
node.name: asr-test
path.data: {folder / 'data'}
path.logs: {folder / 'logs'}
network.host: 127.0.0.1
http.port: {http_port}
transport.port: {transport_port}
discovery.type: single-node
cluster.routing.allocation.disk.threshold_enabled: false
xpack.security.enabled: true
xpack.security.http.ssl.enabled: true
xpack.security.http.ssl.certificate: certs/server.pem
xpack.security.http.ssl.key: certs/server.key
xpack.security.http.ssl.certificate_authorities: [certs/ca.pem]
""")
    (config / "roles.yml").write_text(ES_ROLES)
    (config / "jvm.options.d" / "heap.options").write_text(f"-Xms{heap}\n-Xmx{heap}\n")
    (folder / "data").mkdir()
    (folder / "logs").mkdir()
    _own(folder, ids)
    env = {"ES_JAVA_HOME": str(java), "ES_PATH_CONF": str(config), "ES_TMPDIR": str(folder / "data"),
           "ES_JAVA_OPTS": ""}
    password = secrets.token_urlsafe(18)
    _run([str(home / "bin" / "elasticsearch-users"), "useradd", "asr", "-p", password, "-r", "asr_pipeline"],
         "adding the test node's user", 120, env={**os.environ, **env}, cwd=folder, **_as(ids))
    server = _spawn("elasticsearch", [str(home / "bin" / "elasticsearch")], folder,
                    f"https://127.0.0.1:{http_port}", ids, env)
    server.env = env
    context = ssl.create_default_context(cafile=str(ca))
    auth = {"Authorization": "Basic " + base64.b64encode(f"asr:{password}".encode()).decode()}
    server.wait_until(lambda: _http_ok(f"{server.url}/_cluster/health?wait_for_status=yellow&timeout=1s",
                                       context, auth), wait_seconds)
    return EsNode(server.url, "asr", password, str(ca), server)


# -- MinIO --------------------------------------------------------------------------------------------------------


def minio_binary() -> Path:
    """The MinIO server built from source at the pinned version, on first use."""
    folder = CACHE / f"minio-{MINIO_VERSION}"
    binary = folder / "minio"
    if binary.is_file():
        return binary
    if shutil.which("go") is None:
        raise ServiceUnavailable("the MinIO server is built from source with go install, and Go is not installed")
    folder.mkdir(parents=True, exist_ok=True)
    _run(["go", "install", f"{MINIO_MODULE}@{MINIO_VERSION}"], f"building MinIO {MINIO_VERSION}", 1800,
         env={**os.environ, "GOBIN": str(folder), "GOFLAGS": "-buildvcs=false", "CGO_ENABLED": "0"})
    return binary


@dataclass(frozen=True)
class MinioServer:
    endpoint: str  # host:port
    access_key: str
    secret_key: str
    ca_bundle: str | None
    server: Server


def start_minio(port: int | None = None, tls: bool = False, access_key: str | None = None,
                secret_key: str | None = None, wait_seconds: float = 60.0) -> MinioServer:
    """A single-drive MinIO on a loopback port (``port``, else a free one), over TLS from a throw-away CA if asked."""
    binary = minio_binary()
    folder = _folder("minio")
    port = port or free_port()
    args = [str(binary), "server", str(folder / "data"), "--address", f"127.0.0.1:{port}",
            "--console-address", f"127.0.0.1:{free_port()}", "--quiet"]
    ca: Path | None = None
    if tls:
        certs = folder / "certs"
        ca, cert, key = make_tls(folder / "tls")
        certs.mkdir()
        shutil.copy(cert, certs / "public.crt")
        shutil.copy(key, certs / "private.key")
        args += ["--certs-dir", str(certs)]
    access = access_key or f"asr-{secrets.token_hex(4)}"
    secret = secret_key or secrets.token_urlsafe(24)
    env = {"MINIO_ROOT_USER": access, "MINIO_ROOT_PASSWORD": secret, "MINIO_BROWSER": "off",
           "MINIO_UPDATE": "off", "HOME": str(folder)}
    scheme = "https" if tls else "http"
    server = _spawn("minio", args, folder, f"{scheme}://127.0.0.1:{port}", env=env)
    context = ssl.create_default_context(cafile=str(ca)) if ca else None
    server.wait_until(lambda: _http_ok(f"{server.url}/minio/health/ready", context), wait_seconds)
    return MinioServer(f"127.0.0.1:{port}", access, secret, str(ca) if ca else None, server)


# -- PostgreSQL and Redis -----------------------------------------------------------------------------------------


def postgres_bin() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if not found:
        raise ServiceUnavailable("PostgreSQL's server is not installed (Debian: postgresql; make test-deps installs it)")
    return Path(found[-1]).parent


def start_postgres(wait_seconds: float = 60.0) -> Server:
    """A fresh cluster on a loopback port, user ``postgres`` with trust authentication; ``url`` names it."""
    pg = postgres_bin()
    ids = service_ids()
    folder = _folder("postgres")
    _own(folder, ids)
    _run([str(pg / "initdb"), "-D", str(folder / "data"), "-U", "postgres", "-A", "trust", "-E", "UTF8",
          "--no-sync"], "initdb", 120, cwd=folder, **_as(ids))
    port = free_port()
    server = _spawn("postgres", [str(pg / "postgres"), "-D", str(folder / "data"), "-h", "127.0.0.1",
                                 "-p", str(port), "-k", str(folder), "-c", "fsync=off",
                                 "-c", "max_connections=200"],
                    folder, f"postgresql://postgres@127.0.0.1:{port}/postgres", ids)

    def ready() -> bool:
        return subprocess.run([str(pg / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(port)],
                              capture_output=True).returncode == 0

    server.wait_until(ready, wait_seconds)
    return server


def start_redis(wait_seconds: float = 30.0) -> Server:
    """A Redis with no persistence on a loopback port; ``url`` names it."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise ServiceUnavailable("redis-server is not installed (Debian: redis-server; make test-deps installs it)")
    folder = _folder("redis")
    port = free_port()
    server = _spawn("redis", [binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "",
                              "--appendonly", "no", "--dir", str(folder)], folder, f"redis://127.0.0.1:{port}")

    def ready() -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    server.wait_until(ready, wait_seconds)
    return server


# -- command line -------------------------------------------------------------------------------------------------


def prepare() -> None:
    """Fetch and build what the servers need, so that a test run only starts them."""
    print(f"Elasticsearch {ES_VERSION}: {es_home()} (modules: {', '.join(es_modules())}); JDK {java_home()}")
    print(f"MinIO {MINIO_VERSION}: {minio_binary()}")
    print(f"PostgreSQL: {postgres_bin()}; Redis: {shutil.which('redis-server')}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("prepare", help="fetch Elasticsearch, build MinIO, check PostgreSQL and Redis")
    run = sub.add_parser("run", help="serve one until Ctrl-C")
    run.add_argument("name", choices=["elasticsearch", "minio", "postgres", "redis"])
    args = parser.parse_args()
    if args.command == "prepare":
        prepare()
        return 0
    if args.name == "elasticsearch":
        node = start_elasticsearch()
        server, where = node.server, f"{node.url} user {node.username} password {node.password} CA {node.ca_certs}"
    elif args.name == "minio":
        minio = start_minio()
        server, where = minio.server, f"{minio.endpoint} access key {minio.access_key} secret {minio.secret_key}"
    else:
        server = start_postgres() if args.name == "postgres" else start_redis()
        where = server.url
    print(f"{args.name}: {where} (log {server.log}); Ctrl-C stops it", flush=True)
    try:
        server.proc.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())


@contextlib.contextmanager
def throwaway_database(server_url: str, prefix: str) -> Iterator[str]:
    """A database of its own on a test PostgreSQL server, dropped afterwards; yields its URL."""
    import psycopg2
    from sqlalchemy.engine import make_url

    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = psycopg2.connect(server_url, connect_timeout=5)
    admin.autocommit = True
    try:
        with admin.cursor() as cur:
            cur.execute(f'CREATE DATABASE "{name}"')
        yield make_url(server_url).set(database=name).render_as_string(hide_password=False)
        with admin.cursor() as cur:
            cur.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
    finally:
        admin.close()
