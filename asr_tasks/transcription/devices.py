"""Which device a worker process runs its model on, and how many models a machine can run at once.

A machine runs at most ``gpu_count × streams_per_gpu`` models (``device_slots``;
the DAG sizes its GPU pool from it, so Airflow never starts more transcription
tasks than the GPUs can carry). Which GPU a task gets is decided here: every (GPU, stream) pair is a lock file under
``device_lock_dir``, and a task holds an exclusive ``fcntl`` lock on one of them
for as long as its model is loaded. The kernel drops the lock when the process
ends, however it ends, so a crashed task never leaves a GPU marked busy.
"""

from __future__ import annotations

import fcntl
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, get_args

from asr_tasks.config import AsrSettings, Device

DEVICES = get_args(Device)


class DeviceBusy(RuntimeError):
    """Every GPU slot stayed taken for device_wait_seconds."""


@dataclass
class DeviceLease:
    """A device (and for CUDA, a held slot lock) for one loaded model."""

    kind: str  # "cpu" or "cuda"
    index: int = 0
    slot: int = 0
    _lock: IO[str] | None = field(default=None, repr=False)

    @property
    def torch_device(self) -> str:
        return "cpu" if self.kind == "cpu" else f"cuda:{self.index}"

    def release(self) -> None:
        """Give the slot back (also happens on its own when the process exits)."""
        if self._lock is not None:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None


def device_slots(settings: AsrSettings) -> int:
    """Models that can run at once: devices × streams per device (the CPU counts as one device)."""
    devices = settings.gpu_count if settings.device == "cuda" else 1
    return max(1, devices) * max(1, settings.streams_per_gpu)


def acquire_device(settings: AsrSettings) -> DeviceLease:
    """A device for this process: the CPU, or the first free (stream, GPU) slot, waiting for one if all are taken.

    Slots are tried stream by stream across all GPUs, so the first tasks spread
    over the GPUs before any GPU runs a second stream.
    """
    if settings.device not in DEVICES:
        raise ValueError(f"unknown device {settings.device!r} (supported: {', '.join(DEVICES)})")
    if settings.device == "cpu":
        return DeviceLease("cpu")
    if settings.gpu_count < 1 or settings.streams_per_gpu < 1:
        raise ValueError(f"device cuda needs gpu_count >= 1 and streams_per_gpu >= 1 "
                         f"(got {settings.gpu_count} and {settings.streams_per_gpu})")
    lock_dir = settings.path("device_lock_dir")
    lock_dir.mkdir(parents=True, exist_ok=True)
    slots = [(stream, gpu) for stream in range(settings.streams_per_gpu) for gpu in range(settings.gpu_count)]
    deadline = time.monotonic() + settings.device_wait_seconds
    while True:
        for stream, gpu in slots:
            lease = _try_lock(lock_dir / f"cuda{gpu}.stream{stream}.lock", gpu, stream)
            if lease is not None:
                return lease
        if time.monotonic() >= deadline:
            raise DeviceBusy(
                f"all {len(slots)} GPU slots under {lock_dir} stayed taken for {settings.device_wait_seconds:.0f} s "
                f"(gpu_count {settings.gpu_count} x streams_per_gpu {settings.streams_per_gpu}); "
                "is the GPU pool larger than the machine?"
            )
        time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))


def _try_lock(path: Path, gpu: int, stream: int) -> DeviceLease | None:
    handle = open(path, "a+", encoding="utf-8")  # noqa: SIM115  (held open by the lease: the lock lives with it)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return DeviceLease("cuda", gpu, stream, handle)

