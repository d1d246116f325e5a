"""The object store behind configuration: the local folder and MinIO, the latter against a real MinIO server.

The MinIO server is built from source and started by the tests on a loopback port
(tests/services.py), or is the one MINIO_ENDPOINT names. Tests that run against it are marked ``minio``; those
parametrised over both backends show that switching is configuration only.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Iterator

import pytest
import services
import urllib3
from conftest import S3Server
from services import free_port

from asr_tasks.config import PROJECT_ROOT, Settings, get_settings, load_settings
from asr_tasks.intake.days import list_recordings, recordings_ready
from asr_tasks.intake.stores import LocalStore, MinioConfig, MinioStore, ObjectStore, minio_config, open_store
from asr_tasks.models import recording_id_for

DAY = date(2024, 3, 7)
PREFIX = "calls/2024/03/07/"


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def _drop_buckets(store: MinioStore, *buckets: str) -> None:
    """Leave a real MinIO as it was found."""
    from minio.deleteobjects import DeleteObject

    for bucket in buckets:
        if not store.client.bucket_exists(bucket):
            continue
        doomed = (DeleteObject(obj.object_name) for obj in store.client.list_objects(bucket, recursive=True))
        assert not list(store.client.remove_objects(bucket, doomed))
        store.client.remove_bucket(bucket)


@pytest.fixture
def s3_conf(settings: Settings, s3_server: S3Server) -> Iterator[Settings]:
    """MinIO settings with this test's own buckets."""
    suffix = uuid.uuid4().hex[:10]
    conf = s3_server.settings(settings, recordings_bucket=f"rec-{suffix}", artefacts_bucket=f"art-{suffix}")
    yield conf
    _drop_buckets(MinioStore(MinioConfig.from_settings(conf.storage), conf.storage.path("work_dir")),
                  conf.storage.recordings_bucket, conf.storage.artefacts_bucket)


@pytest.fixture(params=["local", pytest.param("minio", marks=pytest.mark.minio)])
def conf(request: pytest.FixtureRequest, settings: Settings) -> Settings:
    """The same tests on either backend; only the settings differ."""
    return settings if request.param == "local" else request.getfixturevalue("s3_conf")


@pytest.fixture
def store(conf: Settings) -> ObjectStore:
    return open_store(conf.storage)


# --- one interface, two backends -----------------------------------------------------


def test_roundtrip_stat_and_missing_objects(store: ObjectStore, conf: Settings) -> None:
    bucket = conf.storage.recordings_bucket
    data = b"some audio bytes" * 100
    before = datetime.now(timezone.utc) - timedelta(seconds=5)
    store.put_bytes(bucket, PREFIX + "c1.wav", data)
    store.put_bytes(bucket, PREFIX + "c1.wav", data)  # replacing is fine
    assert store.get_bytes(bucket, PREFIX + "c1.wav") == data
    info = store.stat(bucket, PREFIX + "c1.wav")
    assert info is not None and (info.key, info.size, info.etag) == (PREFIX + "c1.wav", len(data), md5(data))
    assert info.last_modified is not None and before <= info.last_modified <= datetime.now(timezone.utc)
    assert store.exists(bucket, PREFIX + "c1.wav")
    assert store.stat(bucket, PREFIX + "nope.wav") is None and not store.exists(bucket, PREFIX + "nope.wav")
    assert store.stat("no-such-bucket-" + uuid.uuid4().hex[:8], "k") is None
    with pytest.raises(FileNotFoundError):
        store.get_bytes(bucket, PREFIX + "nope.wav")


def test_listing_is_sorted_by_whole_key_and_bounded_by_prefix(store: ObjectStore, conf: Settings) -> None:
    bucket = conf.storage.recordings_bucket
    keys = ["p/b.wav", "p/a.wav", "p/a/x.wav", "p/a/y/z.wav", "p/a-b/x.wav", "p/c.json", "p/é.wav",
            "q/other.wav", "pz.wav", "calls/2024/03/07/a.wav", "calls/2024/03/17/b.wav", "calls/2024/04/01/d.wav"]
    for key in keys:
        store.put_bytes(bucket, key, key.encode())
    listed = list(store.list(bucket, "p/"))
    assert [o.key for o in listed] == sorted(k for k in keys if k.startswith("p/"))
    assert all(o.etag == md5(o.key.encode()) and o.size == len(o.key.encode()) for o in listed)
    assert [k.key for k in store.list_keys(bucket, "p/")] == [o.key for o in listed]
    assert all(k.last_modified.tzinfo is not None for k in store.list_keys(bucket, "p/"))
    assert [o.key for o in store.list(bucket, "calls/2024/03/1")] == ["calls/2024/03/17/b.wav"]
    assert list(store.list(bucket, "nothing/here/")) == []
    assert list(store.list("no-such-bucket-" + uuid.uuid4().hex[:8], "p/")) == []


