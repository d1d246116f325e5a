"""Object storage behind one small interface: a local folder embedded, MinIO in production.

Keys follow the MinIO layout (``calls/YYYY/MM/DD/<call_id>.<ext>``, optional
sidecar ``<call_id>.json``), so switching backends changes configuration only
(``store_backend: local`` or ``minio``).
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from asr_tasks.config import StorageSettings
from asr_tasks.intake.stores import ObjectStore, _etag
from asr_tasks.models import Recording, recording_id_for

log = logging.getLogger(__name__)
DIRECTION = re.compile(r"[a-z][a-z_-]{0,19}")  # inbound, outbound, internal, ...

SIDECAR_SUFFIX = ".json"
MARKER_PREFIX = "_"  # _READY and similar markers are not recordings


def day_prefix(settings: StorageSettings, day: date) -> str:
    return f"{settings.recordings_prefix}/{day:%Y/%m/%d}/"


# --- is the day complete? ------------------------------------------------------------


@dataclass(frozen=True)
class Readiness:
    ready: bool
    detail: str
    objects: int | None = None  # keys listed by a quiet-period check


def recordings_ready(store: ObjectStore, settings: StorageSettings, day: date, now: datetime | None = None) -> Readiness:
    """Whether the day's uploads are complete, at the cost of one stat or one key listing.

    ``marker``: the day's ``_READY`` object exists (one stat). ``quiet``: the day is
    over and nothing under its prefix changed for ``ready_quiet_seconds`` (one listing
    of keys and their last-modified times; no per-object stat, no sidecar read). An
    empty day becomes ready once it is over, so holidays do not stall a backfill.
    """
    bucket, prefix = settings.recordings_bucket, day_prefix(settings, day)
    if settings.ready_check == "marker":
        key = prefix + settings.ready_marker
        found = store.exists(bucket, key)
        return Readiness(found, f"{bucket}/{key} {'exists' if found else 'does not exist yet'}")
    if settings.ready_check != "quiet":
        raise ValueError(f"ready_check must be 'quiet' or 'marker', not {settings.ready_check!r}")
    now = now or datetime.now(timezone.utc)
    count, newest = 0, None
    for item in store.list_keys(bucket, prefix):
        count += 1
        if newest is None or item.last_modified > newest:
            newest = item.last_modified
    day_end = datetime.combine(day + timedelta(days=1), datetime.min.time(), tzinfo=timezone.utc)
    ready_at = max(day_end, newest or day_end) + timedelta(seconds=settings.ready_quiet_seconds)
    newest_text = newest.isoformat(timespec="seconds") if newest else "-"
    detail = (f"{count} objects under {bucket}/{prefix}, newest {newest_text}; "
              f"quiet from {ready_at.isoformat(timespec='seconds')}")
    return Readiness(now >= ready_at, detail, count)


# --- a day's recordings --------------------------------------------------------------

_DAY_KEY = re.compile(r"(?:^|/)(\d{4})/(\d{2})/(\d{2})/[^/]+$")


def sidecar_key(key: str) -> str:
    """Where a recording's metadata sidecar sits: beside it, its name's extension replaced by ``.json``."""
    name = key.rsplit("/", 1)[-1]
    return key[: -len(name)] + call_stem(name) + SIDECAR_SUFFIX


def call_stem(name: str) -> str:
    """A recording's file name without its extension: its call id, and its sidecar's name."""
    return name.rsplit(".", 1)[0] if "." in name else name


def list_recordings(store: ObjectStore, settings: StorageSettings, day: date) -> list[Recording]:
    """The day's recordings with their sidecar metadata; sidecars and markers are skipped."""
    bucket = settings.recordings_bucket
    objects = list(store.list(bucket, day_prefix(settings, day)))
    keys = {o.key for o in objects}
    recordings = []
    for obj in objects:
        name = obj.key.rsplit("/", 1)[-1]
        if name.startswith(MARKER_PREFIX) or name.startswith("."):
            continue
        sidecar = sidecar_key(obj.key)
        if obj.key.endswith(SIDECAR_SUFFIX):
            continue  # a sidecar, or a mislabelled file that a sidecar shares a name with
        rid = recording_id_for(bucket, obj.key, obj.etag)
        meta = _read_sidecar(store, bucket, sidecar, rid) if sidecar in keys else {}
        recordings.append(recording_of(bucket, obj.key, obj.etag, obj.size, f"{day:%Y-%m-%d}", meta, settings))
    return recordings


