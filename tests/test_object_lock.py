"""Holds and retention enforced by the store itself: with ``object_lock`` on, MinIO (the real server) keeps every
object of a held or retained call against a delete made with the pipeline's own keys, and the product's own
erasure still works on what nothing holds."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from conftest import S3Server
from minio import Minio
from minio.deleteobjects import DeleteObject
from minio.error import S3Error

from asr_tasks.config import PROJECT_ROOT, ConfigError, Settings
from asr_tasks.intake.locks import LockError, object_locks
from asr_tasks.intake.stores import LocalStore, open_store
from asr_tasks.models import Recording, recording_id_for
from asr_tasks.pipeline.gate import gate_shard
from asr_tasks.pipeline.index import index_results
from asr_tasks.pipeline.preprocess import preprocess_shard
from asr_tasks.pipeline.results import preprocessed
from asr_tasks.pipeline.sense import sense
from asr_tasks.pipeline.transcribe import transcribe_shard
from asr_tasks.records.access_log import AccessLog
from asr_tasks.records.anchors import PREFIX, check_log, signing_key, stored_anchors, write_anchor
from asr_tasks.records.erasure import Eraser, ErasureSelection, select_keys
from asr_tasks.records.holds import Holds
from asr_tasks.records.ledger import open_ledger
from asr_tasks.records.locking import record_locks, retain_until
from asr_tasks.index.backends import open_index

DAY = date(2026, 11, 27)


def client_of(s3: S3Server) -> Minio:
    """The pipeline's own keys, as anyone holding them would use them."""
    return Minio(s3.endpoint, s3.access_key, s3.secret_key, secure=s3.secure)


def versions(client: Minio, bucket: str, prefix: str = "") -> list[Any]:
    return [o for o in client.list_objects(bucket, prefix=prefix, recursive=True, include_version=True)]


def objects_of(client: Minio, buckets: list[str], rid: str, key: str) -> list[tuple[str, Any]]:
    """Every version of every object of one call: its source and sidecar, and its artefacts (by its id)."""
    sidecar = key.rsplit(".", 1)[0] + ".json"
    return [(b, o) for b in buckets for o in versions(client, b)
            if o.object_name in (key, sidecar) or f"/{rid}/" in o.object_name]


