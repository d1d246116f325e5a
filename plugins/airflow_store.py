"""The object store as Airflow tasks open it: MinIO's endpoint and keys from the Airflow connection ``minio_conn_id``.

The library (``asr_tasks.storage``) takes its MinIO settings from ``minio_*`` /
``ASR_MINIO_*`` and knows nothing of Airflow; inside a task, the connection wins
when it exists (its host ``host:port`` or ``https://host:port``, login and
password as the keys, extra ``{"secure": ..., "ca_bundle": ..., "region": ...}``).
"""

from __future__ import annotations

import logging

from asr_tasks.config import StorageSettings
from asr_tasks.storage import MinioConfig, ObjectStore, open_store

log = logging.getLogger(__name__)


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
    return MinioConfig.from_connection(conn, settings.minio_public_url)


def task_store(settings: StorageSettings) -> ObjectStore:
    """The store a task works on."""
    return open_store(settings, minio=connection_minio_config(settings))
