"""Shared fixtures: isolated settings per test, the packaged Whisper-base, test audio, an S3 server."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable, Iterator

import pytest

from asr_tasks.config import PROJECT_ROOT, Settings
from asr_tasks.model_assets import install_whisper_base

DATA = Path(__file__).parent / "data"
MODEL_DIR = PROJECT_ROOT / "var" / "models" / "whisper-base"


@pytest.fixture(scope="session")
def model_dir() -> Path:
    """The real Whisper-base (CTranslate2) assembled from its packages; a no-op when present."""
    return install_whisper_base(MODEL_DIR)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Defaults with every writable path inside the test's own folder."""
    return dataclasses.replace(
        Settings(),
        store_root=str(tmp_path / "store"),
        index_path=str(tmp_path / "index.sqlite"),
        work_dir=str(tmp_path / "work"),
        model_dir=str(MODEL_DIR),
        ledger_url=f"sqlite:///{tmp_path / 'ledger.sqlite'}",
    )


@pytest.fixture
def jfk() -> Path:
    return DATA / "jfk.flac"


@dataclasses.dataclass(frozen=True)
class S3Server:
    """A running S3-protocol server and the settings that reach it."""

    endpoint: str  # host:port
    access_key: str
    secret_key: str
    secure: bool = False
    ca_bundle: str | None = None

    def settings(self, base: Settings, **changes: object) -> Settings:
        return dataclasses.replace(
            base, store_backend="minio", minio_endpoint=self.endpoint, minio_access_key=self.access_key,
            minio_secret_key=self.secret_key, minio_secure=self.secure, minio_ca_bundle=self.ca_bundle,
            minio_conn_id=None, store_retry_backoff_seconds=0.05, **changes,
        )

    def env(self) -> dict[str, str]:
        """The same, as ASR_* variables for a child process."""
        env = {"ASR_STORE_BACKEND": "minio", "ASR_MINIO_ENDPOINT": self.endpoint,
               "ASR_MINIO_ACCESS_KEY": self.access_key, "ASR_MINIO_SECRET_KEY": self.secret_key,
               "ASR_MINIO_SECURE": str(self.secure).lower()}
        if self.ca_bundle:
            env["ASR_MINIO_CA_BUNDLE"] = self.ca_bundle
        return env


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def moto_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., int]]:
    """Starts moto's S3 server (``python -m moto.server``) in a child process on a loopback port; returns the port."""
    import socket
    import subprocess
    import sys
    import time

    procs: list[subprocess.Popen[bytes]] = []
    logs = tmp_path_factory.mktemp("moto")

    def start(port: int | None = None, *args: str) -> int:
        port = port or free_port()
        log = open(logs / f"{port}.log", "wb")
        proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port), *args],
                                stdout=log, stderr=subprocess.STDOUT)
        procs.append(proc)
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return port
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto server on port {port} did not start: {(logs / f'{port}.log').read_text()}")
                time.sleep(0.05)

    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="session")
def s3_server(moto_server: Callable[..., int]) -> S3Server:
    """A real MinIO when MINIO_ENDPOINT is set (MINIO_ACCESS_KEY, MINIO_SECRET_KEY, MINIO_CA_BUNDLE), else moto."""
    import os

    endpoint = os.environ.get("MINIO_ENDPOINT")
    if not endpoint:
        return S3Server(f"127.0.0.1:{moto_server()}", "asr-test-key", "asr-test-secret")
    secure = endpoint.startswith("https://") or os.environ.get("MINIO_SECURE", "").lower() in {"1", "true", "yes"}
    return S3Server(endpoint.split("://", 1)[-1].rstrip("/"), os.environ.get("MINIO_ACCESS_KEY", "minioadmin"),
                    os.environ.get("MINIO_SECRET_KEY", "minioadmin"), secure, os.environ.get("MINIO_CA_BUNDLE"))
