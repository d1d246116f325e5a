"""An erasure on the production stores, all real servers: MinIO (recordings and artefacts), Elasticsearch (the
index) and PostgreSQL (the ledger, its access log and holds). A call goes through the real stages, is erased for
its customer, and then every version of every object in the buckets, every document of every index and every
row of every ledger table is read for its key, its words and its customer.
"""

from __future__ import annotations

import base64
import json
import ssl
import urllib.request
import uuid
from datetime import date
from pathlib import Path
from typing import Any

import psycopg2
from conftest import EsCluster, S3Server
from minio import Minio
from services import throwaway_database

from asr_tasks.audit.reviews import Reviews
from asr_tasks.audit.rules import Finding
from asr_tasks.audit.score_overrides import ScoreOverrides
from asr_tasks.audit.call_score import CallScore
from asr_tasks.audit.scorecards import load_scorecard
from asr_tasks.config import PROJECT_ROOT, Settings
from asr_tasks.index.backends import open_index
from asr_tasks.intake.stores import open_store
from asr_tasks.pipeline.gate import gate_shard
from asr_tasks.pipeline.index import index_results
from asr_tasks.pipeline.preprocess import preprocess_shard
from asr_tasks.pipeline.sense import sense
from asr_tasks.pipeline.results import preprocessed
from asr_tasks.pipeline.transcribe import transcribe_shard
from asr_tasks.records.access_log import AccessLog
from asr_tasks.records.erasure import Eraser, ErasureSelection, select_keys
from asr_tasks.records.holds import Holds
from asr_tasks.records.ledger import open_ledger

DAY = date(2026, 11, 27)
WORDS = "ask not what your country"


