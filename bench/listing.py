"""How long listing and sensing take on a day with 100,000 recordings, against a real S3 server.

Starts moto's S3 server in a child process on a loopback port, fills one day's
prefix with N tiny objects, then times through HTTP, as the pipeline does:
the full key listing (``MinioStore.list_keys``), the listing with ETags that
``sense`` uses (``MinioStore.list``), and one poke of the ``RecordingsReadySensor``
in each mode (``quiet``: one key listing; ``marker``: one stat).

    .venv/bin/python bench/listing.py [--objects 100000] [--fill direct|http] [--json]

``--fill direct`` (default) writes the objects into the server's in-memory
backend before it starts serving (seconds); ``--fill http`` uploads them one by
one through the S3 API (about 10 ms each on moto). Only the timed operations go
through HTTP either way, so the fill method does not change the figures.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import socket
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any, Callable

PROJECT_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(PROJECT_ROOT / "plugins"))

DAY = date(2024, 3, 7)
BUCKET = "recordings"
PREFIX = "calls/2024/03/07/"

SERVER = """
import sys
from moto.core import DEFAULT_ACCOUNT_ID
from moto.s3.models import s3_backends
from moto.server import ThreadedMotoServer

port, bucket, prefix, n = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
backend.create_bucket(bucket, "us-east-1")
for i in range(n):
    backend.put_object(bucket, f"{prefix}{i:06d}.wav", b"x")
backend.put_object(bucket, "calls/2024/03/08/other-day.wav", b"x")
server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
server.start()
print("ready", flush=True)
sys.stdin.read()
server.stop()
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def count_requests(store: Any) -> Counter[str]:
    """Count the HTTP requests the store's client sends, by method."""
    counts: Counter[str] = Counter()
    send = store.client._http.urlopen

    def counted(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        counts[method] += 1
        return send(method, url, *args, **kwargs)

    store.client._http.urlopen = counted
    return counts


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
    parser.add_argument("--fill", choices=["direct", "http"], default="direct")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    port = free_port()
    os.environ.update({
        "ASR_STORE_BACKEND": "minio", "ASR_MINIO_ENDPOINT": f"127.0.0.1:{port}", "ASR_MINIO_SECURE": "false",
        "ASR_MINIO_ACCESS_KEY": "bench", "ASR_MINIO_SECRET_KEY": "bench-secret", "ASR_MINIO_CONN_ID": "none",
        "ASR_RECORDINGS_BUCKET": BUCKET, "ASR_WORK_DIR": str(PROJECT_ROOT / "var" / "tmp"),
    })
    from asr_tasks.config import get_settings
    from asr_tasks.storage import MinioStore, open_store, recordings_ready

    preload = args.objects if args.fill == "direct" else 0
    started = time.perf_counter()
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(port), BUCKET, PREFIX, str(preload)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "ready"
        settings = get_settings()
        store = open_store(settings)
        assert isinstance(store, MinioStore)
        if args.fill == "http":
            with ThreadPoolExecutor(16) as pool:
                list(pool.map(lambda i: store.put_bytes(BUCKET, f"{PREFIX}{i:06d}.wav", b"x"), range(args.objects)))
            store.put_bytes(BUCKET, "calls/2024/03/08/other-day.wav", b"x")
        fill_seconds = time.perf_counter() - started

        requests = count_requests(store)
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
        requests.clear()
        recordings_ready(store, dataclasses.replace(settings, ready_check="quiet"), DAY)
        quiet_requests = dict(requests)
        requests.clear()
        recordings_ready(store, dataclasses.replace(settings, ready_check="marker"), DAY)
        marker_requests = dict(requests)

        figures = {
            "server": "moto (python -m moto.server / ThreadedMotoServer), loopback",
            "objects_under_prefix": args.objects,
            "fill": args.fill,
            "fill_seconds": round(fill_seconds, 1),
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
        if server.stdin:
            server.stdin.close()
        server.wait(timeout=30)
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        for name, value in figures.items():
            print(f"{name:38} {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
