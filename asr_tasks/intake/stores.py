"""Object storage behind one small interface: a local folder embedded, MinIO in production.

Keys follow the MinIO layout (``calls/YYYY/MM/DD/<call_id>.<ext>``, optional
sidecar ``<call_id>.json``), so switching backends changes configuration only
(``store_backend: local`` or ``minio``).
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import re
import shutil
import tempfile
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Protocol, TypeVar
from urllib.parse import urlsplit

import tenacity

from asr_tasks import retry
from asr_tasks.config import StorageSettings

log = logging.getLogger(__name__)
T = TypeVar("T")
CHUNK_BYTES = 1 << 16  # what a stream reads at a time


@dataclass(frozen=True)
class ObjectInfo:
    """One object's identity (key, size, ETag); last-modified and user metadata when the backend has them."""

    key: str
    size: int
    etag: str
    last_modified: datetime | None = field(default=None, compare=False)
    metadata: Mapping[str, str] = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class KeyInfo:
    """A listed key without its ETag: all a readiness check needs, and cheap on every backend."""

    key: str
    size: int
    last_modified: datetime


class ObjectStore(Protocol):
    """What the pipeline needs from object storage. Listings come in S3 order (sorted by whole key)."""

    def list(self, bucket: str, prefix: str) -> Iterator[ObjectInfo]: ...

    def list_keys(self, bucket: str, prefix: str) -> Iterator[KeyInfo]: ...

    def stat(self, bucket: str, key: str) -> ObjectInfo | None: ...

    def exists(self, bucket: str, key: str) -> bool: ...

    def get_bytes(self, bucket: str, key: str) -> bytes: ...

    def put_bytes(self, bucket: str, key: str, data: bytes) -> None: ...

    def put_file(self, bucket: str, key: str, path: Path) -> None: ...

    def delete(self, bucket: str, key: str) -> None:
        """Remove the object, every version of it where the bucket keeps versions; removing one that is not
        there is not an error (an erasure may run twice)."""
        ...

    def local_copy(self, bucket: str, key: str) -> AbstractContextManager[Path]: ...

    def head(self, bucket: str, key: str, length: int) -> bytes:
        """The object's first ``length`` bytes (what it is, by its content)."""
        ...

    def stream(self, bucket: str, key: str, start: int, length: int) -> Iterator[bytes]:
        """``length`` bytes of the object from ``start``, in chunks: a part of a recording as a player asks for it."""
        ...


class ObjectLocked(PermissionError):
    """The store refused to delete an object: a legal hold or a retention stands on it."""