def test_held_and_retained_calls_are_kept_by_minio_and_an_unheld_call_is_still_erased(
        settings: Settings, s3_server: S3Server, jfk: Path, model_dir: Path) -> None:
    run = uuid.uuid4().hex[:8]
    buckets = [f"rec-{run}", f"art-{run}"]
    client = client_of(s3_server)
    client.make_bucket(buckets[0], object_lock=True)  # the bank's recordings bucket, made with locking
    conf = s3_server.settings(settings, recordings_bucket=buckets[0], artefacts_bucket=buckets[1],
                              object_lock=True, retention_days={f"{buckets[0]}/calls/": 3650})
    store = open_store(conf.storage)
    keys = {who: f"calls/2026/11/27/{who}-{run}.flac" for who in ("held", "free")}
    for who, key in keys.items():
        store.put_file(buckets[0], key, jfk)
        store.put_bytes(buckets[0], key.replace(".flac", ".json"),
                        json.dumps({"agent_id": "AG-1", "customer_id": f"CU-{who}-{run}"}).encode())
    results = preprocess_shard(sense(store, conf, DAY), store, conf)
    transcribe_shard(preprocessed(results), store, conf)
    gate_shard(results, store, conf)
    index = open_index(conf.index)
    assert index_results(results, store, index, conf) == {"indexed": 2}
    ids = {r.key.split("/")[-1].split("-")[0]: r.recording_id for r in results}

    # indexed: every object of both calls retained (governance) until its rule ends, the artefact bucket made locked
    until = datetime(2036, 11, 25, tzinfo=timezone.utc)
    assert retain_until({"bucket": buckets[0], "key": keys["held"], "call_date": DAY.isoformat()},
                        conf.storage.retention_days) == until
    held_objects = objects_of(client, buckets, ids["held"], keys["held"])
    assert {b for b, _ in held_objects} == set(buckets) and len(held_objects) >= 5  # source, sidecar, artefacts
    for bucket, obj in held_objects:
        retention = client.get_object_retention(bucket, obj.object_name, obj.version_id)
        assert retention is not None and (retention.mode, retention.retain_until_date) == ("GOVERNANCE", until)

    ledger = open_ledger(conf.ledger)
    access = AccessLog(ledger)
    holds = Holds(ledger, access, record_locks(store, conf.storage))
    hold = holds.place("customer", "litigation 17", "officer", value=f"CU-held-{run}")
    for bucket, obj in held_objects:
        assert client.is_object_legal_hold_enabled(bucket, obj.object_name, obj.version_id), obj.object_name
    for bucket, obj in objects_of(client, buckets, ids["free"], keys["free"]):
        assert not client.is_object_legal_hold_enabled(bucket, obj.object_name, obj.version_id)

    # the pipeline's own keys cannot delete a held version, not even bypassing governance retention
    source = next(o for b, o in held_objects if o.object_name == keys["held"])
    with pytest.raises(S3Error) as refused:
        client.remove_object(buckets[0], keys["held"], version_id=source.version_id)
    assert "WORM" in refused.value.message, refused.value  # "Object is WORM protected and cannot be overwritten"
    errors = list(client.remove_objects(buckets[0], [DeleteObject(keys["held"], source.version_id)],
                                        bypass_governance_mode=True))
    assert errors and "WORM" in errors[0].message, errors
    client.remove_object(buckets[0], keys["held"])  # a plain delete only hides it: the version stays
    answer = client.get_object(buckets[0], keys["held"], version_id=source.version_id)
    assert answer.read() == jfk.read_bytes()
    answer.close()
    answer.release_conn()
    # nor can a retained, unheld version be deleted without the bypass the product's erasure uses
    free_source = next(o for b, o in objects_of(client, buckets, ids["free"], keys["free"])
                       if o.object_name == keys["free"])
    with pytest.raises(S3Error):
        client.remove_object(buckets[0], keys["free"], version_id=free_source.version_id)

    eraser = Eraser(conf, ledger, store, index, access)
    held = ErasureSelection(customer=f"CU-held-{run}", reason="customer-request")
    assert eraser.erase(select_keys(ledger, held), "customer-request", "officer").held
    free = ErasureSelection(customer=f"CU-free-{run}", reason="customer-request")
    assert eraser.erase(select_keys(ledger, free), "customer-request", "officer").erased == [
        keys["free"]]
    assert objects_of(client, buckets, ids["free"], keys["free"]) == []  # every version, under its retention

    holds.release(hold.id, "settled", "officer")
    for bucket, obj in objects_of(client, buckets, ids["held"], keys["held"]):
        if not obj.is_delete_marker:
            assert not client.is_object_legal_hold_enabled(bucket, obj.object_name, obj.version_id)
    assert eraser.erase(select_keys(ledger, held), "customer-request", "officer").erased == [
        keys["held"]]
    assert objects_of(client, buckets, ids["held"], keys["held"]) == []  # the delete marker with the versions

    key = signing_key(conf.storage)
    anchor = write_anchor(access, store, buckets[1], record_locks(store, conf.storage), key)
    assert anchor is not None
    (stored,) = versions(client, buckets[1], PREFIX)
    assert client.get_object_retention(buckets[1], stored.object_name, stored.version_id).mode == "GOVERNANCE"
    with pytest.raises(S3Error):
        client.remove_object(buckets[1], stored.object_name, version_id=stored.version_id)
    # a plain delete (a marker) or an overwrite hides the anchor from a listing, not from verify
    assert stored_anchors(store, buckets[1]).problems == []
    client.remove_object(buckets[1], stored.object_name)
    store.put_bytes(buckets[1], stored.object_name, json.dumps({**anchor.to_dict(), "hash": "0" * 64}).encode())
    kept = stored_anchors(store, buckets[1])
    assert anchor.hash in {a.hash for a in kept.anchors}
    assert any("was deleted" in p for p in kept.problems) and any("written over" in p for p in kept.problems)
    assert not check_log(access, kept, None, None, key.public_key()).intact


def test_a_release_leaves_minio_holding_what_another_hold_covers_and_a_new_upload_of_a_held_key_is_held(
        settings: Settings, s3_server: S3Server) -> None:
    run = uuid.uuid4().hex[:8]
    bucket = f"rec-{run}"
    client = client_of(s3_server)
    conf = s3_server.settings(settings, recordings_bucket=bucket, artefacts_bucket=f"art-{run}", object_lock=True)
    store = open_store(conf.storage)
    object_locks(store, True, "governance").require(bucket)  # type: ignore[union-attr]
    key = f"calls/2026/11/27/c-{run}.wav"
    ledger = open_ledger(conf.ledger)
    locks = record_locks(store, conf.storage)
    holds = Holds(ledger, AccessLog(ledger), locks)

    def upload(body: bytes, customer: str) -> Recording:
        store.put_bytes(bucket, key, body)
        etag = store.stat(bucket, key).etag  # type: ignore[union-attr]
        return Recording(recording_id_for(bucket, key, etag), bucket, key, etag, len(body), "c", DAY.isoformat(),
                         customer_id=customer)

    def source_holds() -> list[bool]:
        return [client.is_object_legal_hold_enabled(bucket, key, v.version_id)
                for v in versions(client, bucket, key) if not v.is_delete_marker]

    first = upload(b"RIFF first", "CU-1")
    ledger.sensed([first], "m", "1")
    by_customer = {c: holds.place("customer", "dispute", "officer", value=c) for c in ("CU-1", "CU-2")}
    assert source_holds() == [True]
    second = upload(b"RIFF second", "CU-2")  # a new upload under the held key: it waits, and MinIO holds it too
    assert holds.sense([second], "m", "1") == {second.recording_id}
    assert source_holds() == [True, True]
    holds.release(by_customer["CU-2"].id, "settled", "officer")
    assert source_holds() == [True, True]  # the first version's customer is still held: the key stays held
    holds.release(by_customer["CU-1"].id, "settled", "officer")
    assert source_holds() == [False, False]