def recording_of(bucket: str, key: str, etag: str, size: int, call_date: str, meta: dict[str, Any],
                 settings: StorageSettings) -> Recording:
    """One listed object as a recording version, with its sidecar's fields as they may be kept."""
    rid = recording_id_for(bucket, key, etag)
    return Recording(
        recording_id=rid,
        bucket=bucket,
        key=key,
        etag=etag,
        size=size,
        call_id=call_stem(key.rsplit("/", 1)[-1]),
        call_date=call_date,
        **kept_fields(meta, settings, rid),
    )


def kept_fields(meta: dict[str, Any], settings: StorageSettings, recording_id: str) -> dict[str, str | None]:
    """A sidecar's fields as the pipeline keeps them: the parties' ids only of the declared shape
    (``party_id_pattern``), the direction a word, the start a time. What has another shape (a phone number as
    ``customer_id``, a name) is kept nowhere, and the log names the field, never its value."""
    party = re.compile(settings.party_id_pattern)
    kept: dict[str, str | None] = {}
    for name, fits in (("agent_id", party.fullmatch), ("customer_id", party.fullmatch),
                       ("direction", DIRECTION.fullmatch), ("started_at", _is_time)):
        value = meta.get(name)
        kept[name] = str(value) if isinstance(value, (str, int)) and not isinstance(value, bool) else None
        if kept[name] is not None and not fits(str(kept[name])):
            log.warning("recording %s: the sidecar's %s is not kept: not of the declared shape", recording_id, name)
            kept[name] = None
    return kept


def _is_time(value: str) -> bool:
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return False
    return True


def recording_again(store: ObjectStore, row: dict[str, Any], settings: StorageSettings) -> Recording:
    """A version the listing found, from where the ledger says it is (bucket, key, ETag, size, call date), its
    sidecar read again: what a later task needs, handed over as an id instead of through XCom."""
    try:
        meta = _read_sidecar(store, row["bucket"], sidecar_key(row["key"]), row["recording_id"])
    except FileNotFoundError:  # a recording without a sidecar; one request either way
        meta = {}
    return recording_of(row["bucket"], row["key"], row["etag"], int(row["size"] or 0), row["call_date"], meta,
                        settings)


def recording_for_file(path: Path, settings: StorageSettings | None = None) -> Recording:
    """A Recording for a loose local file (``asr transcribe``), sidecar beside it if any (its fields kept as
    ``settings`` say, the defaults' where none are given)."""
    settings = settings or StorageSettings()
    path = path.resolve()
    etag = _etag(path)
    sidecar = path.with_suffix(SIDECAR_SUFFIX)
    meta = _parse_sidecar(sidecar.read_bytes(), str(sidecar)) if sidecar.is_file() and sidecar != path else {}
    match = _DAY_KEY.search(path.as_posix())
    rid = recording_id_for("file", str(path), etag)
    return Recording(recording_id=rid, bucket="file", key=str(path), etag=etag, size=path.stat().st_size,
                     call_id=path.stem, call_date="-".join(match.groups()) if match else "",
                     **kept_fields(meta, settings, rid))


def _read_sidecar(store: ObjectStore, bucket: str, key: str, recording_id: str) -> dict[str, Any]:
    return _parse_sidecar(store.get_bytes(bucket, key), f"recording {recording_id}")


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