class LocalStore:
    """A folder with one sub-folder per bucket; ETags are content MD5s like S3's."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def _path(self, bucket: str, key: str) -> Path:
        if not key or key.startswith("/") or ".." in Path(key).parts:
            raise ValueError(f"invalid object key: {key!r}")
        return self.root / bucket / key

    def list_keys(self, bucket: str, prefix: str) -> Iterator[KeyInfo]:
        base = self.root / bucket
        start = base / prefix if prefix else base
        folder = start if start.is_dir() or not prefix else start.parent
        if not folder.is_dir():
            return
        found = []
        for dirpath, _dirnames, filenames in os.walk(folder):
            for name in filenames:
                key = (Path(dirpath) / name).relative_to(base).as_posix()
                if key.startswith(prefix) and not name.startswith(".tmp-"):
                    found.append(key)
        for key in sorted(found):  # S3/MinIO order: by whole key, not folder by folder
            try:
                st = (base / key).stat()
            except FileNotFoundError:
                continue  # removed while listing
            yield KeyInfo(key, st.st_size, datetime.fromtimestamp(st.st_mtime, timezone.utc))

    def list(self, bucket: str, prefix: str) -> Iterator[ObjectInfo]:
        for item in self.list_keys(bucket, prefix):
            info = self.stat(bucket, item.key)
            if info is not None:
                yield info

    def stat(self, bucket: str, key: str) -> ObjectInfo | None:
        path = self._path(bucket, key)
        if not path.is_file():
            return None
        st = path.stat()
        return ObjectInfo(key=key, size=st.st_size, etag=_known_etag(str(path), st.st_size, st.st_mtime_ns),
                          last_modified=datetime.fromtimestamp(st.st_mtime, timezone.utc))

    def exists(self, bucket: str, key: str) -> bool:
        return self._path(bucket, key).is_file()

    def get_bytes(self, bucket: str, key: str) -> bytes:
        return self._path(bucket, key).read_bytes()

    def delete(self, bucket: str, key: str) -> None:
        self._path(bucket, key).unlink(missing_ok=True)

    def put_bytes(self, bucket: str, key: str, data: bytes) -> None:
        path = self._path(bucket, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".tmp-", delete=False) as tmp:
            tmp.write(data)
        os.chmod(tmp.name, 0o644)
        os.replace(tmp.name, path)  # atomic: readers never see half an object

    def put_file(self, bucket: str, key: str, path: Path) -> None:
        target = self._path(bucket, key)
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=target.parent, prefix=".tmp-", delete=False) as tmp, open(path, "rb") as src:
            shutil.copyfileobj(src, tmp, 1024 * 1024)
        os.chmod(tmp.name, 0o644)
        os.replace(tmp.name, target)

    @contextmanager
    def local_copy(self, bucket: str, key: str) -> Iterator[Path]:
        """A local path to the object; the folder backend needs no download."""
        path = self._path(bucket, key)
        if not path.is_file():
            raise FileNotFoundError(f"{bucket}/{key}: no such object")
        yield path

    def head(self, bucket: str, key: str, length: int) -> bytes:
        path = self._path(bucket, key)
        if not path.is_file():
            raise FileNotFoundError(f"{bucket}/{key}: no such object")
        with open(path, "rb") as fh:
            return fh.read(length)

    def stream(self, bucket: str, key: str, start: int, length: int) -> Iterator[bytes]:
        path = self._path(bucket, key)
        if not path.is_file():
            raise FileNotFoundError(f"{bucket}/{key}: no such object")
        with open(path, "rb") as fh:
            fh.seek(start)
            while length > 0 and (chunk := fh.read(min(CHUNK_BYTES, length))):
                length -= len(chunk)
                yield chunk


# --- MinIO ---------------------------------------------------------------------------

_MISSING = {"NoSuchKey", "NoSuchObject", "NoSuchBucket", "ResourceNotFound"}
_TRANSIENT_CODES = {
    "SlowDown", "SlowDownRead", "SlowDownWrite", "InternalError", "ServiceUnavailable", "RequestTimeout",
    "OperationAborted", "XMinioServerNotInitialized", "XMinioReadQuorum", "XMinioWriteQuorum",
}


@dataclass(frozen=True)
class MinioConfig:
    """Where MinIO is and how to talk to it; the secret never shows in logs or reprs."""

    endpoint: str  # host:port
    access_key: str = ""
    secret_key: str = field(default="", repr=False)
    secure: bool = True
    ca_bundle: str | None = None
    region: str | None = None

    @classmethod
    def from_settings(cls, settings: StorageSettings) -> "MinioConfig":
        endpoint, secure = split_endpoint(settings.minio_endpoint, settings.minio_secure)
        return cls(
            endpoint=endpoint,
            access_key=settings.minio_access_key,
            secret_key=settings.minio_secret_key,
            secure=secure,
            ca_bundle=str(settings.path("minio_ca_bundle")) if settings.minio_ca_bundle else None,
            region=settings.minio_region,
        )


def split_endpoint(value: str, secure: bool) -> tuple[str, bool]:
    """``https://host:9000`` or ``host:9000`` to (``host:9000``, secure)."""
    if "://" not in value:
        return value.strip().rstrip("/"), secure
    parts = urlsplit(value)
    if parts.scheme not in {"http", "https"} or not parts.netloc:
        raise ValueError(f"MinIO endpoint {value!r}: expected host:port or http(s)://host:port")
    return parts.netloc, parts.scheme == "https"


def minio_config(settings: StorageSettings) -> MinioConfig:
    """MinIO's endpoint and keys from the settings (Airflow tasks hand over their connection's instead)."""
    return MinioConfig.from_settings(settings)


def is_transient(exc: BaseException) -> bool:
    """Errors worth retrying: dropped connections, timeouts, 5xx and throttling. Not TLS or auth failures."""
    import urllib3.exceptions as http
    from minio.error import InvalidResponseError, S3Error, ServerError

    if isinstance(exc, http.SSLError):
        return False
    if isinstance(exc, http.MaxRetryError):
        return not isinstance(exc.reason, http.SSLError)
    if isinstance(exc, (http.HTTPError, ConnectionError, TimeoutError, ServerError)):
        return True
    if isinstance(exc, S3Error):
        return exc.code in _TRANSIENT_CODES or exc.response.status >= 500
    if isinstance(exc, InvalidResponseError):
        status = response_status(exc)
        return status is not None and (status >= 500 or status == 429)
    return False


def response_status(exc: BaseException) -> int | None:
    """The HTTP status of a non-XML answer: the client names it only in its message ("Response code: 503")."""
    found = re.search(r"Response code: (\d{3})", str(exc))
    return int(found.group(1)) if found else None


