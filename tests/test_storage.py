"""LocalStore (the MinIO stand-in) and listing a day's recordings."""

from __future__ import annotations

import hashlib
import json
import logging
from datetime import date
from pathlib import Path

import pytest

from asr_tasks.config import Settings
from asr_tasks.intake.days import list_recordings, recording_for_file
from asr_tasks.intake.stores import LocalStore, ObjectInfo, get_json, open_store, put_json
from asr_tasks.models import recording_id_for

DAY = date(2024, 3, 7)
PREFIX = "calls/2024/03/07/"


@pytest.fixture
def store(tmp_path: Path) -> LocalStore:
    return LocalStore(tmp_path / "store")


@pytest.fixture
def conf(tmp_path: Path) -> Settings:
    return Settings().override(store_root=str(tmp_path / "store"))


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def leftovers(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.startswith(".tmp-")]


# --- LocalStore -----------------------------------------------------------------


def test_put_bytes_roundtrip(store: LocalStore) -> None:
    store.put_bytes("b", "x/y/z.bin", b"hello")
    assert store.exists("b", "x/y/z.bin")
    assert store.get_bytes("b", "x/y/z.bin") == b"hello"
    assert (store.root / "b" / "x" / "y" / "z.bin").read_bytes() == b"hello"
    assert leftovers(store.root) == []


def test_put_bytes_replaces_existing_object(store: LocalStore) -> None:
    store.put_bytes("b", "k", b"first version")
    store.put_bytes("b", "k", b"v2")
    assert store.get_bytes("b", "k") == b"v2"
    assert leftovers(store.root) == []


def test_put_file_roundtrip(store: LocalStore, tmp_path: Path) -> None:
    src = tmp_path / "src.bin"
    data = bytes(range(256)) * 5000  # > 1 MiB copy block
    src.write_bytes(data)
    store.put_file("b", "a/src.bin", src)
    assert store.get_bytes("b", "a/src.bin") == data
    assert src.read_bytes() == data  # source untouched
    assert leftovers(store.root) == []


def test_stat_gives_size_and_md5_etag(store: LocalStore) -> None:
    data = b"some audio bytes" * 100
    store.put_bytes("b", "k.wav", data)
    assert store.stat("b", "k.wav") == ObjectInfo(key="k.wav", size=len(data), etag=md5(data))
    assert store.stat("b", "missing.wav") is None
    assert not store.exists("b", "missing.wav")


def test_json_helpers(store: LocalStore) -> None:
    put_json(store, "b", "m.json", {"name": "Zoë", "n": [1, 2]})
    assert get_json(store, "b", "m.json") == {"name": "Zoë", "n": [1, 2]}


def test_list_by_prefix_is_sorted_and_skips_temp_files(store: LocalStore) -> None:
    keys = [
        "p/b.wav",
        "p/a.wav",
        "p/a/x.wav",
        "p/a/y/z.wav",
        "p/a-b/x.wav",
        "p/c.json",
        "q/other.wav",
        "pz.wav",
    ]
    for key in keys:
        store.put_bytes("b", key, key.encode())
    (store.root / "b" / "p" / ".tmp-abc123").write_bytes(b"half written")
    listed = list(store.list("b", "p/"))
    expected = sorted(k for k in keys if k.startswith("p/"))
    assert [o.key for o in listed] == expected
    assert all(o.etag == md5(o.key.encode()) and o.size == len(o.key) for o in listed)


def test_list_partial_name_prefix(store: LocalStore) -> None:
    for key in ["calls/2024/03/07/a.wav", "calls/2024/03/17/b.wav", "calls/2024/03/27/c.wav", "calls/2024/04/01/d.wav"]:
        store.put_bytes("b", key, b"x")
    assert [o.key for o in store.list("b", "calls/2024/03/1")] == ["calls/2024/03/17/b.wav"]
    assert [o.key for o in store.list("b", "calls/2024/03/")] == [
        "calls/2024/03/07/a.wav",
        "calls/2024/03/17/b.wav",
        "calls/2024/03/27/c.wav",
    ]