def test_local_copy_is_a_complete_file_and_temporary(store: ObjectStore, conf: Settings, tmp_path: Path) -> None:
    bucket = conf.storage.recordings_bucket
    big = tmp_path / "big.wav"
    big.write_bytes(os.urandom(6 * 1024 * 1024 + 17))  # above the 5 MiB part size: a multipart upload on S3
    store.put_file(bucket, PREFIX + "big.wav", big)
    assert store.stat(bucket, PREFIX + "big.wav").size == big.stat().st_size
    with store.local_copy(bucket, PREFIX + "big.wav") as path:
        assert path.read_bytes() == big.read_bytes() and path.name == "big.wav"
        copy = path
    if conf.storage.store_backend == "minio":
        assert copy.is_relative_to(conf.storage.path("work_dir")) and not copy.exists()
        assert not list(conf.storage.path("work_dir").iterdir())
    with pytest.raises(FileNotFoundError, match="nope.wav"):
        with store.local_copy(bucket, PREFIX + "nope.wav"):
            pass


def test_a_part_of_a_recording_streams_as_a_player_asks_for_it(store: ObjectStore, conf: Settings) -> None:
    """What the search app serves a Range from: the object's size without reading it, and any slice of it."""
    bucket, data = conf.storage.recordings_bucket, bytes(range(256)) * 1000  # more than one chunk
    store.put_bytes(bucket, PREFIX + "c1.wav", data)
    assert store.stat(bucket, PREFIX + "c1.wav").size == len(data)  # type: ignore[union-attr]
    for start, length in ((0, len(data)), (1000, 1000), (len(data) - 10, 10), (70_000, 100_000)):
        assert b"".join(store.stream(bucket, PREFIX + "c1.wav", start, length)) == data[start : start + length]
    with pytest.raises(FileNotFoundError, match="nope.wav"):
        b"".join(store.stream(bucket, PREFIX + "nope.wav", 0, 10))


def test_day_listing_reads_sidecars_and_skips_markers(store: ObjectStore, conf: Settings) -> None:
    bucket = conf.storage.recordings_bucket
    store.put_bytes(bucket, PREFIX + "c2.mp3", b"call two")
    store.put_bytes(bucket, PREFIX + "c1.wav", b"call one")
    store.put_bytes(bucket, PREFIX + "c1.json", json.dumps({"agent_id": "A17", "direction": "inbound"}).encode())
    store.put_bytes(bucket, PREFIX + "_READY", b"")
    store.put_bytes(bucket, "calls/2024/03/08/c3.wav", b"next day")
    recs = list_recordings(store, conf.storage, DAY)
    assert [r.key for r in recs] == [PREFIX + "c1.wav", PREFIX + "c2.mp3"]
    assert (recs[0].agent_id, recs[0].direction, recs[1].agent_id) == ("A17", "inbound", None)
    assert recs[0].recording_id == recording_id_for(bucket, PREFIX + "c1.wav", md5(b"call one"))


def test_readiness_by_marker_and_by_quiet_period(store: ObjectStore, conf: Settings) -> None:
    bucket = conf.storage.recordings_bucket
    marker = conf.override(ready_check="marker")
    store.put_bytes(bucket, PREFIX + "c1.wav", b"call one")
    assert not recordings_ready(store, marker.storage, DAY).ready
    store.put_bytes(bucket, PREFIX + "_READY", b"")
    assert recordings_ready(store, marker.storage, DAY).ready

    quiet = conf.override(ready_check="quiet", ready_quiet_seconds=3600)
    waiting = recordings_ready(store, quiet.storage, DAY)  # the day is long over, but an upload just happened
    assert not waiting.ready and waiting.objects == 2
    assert recordings_ready(store, quiet.storage, DAY, now=datetime.now(timezone.utc) + timedelta(hours=2)).ready
    assert recordings_ready(store, quiet.override(ready_quiet_seconds=0).storage, DAY).ready
    # An empty day is ready once it is over (a holiday in a backfill), not before.
    assert recordings_ready(store, quiet.storage, date(2024, 3, 9)).ready
    tomorrow = datetime.now(timezone.utc).date() + timedelta(days=1)
    assert not recordings_ready(store, quiet.override(ready_quiet_seconds=0).storage, tomorrow).ready
    with pytest.raises(ValueError, match="ready_check"):
        recordings_ready(store, conf.override(ready_check="soon").storage, DAY)


# --- MinIO only ----------------------------------------------------------------------