class MinioStore:
    """MinIO (or any S3 server) through the ``minio`` client.

    Every call is retried with exponential back-off (and jitter) on transient
    errors; listings resume after the last key they returned, downloads stream
    to a temporary file under ``work_dir``, and uploads create a missing bucket.
    """

    def __init__(self, config: MinioConfig, work_dir: Path, retries: int = 5, backoff_seconds: float = 0.5,
                 object_lock: bool = False) -> None:
        import certifi
        import urllib3
        from minio import Minio

        if config.ca_bundle and not Path(config.ca_bundle).is_file():
            raise FileNotFoundError(f"MinIO CA bundle {config.ca_bundle}: no such file")
        http_client = urllib3.PoolManager(
            timeout=urllib3.Timeout(connect=10, read=300),
            maxsize=16,
            cert_reqs="CERT_REQUIRED",
            ca_certs=config.ca_bundle or os.environ.get("SSL_CERT_FILE") or certifi.where(),
            retries=False,  # one retry layer: ours, which knows S3 error codes and resumes listings
        )
        self.config = config
        self.client = Minio(
            config.endpoint,
            access_key=config.access_key or None,
            secret_key=config.secret_key or None,
            secure=config.secure,
            region=config.region,
            http_client=http_client,
        )
        self.work_dir = Path(work_dir)
        self.retries = retries
        self.backoff_seconds = backoff_seconds
        self.object_lock = object_lock  # buckets it creates have object locking (and so keep versions)

    def _retrying(self, what: str) -> tenacity.Retrying:
        return retry.policy(what, is_transient, self.retries, self.backoff_seconds, logger=log)

    def call(self, what: str, fn: Callable[[], T]) -> T:
        """``fn`` retried on transient errors (what the lock calls of ``locks.py`` go through too)."""
        return self._retrying(what)(fn)

    def _objects(self, bucket: str, prefix: str) -> Iterator[Any]:
        """The raw listing, page by page; a transient error resumes after the last key seen."""
        from minio.error import S3Error

        last: str | None = None
        for attempt in self._retrying(f"list {bucket}/{prefix}"):
            with attempt:
                try:
                    for obj in self.client.list_objects(bucket, prefix=prefix or None, recursive=True,
                                                        start_after=last):
                        if obj.is_dir:
                            continue
                        last = obj.object_name
                        yield obj
                except S3Error as exc:
                    if exc.code != "NoSuchBucket":
                        raise
                    # no bucket: like an empty folder

    def list(self, bucket: str, prefix: str) -> Iterator[ObjectInfo]:
        for obj in self._objects(bucket, prefix):
            yield ObjectInfo(obj.object_name, int(obj.size or 0), _clean_etag(obj.etag), obj.last_modified)

    def list_keys(self, bucket: str, prefix: str) -> Iterator[KeyInfo]:
        for obj in self._objects(bucket, prefix):
            yield KeyInfo(obj.object_name, int(obj.size or 0), obj.last_modified)

    def stat(self, bucket: str, key: str) -> ObjectInfo | None:
        from minio.error import S3Error

        try:
            obj = self.call(f"stat {bucket}/{key}", lambda: self.client.stat_object(bucket, key))
        except S3Error as exc:
            if exc.code in _MISSING:
                return None
            raise
        meta = {k.lower()[len("x-amz-meta-"):]: v for k, v in (obj.metadata or {}).items()
                if k.lower().startswith("x-amz-meta-")}
        return ObjectInfo(key, int(obj.size or 0), _clean_etag(obj.etag), obj.last_modified, meta)

    def exists(self, bucket: str, key: str) -> bool:
        return self.stat(bucket, key) is not None

    def get_bytes(self, bucket: str, key: str) -> bytes:
        def get() -> bytes:
            response = self.client.get_object(bucket, key)
            try:
                return response.read()
            finally:
                response.close()
                response.release_conn()

        with _missing_as_file_not_found(bucket, key):
            return self.call(f"get {bucket}/{key}", get)

    def put_bytes(self, bucket: str, key: str, data: bytes) -> None:
        self._put(bucket, key, lambda: self.client.put_object(bucket, key, io.BytesIO(data), len(data)))

    def put_file(self, bucket: str, key: str, path: Path) -> None:
        self._put(bucket, key, lambda: self.client.fput_object(bucket, key, str(path)))

    def delete(self, bucket: str, key: str) -> None:
        """Every version of the object and its delete markers (a versioned bucket, as object locking makes one,
        keeps the data under a plain delete); a governance retention is ended, a legal hold or a compliance
        retention refuses (``ObjectLocked``)."""
        from minio.deleteobjects import DeleteObject

        found = [DeleteObject(key, None if obj.version_id in (None, "null") else obj.version_id)
                 for obj in self.versions(bucket, key)]
        refused = self.call(f"delete {bucket}/{key}", lambda: [
            e for e in self.client.remove_objects(bucket, found, bypass_governance_mode=True)
            if e.code not in _MISSING])
        if refused:
            raise ObjectLocked(f"{bucket}/{key}: MinIO refused to delete it ({refused[0].code}: {refused[0].message})")

    def versions(self, bucket: str, key: str, under: bool = False) -> tuple[Any, ...]:
        """Every version and delete marker of exactly this key, or (``under``) of every key under this prefix
        (none: no such key, or no bucket)."""
        from minio.error import S3Error

        def listed() -> tuple[Any, ...]:
            return tuple(obj for obj in self.client.list_objects(bucket, prefix=key, recursive=True,
                                                                 include_version=True)
                         if under or obj.object_name == key)

        try:
            return self.call(f"list the versions of {bucket}/{key}", listed)
        except S3Error as exc:
            if exc.code not in _MISSING:
                raise
            return ()

    def _put(self, bucket: str, key: str, upload: Callable[[], Any]) -> None:
        from minio.error import S3Error

        try:
            self.call(f"put {bucket}/{key}", upload)
        except S3Error as exc:
            if exc.code != "NoSuchBucket":
                raise
            self._make_bucket(bucket)
            self.call(f"put {bucket}/{key}", upload)

    def _make_bucket(self, bucket: str) -> None:
        from minio.error import S3Error

        try:
            self.call(f"create bucket {bucket}", lambda: self.client.make_bucket(bucket, object_lock=self.object_lock))
        except S3Error as exc:
            if exc.code not in {"BucketAlreadyOwnedByYou", "BucketAlreadyExists"}:
                raise

    @contextmanager
    def local_copy(self, bucket: str, key: str) -> Iterator[Path]:
        """The object streamed to a temporary file (same name as the key's last part), removed afterwards."""
        self.work_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=self.work_dir, prefix="download-") as tmp:
            path = Path(tmp) / (key.rsplit("/", 1)[-1] or "object")
            with _missing_as_file_not_found(bucket, key):
                self.call(f"download {bucket}/{key}", lambda: self.client.fget_object(bucket, key, str(path)))
            yield path

    def head(self, bucket: str, key: str, length: int) -> bytes:
        def read() -> bytes:
            answer = self.client.get_object(bucket, key, offset=0, length=length)
            try:
                return bytes(answer.read())
            finally:
                answer.close()
                answer.release_conn()

        with _missing_as_file_not_found(bucket, key):
            return self.call(f"read the head of {bucket}/{key}", read)

    def stream(self, bucket: str, key: str, start: int, length: int) -> Iterator[bytes]:
        with _missing_as_file_not_found(bucket, key):
            answer = self.call(f"read {bucket}/{key}", lambda: self.client.get_object(bucket, key, offset=start,
                                                                                        length=length))
        try:
            yield from answer.stream(CHUNK_BYTES)
        finally:
            answer.close()
            answer.release_conn()