def es_json(cluster: EsCluster, path: str) -> Any:
    """A GET on the cluster as its settings reach it (the pipeline's user, the test CA)."""
    request = urllib.request.Request(cluster.url.rstrip("/") + path)
    if cluster.username:
        token = base64.b64encode(f"{cluster.username}:{cluster.password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    context = ssl.create_default_context(cafile=cluster.ca_certs) if cluster.ca_certs else None
    with urllib.request.urlopen(request, timeout=60, context=context) as answer:
        return json.load(answer)


def bucket_bytes(s3: S3Server, buckets: list[str]) -> dict[str, bytes]:
    """Every version of every object in the buckets (a versioned bucket keeps what a delete only hides)."""
    client = Minio(s3.endpoint, s3.access_key, s3.secret_key, secure=s3.secure)
    found = {}
    for bucket in buckets:
        for obj in client.list_objects(bucket, recursive=True, include_version=True):
            answer = client.get_object(bucket, obj.object_name, version_id=obj.version_id)
            try:
                found[f"{bucket}/{obj.object_name}@{obj.version_id}"] = answer.read()
            finally:
                answer.close()
                answer.release_conn()
    return found


def ledger_rows(url: str) -> dict[str, str]:
    """Every row of every table of the ledger's database, as JSON text, by table."""
    with psycopg2.connect(url) as db, db.cursor() as cur:
        cur.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        tables = [name for (name,) in cur.fetchall()]
        found = {}
        for table in tables:
            cur.execute(f'SELECT coalesce(json_agg(t)::text, \'\') FROM "{table}" t')
            found[table] = cur.fetchone()[0]
    return found


def test_an_erased_call_leaves_nothing_in_minio_elasticsearch_or_postgresql(
        settings: Settings, s3_server: S3Server, es_cluster: EsCluster, postgres_server: str, jfk: Path,
        model_dir: Path) -> None:
    run = uuid.uuid4().hex[:8]
    buckets = [f"rec-{run}", f"art-{run}"]
    with throwaway_database(postgres_server, "erasure") as ledger_url:
        conf = es_cluster.settings(s3_server.settings(settings, recordings_bucket=buckets[0],
                                                      artefacts_bucket=buckets[1], ledger_url=ledger_url),
                                   f"asrtest-erase-{run}")
        store, index = open_store(conf.storage), open_index(conf.index)
        try:
            erase_and_search(conf, store, index, s3_server, es_cluster, ledger_url, jfk, run)
        finally:
            drop_indices(index, conf.index.es_index_prefix)


def drop_indices(index: Any, prefix: str) -> None:
    """The test's indices and templates, by name: clusters refuse wildcard deletes."""
    client = index.client
    names = list(client.indices.get(index=f"{prefix}-*", allow_no_indices=True))
    if names:
        client.indices.delete(index=",".join(names))
    for kind in ("segments", "recordings", "findings"):
        client.options(ignore_status=404).indices.delete_index_template(name=f"{prefix}-{kind}")


def erase_and_search(conf: Settings, store: Any, index: Any, s3_server: S3Server, es_cluster: EsCluster,
                     ledger_url: str, jfk: Path, run: str) -> None:
    """The call through the stages, erased for its customer, and then looked for in every store."""
    customer, key = f"CU-{run}", f"calls/2026/11/27/call-{run}.flac"
    buckets = [conf.storage.recordings_bucket, conf.storage.artefacts_bucket]
    store.put_file(buckets[0], key, jfk)
    store.put_bytes(buckets[0], key.replace(".flac", ".json"),
                    json.dumps({"agent_id": "AG-1004", "customer_id": customer}).encode())
    results = preprocess_shard(sense(store, conf, DAY), store, conf)
    transcribe_shard(preprocessed(results), store, conf)
    gate_shard(results, store, conf)
    assert index_results(results, store, index, conf) == {"indexed": 1}
    (rid,) = [r.recording_id for r in results]
    ledger = open_ledger(conf.ledger)
    access = AccessLog(ledger)
    hold = Holds(ledger, access).place("customer", "complaint", "officer", value=customer)
    Holds(ledger, access).release(hold.id, "settled", "officer")
    finding = Finding("f" * 24, "promise-of-return", "high", "", rid, key, DAY.isoformat(), "AG-1004", "agent", 1.0,
                      2.0, WORDS)
    Reviews(ledger, access).review(finding, "qa1", "confirmed", comment=f"heard: {WORDS}")  # what a reviewer wrote
    ScoreOverrides(ledger, access).override(load_scorecard(PROJECT_ROOT / "include" / "scorecards" / "default.yaml"),
                                            CallScore(rid, key, DAY.isoformat(), "AG-1004", "bank-call"), "empathy",
                                            "yes", f"heard: {WORDS}", "qa1")

    ours = f"{conf.index.es_index_prefix}*"
    before = json.dumps(es_json(es_cluster, f"/{ours}/_search?size=1000"))
    stored = bucket_bytes(s3_server, buckets)
    assert WORDS in before and customer in before and key in before
    assert any(key.encode() in data for data in stored.values()) and any(rid in name for name in stored)
    assert customer in ledger_rows(ledger_url)["recording_ledger"] and WORDS in ledger_rows(ledger_url)["finding_review"]
    assert WORDS in ledger_rows(ledger_url)["score_override"]

    chosen = select_keys(ledger, ErasureSelection(customer=customer, reason="customer-request"))
    result = Eraser(conf, ledger, store, index, access).erase(chosen, "customer-request", "officer")
    assert result.erased == [key]

    everything = json.dumps(es_json(es_cluster, "/asr*/_search?size=10000&expand_wildcards=all"))  # all it may read
    ours_now = es_json(es_cluster, f"/{ours}/_search?size=1000")
    assert ours_now["hits"]["hits"] == [] and WORDS not in json.dumps(ours_now)
    assert key not in everything and customer not in everything and rid not in everything
    for name, data in bucket_bytes(s3_server, buckets).items():
        assert rid not in name and key.encode() not in data and customer.encode() not in data, name
        assert WORDS.encode() not in data, name
    for table, rows in ledger_rows(ledger_url).items():
        assert key not in rows and customer not in rows and WORDS not in rows, table
    tomb = ledger_rows(ledger_url)["recording_ledger"]
    assert rid in tomb and "customer-request" in tomb  # the tombstone: the id, who, when, the code
