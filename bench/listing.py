"""How long listing and sensing take on a day with 100,000 recordings, against a real MinIO server.

Starts the MinIO server the tests use (tests/services.py: built from source, a
throw-away folder, loopback), uploads N tiny objects under one day's prefix
through the S3 API, then times through HTTP, as the pipeline does: the full key
listing (``MinioStore.list_keys``), the listing with ETags that ``sense`` uses
(``MinioStore.list``), and one poke of the ``RecordingsReadySensor`` in each
mode (``quiet``: one key listing; ``marker``: one stat).

    .venv/bin/python bench/listing.py [--objects 100000] [--repeat 1] [--quick] [--json]

``--quick`` does the same with 300 objects. The JSON's keys: ``server``,
``objects_under_prefix``, ``fill_seconds``, ``fill_objects_per_second``,
``list_keys_seconds``, ``list_with_etags_seconds``, ``sensor_poke_quiet_seconds``,
``sensor_poke_marker_missing_seconds``, ``sensor_poke_marker_present_seconds``,
``client_cpu_seconds``, ``quiet_poke_http_requests``, ``marker_poke_http_requests``,
``measured_at``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any, Callable

from synthetic import parse_args

PROJECT_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_ROOT / "plugins"))
sys.path.insert(0, str(PROJECT_ROOT / "tests"))
import services  # noqa: E402  (the test servers)

QUICK = {"objects": 300}
DAY = date(2024, 3, 7)
BUCKET = "recordings"
PREFIX = "calls/2024/03/07/"


class RequestCounter(logging.Handler):
    """Counts the HTTP requests the store's client sends, by method, from urllib3's request log."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.counts: Counter[str] = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        if isinstance(record.args, tuple) and len(record.args) >= 4 and "%s %s %s" in str(record.msg):
            self.counts[str(record.args[3])] += 1

    def clear(self) -> None:
        self.counts.clear()


CLIENT_CPU: dict[str, float] = {}


def timed(fn: Callable[[], Any], repeat: int = 3, name: str = "") -> tuple[float, Any]:
    """Best of ``repeat`` wall-clock runs, and the last result; the client's own CPU seconds go to CLIENT_CPU."""
    best, result = float("inf"), None
    for _ in range(repeat):
        started, cpu = time.perf_counter(), time.process_time()
        result = fn()
        if time.perf_counter() - started < best:
            best = time.perf_counter() - started
            CLIENT_CPU[name] = round(time.process_time() - cpu, 2)
    return best, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--objects", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parse_args(parser, QUICK)

    minio = services.start_minio()
    try:
        os.environ.update({
            "ASR_STORE_BACKEND": "minio", "ASR_MINIO_ENDPOINT": minio.endpoint, "ASR_MINIO_SECURE": "false",
            "ASR_MINIO_ACCESS_KEY": minio.access_key, "ASR_MINIO_SECRET_KEY": minio.secret_key,
            "ASR_MINIO_CONN_ID": "none", "ASR_RECORDINGS_BUCKET": BUCKET,
            "ASR_WORK_DIR": str(PROJECT_ROOT / "var" / "tmp"),
        })
        from asr_tasks.config import get_settings
        from asr_tasks.intake.days import recordings_ready
        from asr_tasks.intake.stores import MinioStore, open_store

        settings = get_settings()
        store = open_store(settings.storage)
        assert isinstance(store, MinioStore)
        started = time.perf_counter()
        store.put_bytes(BUCKET, f"{PREFIX}{0:06d}.wav", b"x")  # creates the bucket
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda i: store.put_bytes(BUCKET, f"{PREFIX}{i:06d}.wav", b"x"), range(1, args.objects)))
        store.put_bytes(BUCKET, "calls/2024/03/08/other-day.wav", b"x")
        fill_seconds = time.perf_counter() - started

        counter = RequestCounter()
        urllib3_log = logging.getLogger("urllib3.connectionpool")
        urllib3_log.addHandler(counter)
        urllib3_log.setLevel(logging.DEBUG)
        requests = counter.counts
        list_keys_s, keys = timed(lambda: sum(1 for _ in store.list_keys(BUCKET, PREFIX)), args.repeat, "list_keys")
        list_s, listed = timed(lambda: sum(1 for _ in store.list(BUCKET, PREFIX)), args.repeat, "list")
        assert keys == listed == args.objects, (keys, listed)

        from recordings_sensor import RecordingsReadySensor

        sensor = RecordingsReadySensor(task_id="wait_for_recordings", day=DAY.isoformat())
        os.environ["ASR_READY_CHECK"] = "quiet"
        get_settings.cache_clear()
        quiet_s, quiet_ready = timed(lambda: sensor.poke({}), args.repeat, "poke_quiet")
        os.environ["ASR_READY_CHECK"] = "marker"
        get_settings.cache_clear()
        marker_missing_s, marker_before = timed(lambda: sensor.poke({}), args.repeat, "poke_marker_missing")
        store.put_bytes(BUCKET, PREFIX + "_READY", b"")
        marker_s, marker_after = timed(lambda: sensor.poke({}), args.repeat, "poke_marker_present")
        assert quiet_ready and not marker_before and marker_after

        # What one poke asks of the server, counted on the client (the sensor's poke body, same store code).
        counter.clear()
        recordings_ready(store, settings.override(ready_check="quiet").storage, DAY)
        quiet_requests = dict(requests)
        counter.clear()
        recordings_ready(store, settings.override(ready_check="marker").storage, DAY)
        marker_requests = dict(requests)

        figures = {
            "server": f"MinIO {services.MINIO_VERSION} (built from source), one drive, loopback",
            "objects_under_prefix": args.objects,
            "fill_seconds": round(fill_seconds, 1),
            "fill_objects_per_second": round(args.objects / fill_seconds),
            "list_keys_seconds": round(list_keys_s, 2),
            "list_with_etags_seconds": round(list_s, 2),
            "sensor_poke_quiet_seconds": round(quiet_s, 2),
            "sensor_poke_marker_missing_seconds": round(marker_missing_s, 4),
            "sensor_poke_marker_present_seconds": round(marker_s, 4),
            "client_cpu_seconds": CLIENT_CPU,
            "quiet_poke_http_requests": quiet_requests,
            "marker_poke_http_requests": marker_requests,
            "measured_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
    finally:
        minio.server.stop()
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        for name, value in figures.items():
            print(f"{name:38} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