@contextmanager
def _missing_as_file_not_found(bucket: str, key: str) -> Iterator[None]:
    from minio.error import S3Error

    try:
        yield
    except S3Error as exc:
        if exc.code in _MISSING:
            raise FileNotFoundError(f"{bucket}/{key}: no such object") from exc
        raise


def _clean_etag(etag: str | None) -> str:
    return (etag or "").strip('"')


# --- helpers ------------------------------------------------------------------------


def get_json(store: ObjectStore, bucket: str, key: str) -> Any:
    return json.loads(store.get_bytes(bucket, key))


def put_json(store: ObjectStore, bucket: str, key: str, value: Any) -> None:
    store.put_bytes(bucket, key, json.dumps(value, ensure_ascii=False, indent=1).encode())


@lru_cache(maxsize=4096)
def _known_etag(path: str, size: int, mtime_ns: int) -> str:
    """A file's MD5, read once per size and modification time: the audio route checks it on every request."""
    return _etag(Path(path))


def _etag(path: Path) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1024 * 1024), b""):
            digest.update(block)
    return digest.hexdigest()


def open_store(settings: StorageSettings, minio: MinioConfig | None = None) -> ObjectStore:
    """The configured store; ``minio`` overrides the MinIO settings (an Airflow connection, say)."""
    if settings.store_backend == "local":
        return LocalStore(settings.path("store_root"))
    if settings.store_backend == "minio":
        return MinioStore(minio or minio_config(settings), settings.path("work_dir"),
                          settings.store_retries, settings.store_retry_backoff_seconds, settings.object_lock)
    raise ValueError(f"unknown store_backend {settings.store_backend!r} (supported: local, minio)")