def test_an_archive_from_before_object_lock_is_sealed_by_asr_lock(settings: Settings, s3_server: S3Server) -> None:
    run = uuid.uuid4().hex[:8]
    bucket = f"rec-{run}"
    client = client_of(s3_server)
    client.make_bucket(bucket, object_lock=True)
    before = s3_server.settings(settings, recordings_bucket=bucket, artefacts_bucket=f"art-{run}")
    store = open_store(before.storage)
    ledger = open_ledger(before.ledger)
    recs = []
    for who in ("kept", "held"):
        key = f"calls/2026/11/27/{who}-{run}.wav"
        store.put_bytes(bucket, key, f"RIFF {who}".encode())
        recs.append(Recording(recording_id_for(bucket, key, who), bucket, key, who, 9, who, DAY.isoformat(),
                              customer_id=f"CU-{who}"))
    ledger.sensed(recs, "m", "1")
    Holds(ledger, AccessLog(ledger)).place("customer", "dispute", "officer", value="CU-held")  # locking off then
    assert client.get_object_retention(bucket, recs[0].key) is None
    on = s3_server.settings(settings, recordings_bucket=bucket, artefacts_bucket=f"art-{run}", object_lock=True,
                            retention_days={f"{bucket}/calls/": 2555})
    holds = Holds(ledger, AccessLog(ledger), record_locks(store, on.storage))
    assert holds.seal(DAY.isoformat(), DAY.isoformat()) == (2, 2)
    for rec in recs:
        retention = client.get_object_retention(bucket, rec.key)
        assert retention is not None and retention.retain_until_date == datetime(2033, 11, 26, tzinfo=timezone.utc)
    assert [client.is_object_legal_hold_enabled(bucket, r.key) for r in recs] == [False, True]


def test_in_compliance_mode_not_even_the_products_erasure_ends_a_retention(settings: Settings,
                                                                          s3_server: S3Server) -> None:
    run = uuid.uuid4().hex[:8]
    bucket, artefacts = f"rec-{run}", f"art-{run}"
    days = (datetime.now(timezone.utc).date() - DAY).days + 1  # retained until the day after tomorrow
    conf = s3_server.settings(settings, recordings_bucket=bucket, artefacts_bucket=artefacts, object_lock=True,
                              object_lock_mode="compliance", retention_days={f"{bucket}/calls/": days})
    store = open_store(conf.storage)
    object_locks(store, True, "compliance").require(bucket)  # a bucket it makes itself is made locked
    key = f"calls/2026/11/27/c-{run}.wav"
    store.put_bytes(bucket, key, b"RIFF....WAVE")
    rec = Recording(recording_id_for(bucket, key, "e"), bucket, key, "e", 12, "c", DAY.isoformat(), customer_id="CU-9")
    ledger = open_ledger(conf.ledger)
    ledger.sensed([rec], "m", "1")
    locks = record_locks(store, conf.storage)
    assert locks is not None
    (row,) = ledger.versions([rec.recording_id])
    assert locks.seal(row, held=False) == 1
    result = Eraser(conf, ledger, store, open_index(conf.index), AccessLog(ledger)).erase(
        select_keys(ledger, ErasureSelection(customer="CU-9", reason="customer-request")), "customer-request",
        "officer")
    assert result.erased == [] and "compliance retention until" in result.held[0][1]
    assert store.exists(bucket, key)
    assert ledger.state(rec.recording_id) == "sensed"  # not tombstoned: nothing was begun


def test_a_store_that_cannot_lock_says_so(settings: Settings, s3_server: S3Server, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot lock objects"):
        settings.override(object_lock=True)
    with pytest.raises(LockError, match="cannot lock objects"):
        object_locks(LocalStore(tmp_path), True, "governance")
    refused = subprocess.run([sys.executable, "-m", "asr_tasks.cli", "lock"], capture_output=True, text=True,
                             cwd=PROJECT_ROOT, timeout=120, env={"ASR_LEDGER_URL": settings.ledger.ledger_url,
                                                                 "PATH": "/usr/bin:/bin"})
    assert refused.returncode == 2 and "object_lock is off" in refused.stderr
    assert object_locks(LocalStore(tmp_path), False, "governance") is None
    run = uuid.uuid4().hex[:8]
    client_of(s3_server).make_bucket(f"plain-{run}")  # made without locking
    conf = s3_server.settings(settings, object_lock=True)
    with pytest.raises(LockError, match=f"bucket plain-{run} has no object lock.*mc mb --with-lock"):
        object_locks(open_store(conf.storage), True, "governance").require(f"plain-{run}")  # type: ignore[union-attr]
