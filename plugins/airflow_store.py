"""The object store as Airflow tasks open it: MinIO's endpoint and keys from the Airflow connection ``minio_conn_id``.

The library (``asr_tasks.intake.stores``) takes its MinIO settings from ``minio_*`` /
``ASR_MINIO_*`` and knows nothing of Airflow; inside a task, the connection wins
when it exists (its host ``host:port`` or ``https://host:port``, login and
password as the keys, extra ``{"secure": ..., "ca_bundle": ..., "region": ...}``).
"""

from __future__ import annotations

import logging
from typing import Any

from asr_tasks.config import StorageSettings
from asr_tasks.intake.stores import MinioConfig, ObjectStore, open_store, split_endpoint

log = logging.getLogger(__name__)


def config_from_connection(conn: Any) -> MinioConfig:
    """From an Airflow connection: host[:port] (or a URL), login, password, extra secure/ca_bundle/region."""
    extra = dict(conn.extra_dejson or {})
    host = conn.host or extra.get("endpoint_url") or ""
    if not host:
        raise ValueError(f"Airflow connection {conn.conn_id!r}: no host (the MinIO endpoint)")
    default_secure = extra.get("secure", True)
    endpoint, secure = split_endpoint(host, str(default_secure).lower() not in {"false", "0", "no", "off"})
    if conn.port and ":" not in endpoint:
        endpoint = f"{endpoint}:{conn.port}"
    return MinioConfig(
        endpoint=endpoint,
        access_key=conn.login or "",
        secret_key=conn.password or "",
        secure=secure,
        ca_bundle=extra.get("ca_bundle") or None,
        region=extra.get("region") or extra.get("region_name") or None,
    )


def connection_minio_config(settings: StorageSettings) -> MinioConfig | None:
    """The connection's MinIO config, or None (local store, no connection id, or no such connection)."""
    if settings.store_backend != "minio" or not settings.minio_conn_id:
        return None
    from airflow.sdk import BaseHook
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        conn = BaseHook.get_connection(settings.minio_conn_id)
    except AirflowNotFoundException:
        log.info("no Airflow connection %r; MinIO settings come from minio_* / ASR_MINIO_*", settings.minio_conn_id)
        return None
    return config_from_connection(conn)


def task_store(settings: StorageSettings) -> ObjectStore:
    """The store a task works on."""
    return open_store(settings, minio=connection_minio_config(settings))
