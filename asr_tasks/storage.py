"""Object storage behind one small interface: a local folder now, MinIO in production.

Keys follow the MinIO layout (``calls/YYYY/MM/DD/<call_id>.<ext>``, optional
sidecar ``<call_id>.json``), so switching backends changes configuration only.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import logging
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any, Iterator, Protocol

from asr_tasks.config import Settings
from asr_tasks.models import Recording, recording_id_for

log = logging.getLogger(__name__)

SIDECAR_SUFFIX = ".json"
MARKER_PREFIX = "_"  # _READY and similar markers are not recordings


@dataclass(frozen=True)
class ObjectInfo:
    key: str
    size: int
    etag: str


class ObjectStore(Protocol):
    """What the pipeline needs from object storage."""

    def list(self, bucket: str, prefix: str) -> Iterator[ObjectInfo]: ...

    def stat(self, bucket: str, key: str) -> ObjectInfo | None: ...

    def exists(self, bucket: str, key: str) -> bool: ...

    def get_bytes(self, bucket: str, key: str) -> bytes: ...

    def put_bytes(self, bucket: str, key: str, data: bytes) -> None: ...

    def put_file(self, bucket: str, key: str, path: Path) -> None: ...

    def local_copy(self, bucket: str, key: str) -> AbstractContextManager[Path]: ...


class LocalStore:
    """A folder with one sub-folder per bucket; ETags are content MD5s like S3's."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def _path(self, bucket: str, key: str) -> Path:
        if not key or key.startswith("/") or ".." in Path(key).parts:
            raise ValueError(f"invalid object key: {key!r}")
        return self.root / bucket / key

    def list(self, bucket: str, prefix: str) -> Iterator[ObjectInfo]:
        base = self.root / bucket
        start = base / prefix if prefix else base
        folder = start if start.is_dir() or not prefix else start.parent
        if not folder.is_dir():
            return
        keys = []
        for dirpath, _dirnames, filenames in os.walk(folder):
            for name in filenames:
                key = (Path(dirpath) / name).relative_to(base).as_posix()
                if key.startswith(prefix) and not name.startswith(".tmp-"):
                    keys.append(key)
        for key in sorted(keys):  # S3/MinIO order: by whole key, not folder by folder
            info = self.stat(bucket, key)
            if info is not None:
                yield info

    def stat(self, bucket: str, key: str) -> ObjectInfo | None:
        path = self._path(bucket, key)
        if not path.is_file():
            return None
        return ObjectInfo(key=key, size=path.stat().st_size, etag=_etag(path))

    def exists(self, bucket: str, key: str) -> bool:
        return self._path(bucket, key).is_file()

    def get_bytes(self, bucket: str, key: str) -> bytes:
        return self._path(bucket, key).read_bytes()

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
        with tempfile.NamedTemporaryFile(dir=target.parent, prefix=".tmp-", delete=False) as tmp:
            with open(path, "rb") as src:
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



def get_json(store: ObjectStore, bucket: str, key: str) -> Any:
    return json.loads(store.get_bytes(bucket, key))


def put_json(store: ObjectStore, bucket: str, key: str, value: Any) -> None:
    store.put_bytes(bucket, key, json.dumps(value, ensure_ascii=False, indent=1).encode())


def _etag(path: Path) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1024 * 1024), b""):
            digest.update(block)
    return digest.hexdigest()


def open_store(settings: Settings) -> ObjectStore:
    if settings.store_backend == "local":
        return LocalStore(settings.path("store_root"))
    raise ValueError(f"unknown store_backend {settings.store_backend!r} (supported: local)")


def day_prefix(settings: Settings, day: date) -> str:
    return f"{settings.recordings_prefix}/{day:%Y/%m/%d}/"


_DAY_KEY = re.compile(r"(?:^|/)(\d{4})/(\d{2})/(\d{2})/[^/]+$")


def list_recordings(store: ObjectStore, settings: Settings, day: date) -> list[Recording]:
    """The day's recordings with their sidecar metadata; sidecars and markers are skipped."""
    bucket = settings.recordings_bucket
    objects = list(store.list(bucket, day_prefix(settings, day)))
    keys = {o.key for o in objects}
    recordings = []
    for obj in objects:
        name = obj.key.rsplit("/", 1)[-1]
        if name.startswith(MARKER_PREFIX) or name.startswith("."):
            continue
        stem = name.rsplit(".", 1)[0] if "." in name else name
        sidecar_key = obj.key[: -len(name)] + stem + SIDECAR_SUFFIX
        if obj.key.endswith(SIDECAR_SUFFIX):
            continue  # a sidecar, or a mislabelled file that a sidecar shares a name with
        meta = _read_sidecar(store, bucket, sidecar_key) if sidecar_key in keys else {}
        recordings.append(
            Recording(
                recording_id=recording_id_for(bucket, obj.key, obj.etag),
                bucket=bucket,
                key=obj.key,
                etag=obj.etag,
                size=obj.size,
                call_id=stem,
                call_date=f"{day:%Y-%m-%d}",
                agent_id=_opt_str(meta.get("agent_id")),
                customer_id=_opt_str(meta.get("customer_id")),
                direction=_opt_str(meta.get("direction")),
                started_at=_opt_str(meta.get("started_at")),
            )
        )
    return recordings


def recording_for_file(path: Path) -> Recording:
    """A Recording for a loose local file (``asr transcribe``), sidecar beside it if any."""
    path = path.resolve()
    etag = _etag(path)
    sidecar = path.with_suffix(SIDECAR_SUFFIX)
    meta = _parse_sidecar(sidecar.read_bytes(), str(sidecar)) if sidecar.is_file() and sidecar != path else {}
    match = _DAY_KEY.search(path.as_posix())
    call_date = "-".join(match.groups()) if match else ""
    return Recording(
        recording_id=recording_id_for("file", str(path), etag),
        bucket="file",
        key=str(path),
        etag=etag,
        size=path.stat().st_size,
        call_id=path.stem,
        call_date=call_date,
        agent_id=_opt_str(meta.get("agent_id")),
        customer_id=_opt_str(meta.get("customer_id")),
        direction=_opt_str(meta.get("direction")),
        started_at=_opt_str(meta.get("started_at")),
    )


def _read_sidecar(store: ObjectStore, bucket: str, key: str) -> dict[str, Any]:
    return _parse_sidecar(store.get_bytes(bucket, key), f"{bucket}/{key}")


def _parse_sidecar(data: bytes, where: str) -> dict[str, Any]:
    try:
        value = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        log.warning("%s: sidecar ignored, not valid JSON: %s", where, exc)
        return {}
    if not isinstance(value, dict):
        log.warning("%s: sidecar ignored, not a JSON object", where)
        return {}
    return value


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)
