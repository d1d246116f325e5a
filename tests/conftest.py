"""Shared fixtures: isolated settings per test, the packaged Whisper-base, test audio, and the test servers."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Callable, Iterator, TypeVar

import pytest
import services

from asr_tasks.config import PROJECT_ROOT, IndexSettings, Settings
from asr_tasks.intake.demo_corpus import JFK
from asr_tasks.records.anchors import new_anchor_key
from asr_tasks.transcription.model_assets import install_whisper_base

T = TypeVar("T")

DATA = Path(__file__).parent / "data"
MODEL_DIR = PROJECT_ROOT / "var" / "models" / "whisper-base"


@pytest.fixture(scope="session")
def model_dir() -> Path:
    """The real Whisper-base (CTranslate2) assembled from its packages; a no-op when present."""
    return install_whisper_base(MODEL_DIR)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Defaults with every writable path inside the test's own folder, the access log's anchor key among them (a
    key file the settings name is a secret that must be there: it is made here, as an operator makes it)."""
    anchor_key = tmp_path / "keys" / "access-log-anchor.pem"
    new_anchor_key(anchor_key)
    return Settings().override(
        store_root=str(tmp_path / "store"), index_path=str(tmp_path / "index.sqlite"), work_dir=str(tmp_path / "work"),
        model_dir=str(MODEL_DIR), ledger_url=f"sqlite:///{tmp_path / 'ledger.sqlite'}",
        anchor_key_file=str(anchor_key),
    )


@pytest.fixture
def jfk() -> Path:
    return JFK


@dataclasses.dataclass(frozen=True)
class S3Server:
    """A running S3-protocol server and the settings that reach it."""

    endpoint: str  # host:port
    access_key: str
    secret_key: str
    secure: bool = False
    ca_bundle: str | None = None

    def settings(self, base: Settings, **changes: object) -> Settings:
        return base.override(
            store_backend="minio", minio_endpoint=self.endpoint, minio_access_key=self.access_key,
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


def _service(start: Callable[[], T]) -> T:
    """Start a test server; a missing tool skips outside CI and fails in CI, a failed start always fails."""
    try:
        return start()
    except services.ServiceUnavailable as exc:
        if services.required():
            pytest.fail(f"CI needs this server: {exc}")
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def minio_server() -> Iterator[services.MinioServer]:
    """A real MinIO server (built from source, see tests/services.py) for the whole session."""
    server = _service(services.start_minio)
    yield server
    server.server.stop()


@pytest.fixture(scope="session")
def s3_server(request: pytest.FixtureRequest) -> S3Server:
    """The MinIO at MINIO_ENDPOINT when set (MINIO_ACCESS_KEY, MINIO_SECRET_KEY, MINIO_CA_BUNDLE), else our own."""
    endpoint = os.environ.get("MINIO_ENDPOINT")
    if not endpoint:
        minio: services.MinioServer = request.getfixturevalue("minio_server")
        return S3Server(minio.endpoint, minio.access_key, minio.secret_key)
    secure = endpoint.startswith("https://") or os.environ.get("MINIO_SECURE", "").lower() in {"1", "true", "yes"}
    return S3Server(endpoint.split("://", 1)[-1].rstrip("/"), os.environ.get("MINIO_ACCESS_KEY", "minioadmin"),
                    os.environ.get("MINIO_SECRET_KEY", "minioadmin"), secure, os.environ.get("MINIO_CA_BUNDLE"))


@dataclasses.dataclass(frozen=True)
class EsCluster:
    """An Elasticsearch cluster to test against, and the settings that reach it."""

    url: str
    username: str | None = None
    password: str | None = None
    api_key: str | None = None
    ca_certs: str | None = None
    analyzer: str = IndexSettings().es_analyzer  # the default analysis
    english_stemmer: str = "porter"
    minimal: bool = False  # the minimal distribution: no analysis-common, no reindex module

    def settings(self, base: Settings, prefix: str, **changes: object) -> Settings:
        fields: dict[str, object] = {
            "index_backend": "elasticsearch", "es_url": self.url, "es_index_prefix": prefix,
            "es_api_key": self.api_key, "es_username": self.username, "es_password": self.password,
            "es_ca_certs": self.ca_certs, "es_analyzer": self.analyzer, "es_english_stemmer": self.english_stemmer,
            "es_refresh": "true", "es_retry_backoff_seconds": 0.05,
        }
        return base.override(**{**fields, **changes})


@pytest.fixture(scope="session")
def es_cluster() -> Iterator[EsCluster]:
    """The cluster ES_URL names (ES_USERNAME/ES_PASSWORD or ES_API_KEY, ES_CA_CERTS, ES_ANALYZER,
    ES_ENGLISH_STEMMER), else a real Elasticsearch 9 node started for the session (tests/services.py): HTTPS, a
    user with the pipeline's role, and the analysers its minimal distribution has (standard, hunspell)."""
    if os.environ.get("ES_URL"):
        env = os.environ.get
        yield EsCluster(env("ES_URL", ""), env("ES_USERNAME"), env("ES_PASSWORD"), env("ES_API_KEY"),
                        env("ES_CA_CERTS"), env("ES_ANALYZER", IndexSettings().es_analyzer), env("ES_ENGLISH_STEMMER", "porter"))
        return
    node = _service(services.start_elasticsearch)
    yield EsCluster(node.url, node.username, node.password, ca_certs=node.ca_certs,
                    english_stemmer="hunspell", minimal=True)
    node.server.stop()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """A throw-away PostgreSQL cluster; its URL names the ``postgres`` database of the superuser ``postgres``."""
    server = _service(services.start_postgres)
    yield server.url
    server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def fresh_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty ledger database of the test's own: a SQLite file, then one on the test PostgreSQL."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'ledger.sqlite'}"
        return
    with services.throwaway_database(request.getfixturevalue("postgres_server"), "asr_ledger_fresh") as url:
        yield url


@pytest.fixture(scope="session")
def redis_server() -> Iterator[str]:
    """A throw-away Redis without persistence; its URL has no database number."""
    server = _service(services.start_redis)
    yield server.url
    server.stop()