@pytest.mark.minio
def test_stat_returns_user_metadata(s3_conf: Settings) -> None:
    store = open_store(s3_conf.storage)
    assert isinstance(store, MinioStore)
    store.put_bytes(s3_conf.storage.recordings_bucket, "k.wav", b"x")  # creates the bucket
    store.client.put_object(s3_conf.storage.recordings_bucket, "k.wav", io.BytesIO(b"xyz"), 3,
                            metadata={"agent-id": "A1", "direction": "inbound"})
    info = store.stat(s3_conf.storage.recordings_bucket, "k.wav")
    assert info is not None and info.size == 3 and dict(info.metadata) == {"agent-id": "A1", "direction": "inbound"}


@pytest.mark.minio  # 1,005 uploads; bench/listing.py pages through 100,000 keys
def test_listing_pages_through_more_than_a_thousand_keys(s3_conf: Settings) -> None:
    store = open_store(s3_conf.storage)
    bucket = s3_conf.storage.recordings_bucket
    keys = [f"{PREFIX}{i:05d}.wav" for i in range(1005)]
    store.put_bytes(bucket, keys[0], b"x")
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda k: store.put_bytes(bucket, k, b"x"), keys[1:]))
    store.put_bytes(bucket, "calls/2024/03/08/other.wav", b"x")
    assert [k.key for k in store.list_keys(bucket, PREFIX)] == keys  # two pages, in order, nothing twice


@pytest.mark.minio
def test_transient_errors_are_retried_until_the_server_is_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    port, key, secret = free_port(), "asr-late", "late-secret-key"
    store = MinioStore(MinioConfig(f"127.0.0.1:{port}", key, secret, secure=False), tmp_path, retries=10,
                       backoff_seconds=0.2)
    late: list[services.MinioServer] = []

    def start() -> None:  # the server comes up while the client retries
        late.append(services.start_minio(port, access_key=key, secret_key=secret))

    threading.Timer(1.0, start).start()
    try:
        with caplog.at_level(logging.WARNING, logger="asr_tasks.intake.stores"):
            assert list(store.list_keys("late", "calls/")) == []  # a listing waits for the server too
        assert "list late/calls/: NewConnectionError" in caplog.text and "retry 1 of 10" in caplog.text
        store.put_bytes("late", "k.wav", b"after all")
        assert [k.key for k in store.list_keys("late", "")] == ["k.wav"]
        assert store.get_bytes("late", "k.wav") == b"after all"
    finally:
        for server in late:
            server.server.stop()

    impatient = MinioStore(MinioConfig(f"127.0.0.1:{free_port()}", "k", "s", secure=False), tmp_path, retries=0)
    with pytest.raises(urllib3.exceptions.HTTPError):
        impatient.get_bytes("late", "k.wav")


@pytest.fixture(scope="module")
def tls_server() -> Iterator[services.MinioServer]:
    """A second MinIO, behind TLS with a certificate from a throw-away CA."""
    server = services.start_minio(tls=True)
    yield server
    server.server.stop()


@pytest.mark.minio
def test_tls_with_the_intranet_ca_bundle(
    tls_server: services.MinioServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    endpoint, key, secret, ca = tls_server.endpoint, tls_server.access_key, tls_server.secret_key, tls_server.ca_bundle
    trusted = MinioStore(MinioConfig(endpoint, key, secret, secure=True, ca_bundle=ca), tmp_path)
    trusted.put_bytes("tls", "k.wav", b"over TLS")
    assert trusted.get_bytes("tls", "k.wav") == b"over TLS"

    untrusted = MinioStore(MinioConfig(endpoint, key, secret, secure=True), tmp_path)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="asr_tasks.intake.stores"):
        with pytest.raises(urllib3.exceptions.SSLError, match="CERTIFICATE_VERIFY_FAILED"):
            untrusted.get_bytes("tls", "k.wav")
    assert "retry" not in caplog.text and time.monotonic() - started < 5  # not transient: no back-off

    with pytest.raises(FileNotFoundError, match="missing-ca.pem"):
        MinioStore(MinioConfig(endpoint, secure=True, ca_bundle=str(tmp_path / "missing-ca.pem")), tmp_path)


@pytest.mark.minio
def test_switching_to_minio_is_configuration_only(s3_server: S3Server, s3_conf: Settings, tmp_path: Path) -> None:
    scheme = "https" if s3_server.secure else "http"
    env = {**s3_server.env(), "ASR_MINIO_ENDPOINT": f"{scheme}://{s3_server.endpoint}", "ASR_MINIO_SECURE": "true",
           "ASR_RECORDINGS_BUCKET": s3_conf.storage.recordings_bucket, "ASR_WORK_DIR": str(tmp_path / "work")}
    conf = load_settings(env=env)
    store = open_store(conf.storage)
    assert isinstance(store, MinioStore) and store.config.secure is s3_server.secure  # the URL's scheme decides
    store.put_bytes(conf.storage.recordings_bucket, PREFIX + "c1.wav", b"one")
    assert [r.key for r in list_recordings(store, conf.storage, DAY)] == [PREFIX + "c1.wav"]
    with pytest.raises(ValueError, match="store_backend"):
        open_store(conf.override(store_backend="s3").storage)