def test_list_missing_prefix_or_bucket_is_empty(store: LocalStore) -> None:
    store.put_bytes("other", "k.wav", b"x")
    assert list(store.list("b", "calls/")) == []
    assert list(store.list("b", "")) == []  # must not wander into another bucket
    assert list(store.list("other", "nothing/here/")) == []
    assert [o.key for o in store.list("other", "")] == ["k.wav"]


@pytest.mark.parametrize("key", ["../escape", "a/../../escape", "a/../b", "/abs/key", ""])
def test_invalid_keys_rejected(store: LocalStore, key: str) -> None:
    with pytest.raises(ValueError):
        store.put_bytes("b", key, b"x")
    with pytest.raises(ValueError):
        store.stat("b", key)
    assert not (store.root.parent / "escape").exists()


def test_local_copy(store: LocalStore) -> None:
    store.put_bytes("b", "k.wav", b"abc")
    with store.local_copy("b", "k.wav") as path:
        assert path.read_bytes() == b"abc"
    with pytest.raises(FileNotFoundError):
        with store.local_copy("b", "nope.wav"):
            pass


def test_open_store(conf: Settings) -> None:
    s = open_store(conf.storage)
    assert isinstance(s, LocalStore) and s.root == Path(conf.storage.store_root)
    with pytest.raises(ValueError, match="store_backend"):
        open_store(conf.override(store_backend="s3").storage)


# --- list_recordings --------------------------------------------------------------


def test_list_recordings_skips_sidecars_and_markers(store: LocalStore, conf: Settings) -> None:
    bucket = conf.storage.recordings_bucket
    store.put_bytes(bucket, PREFIX + "c2.mp3", b"call two")
    store.put_bytes(bucket, PREFIX + "c1.wav", b"call one")
    store.put_bytes(bucket, PREFIX + "c1.json", json.dumps({
        "agent_id": "A17", "customer_id": 4711, "direction": "inbound", "started_at": "2024-03-07T09:15:00Z",
    }).encode())
    store.put_bytes(bucket, PREFIX + "_READY", b"")
    store.put_bytes(bucket, PREFIX + "orphan.json", b"{}")
    store.put_bytes(bucket, "calls/2024/03/08/c3.wav", b"next day")

    recs = list_recordings(store, conf.storage, DAY)
    assert [r.key for r in recs] == [PREFIX + "c1.wav", PREFIX + "c2.mp3"]
    c1, c2 = recs
    assert (c1.call_id, c1.call_date, c1.bucket) == ("c1", "2024-03-07", bucket)
    assert (c1.agent_id, c1.customer_id, c1.direction, c1.started_at) == (
        "A17", "4711", "inbound", "2024-03-07T09:15:00Z",
    )
    assert c1.size == len(b"call one") and c1.etag == md5(b"call one")
    assert c1.recording_id == recording_id_for(bucket, PREFIX + "c1.wav", md5(b"call one"))
    assert (c2.agent_id, c2.customer_id, c2.direction, c2.started_at) == (None, None, None, None)