@pytest.mark.minio
def test_airflow_connection_wins_inside_airflow_tasks(
    s3_server: S3Server, s3_conf: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(PROJECT_ROOT / "plugins"))
    from airflow_store import connection_minio_config, task_store

    conf = s3_conf.override(minio_endpoint="nowhere.invalid:9000", minio_conn_id="asr_minio_test")
    host, port = s3_server.endpoint.rsplit(":", 1)
    monkeypatch.setenv("AIRFLOW_CONN_ASR_MINIO_TEST", json.dumps({
        "conn_type": "aws", "host": host, "port": int(port), "login": s3_server.access_key,
        "password": s3_server.secret_key, "extra": {"secure": s3_server.secure, "ca_bundle": s3_server.ca_bundle},
    }))
    assert minio_config(conf.storage).endpoint == "nowhere.invalid:9000"  # the library: the settings
    resolved = connection_minio_config(conf.storage)  # a task: the connection
    assert resolved is not None
    assert resolved.endpoint == s3_server.endpoint and resolved.secret_key == s3_server.secret_key
    assert s3_server.secret_key not in repr(resolved)
    store = task_store(conf.storage)
    store.put_bytes(conf.storage.recordings_bucket, "k.wav", b"via the connection")
    assert store.get_bytes(conf.storage.recordings_bucket, "k.wav") == b"via the connection"
    # A connection that does not exist falls back to the settings.
    assert connection_minio_config(conf.override(minio_conn_id="asr_absent").storage) is None
    assert connection_minio_config(conf.override(store_backend="local").storage) is None


def test_minio_config_from_a_connection_url(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.sdk import Connection
    monkeypatch.syspath_prepend(str(PROJECT_ROOT / "plugins"))
    from airflow_store import config_from_connection

    conn = Connection(conn_id="m", conn_type="aws", host="https://minio.intranet:9443", login="ak", password="sk",
                      extra=json.dumps({"ca_bundle": "/etc/ssl/intranet.pem", "region": "dc1"}))
    assert config_from_connection(conn) == MinioConfig("minio.intranet:9443", "ak", "sk", True,
                                                            "/etc/ssl/intranet.pem", "dc1")
    plain = Connection(conn_id="m", conn_type="aws", host="minio", port=9000, extra=json.dumps({"secure": False}))
    assert config_from_connection(plain) == MinioConfig("minio:9000", secure=False)
    with pytest.raises(ValueError, match="no host"):
        config_from_connection(Connection(conn_id="m", conn_type="aws"))


@pytest.mark.minio
def test_sensor_pokes_the_marker_on_the_server(
    s3_server: S3Server, s3_conf: Settings, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name, value in {**s3_server.env(), "ASR_RECORDINGS_BUCKET": s3_conf.storage.recordings_bucket,
                        "ASR_WORK_DIR": str(tmp_path), "ASR_READY_CHECK": "marker", "ASR_MINIO_CONN_ID": "none",
                        "ASR_SENSOR_POKE_SECONDS": "120"}.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    monkeypatch.syspath_prepend(str(PROJECT_ROOT / "plugins"))
    from recordings_sensor import RecordingsReadySensor

    try:
        sensor = RecordingsReadySensor(task_id="wait_for_recordings", day=DAY.isoformat())
        assert sensor.mode == "reschedule" and sensor.poke_interval == 120
        store = open_store(get_settings().storage)
        store.put_bytes(s3_conf.storage.recordings_bucket, PREFIX + "c1.wav", b"call")
        assert sensor.poke({}) is False
        store.put_bytes(s3_conf.storage.recordings_bucket, PREFIX + "_READY", b"")
        assert sensor.poke({}) is True
    finally:
        get_settings.cache_clear()


def test_local_store_refuses_a_key_outside_its_folder(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    with pytest.raises(ValueError):
        b"".join(store.stream("b", "../x.wav", 0, 1))


def test_store_library_stays_free_of_airflow() -> None:
    code = ("import sys, pkgutil, importlib, asr_tasks; "
            "names = [m.name for m in pkgutil.walk_packages(asr_tasks.__path__, 'asr_tasks.') "
            "if not m.name.endswith('__main__') and '.migrations' not in m.name]; "
            "[importlib.import_module(n) for n in names]; "
            "print(len(names), [m for m in sys.modules if m.startswith('airflow')])")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=PROJECT_ROOT)
    assert proc.returncode == 0, proc.stderr
    count, airflow = proc.stdout.strip().split(" ", 1)
    assert int(count) >= 25 and airflow == "[]"  # every module of the library, none of Airflow