def test_list_recordings_ignores_invalid_sidecar(
    store: LocalStore, conf: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    bucket = conf.storage.recordings_bucket
    store.put_bytes(bucket, PREFIX + "c1.wav", b"one")
    store.put_bytes(bucket, PREFIX + "c1.json", b"{not json")
    store.put_bytes(bucket, PREFIX + "c2.wav", b"two")
    store.put_bytes(bucket, PREFIX + "c2.json", b"\xff\xfe\x00garbage")
    store.put_bytes(bucket, PREFIX + "c3.wav", b"three")
    store.put_bytes(bucket, PREFIX + "c3.json", b'["a list"]')
    with caplog.at_level(logging.WARNING, logger="asr_tasks.intake.days"):
        recs = list_recordings(store, conf.storage, DAY)
    assert [r.call_id for r in recs] == ["c1", "c2", "c3"]
    assert all(r.agent_id is None and r.direction is None for r in recs)
    assert "sidecar ignored" in caplog.text


def test_recording_ids_follow_content(store: LocalStore, conf: Settings) -> None:
    bucket = conf.storage.recordings_bucket
    store.put_bytes(bucket, PREFIX + "c1.wav", b"original")
    store.put_bytes(bucket, PREFIX + "c2.wav", b"other")
    first = {r.key: r.recording_id for r in list_recordings(store, conf.storage, DAY)}
    again = {r.key: r.recording_id for r in list_recordings(store, conf.storage, DAY)}
    assert first == again
    assert len(set(first.values())) == 2

    store.put_bytes(bucket, PREFIX + "c1.wav", b"re-uploaded, different bytes")
    changed = {r.key: r.recording_id for r in list_recordings(store, conf.storage, DAY)}
    assert changed[PREFIX + "c1.wav"] != first[PREFIX + "c1.wav"]
    assert changed[PREFIX + "c2.wav"] == first[PREFIX + "c2.wav"]

    # a sidecar change alone does not make a new version of the recording
    store.put_bytes(bucket, PREFIX + "c2.json", b'{"agent_id": "A1"}')
    with_meta = {r.key: r for r in list_recordings(store, conf.storage, DAY)}
    assert with_meta[PREFIX + "c2.wav"].recording_id == first[PREFIX + "c2.wav"]
    assert with_meta[PREFIX + "c2.wav"].agent_id == "A1"


def test_list_recordings_empty_day(store: LocalStore, conf: Settings) -> None:
    assert list_recordings(store, conf.storage, DAY) == []


# --- recording_for_file ------------------------------------------------------------


def test_recording_for_file_with_sidecar(tmp_path: Path) -> None:
    folder = tmp_path / "calls" / "2024" / "03" / "07"
    folder.mkdir(parents=True)
    audio = folder / "c9.wav"
    audio.write_bytes(b"RIFF fake")
    (folder / "c9.json").write_text(json.dumps({"agent_id": "A2", "direction": "outbound"}))
    rec = recording_for_file(audio)
    assert rec.key == str(audio.resolve())
    assert rec.bucket == "file"
    assert (rec.call_id, rec.call_date) == ("c9", "2024-03-07")
    assert (rec.agent_id, rec.direction, rec.customer_id) == ("A2", "outbound", None)
    assert rec.etag == md5(b"RIFF fake") and rec.size == 9
    assert rec.recording_id == recording_id_for("file", str(audio.resolve()), rec.etag)


def test_recording_for_file_without_sidecar_or_day(tmp_path: Path) -> None:
    audio = tmp_path / "loose.mp3"
    audio.write_bytes(b"ID3")
    rec = recording_for_file(audio)
    assert (rec.call_id, rec.call_date, rec.agent_id) == ("loose", "", None)
    first = rec.recording_id
    assert recording_for_file(audio).recording_id == first
    audio.write_bytes(b"ID3 changed")
    assert recording_for_file(audio).recording_id != first


@pytest.mark.parametrize("sidecar", [b"{broken", b"[1, 2]", b"\xff\xfe"])
def test_recording_for_file_ignores_invalid_sidecar(tmp_path: Path, sidecar: bytes) -> None:
    """Same contract as list_recordings: a bad sidecar loses metadata, not the recording."""
    audio = tmp_path / "c1.wav"
    audio.write_bytes(b"RIFF")
    (tmp_path / "c1.json").write_bytes(sidecar)
    rec = recording_for_file(audio)
    assert rec.call_id == "c1" and rec.agent_id is None


@pytest.mark.parametrize(("status", "transient"), [(503, True), (500, True), (429, True), (403, False), (404, False)])
def test_a_non_xml_answer_is_retried_by_its_status(status: int, transient: bool) -> None:
    """A proxy in front of MinIO that answers with HTML: only server errors and throttling are worth a retry."""
    from minio.error import InvalidResponseError

    from asr_tasks.intake.stores import is_transient, response_status

    exc = InvalidResponseError(status, "text/html", "<html>busy</html>")
    assert response_status(exc) == status
    assert is_transient(exc) is transient
