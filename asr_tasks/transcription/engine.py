"""What every ASR engine is (``AsrEngine``), its errors, and the out-of-memory back-off they share.

``engine: ctranslate2`` runs Whisper through faster-whisper (int8 on CPU, fp16 on
GPU); ``engine: transformers`` runs Whisper or Qwen3-ASR (``model_family``)
through transformers (fp32 on CPU, bf16/fp16 on GPU). Every engine takes a whole
batch of chunks, from any number of recordings, and returns each chunk's
segments in the order the chunks came in; how it batches (packing into 30 s
windows, length-sorted buckets) is its own business. A CUDA or host
out-of-memory error halves the batch of the stage that failed and retries it
(``Backoff``; the halved size stays); at batch size 1 it becomes
``EngineOutOfMemory`` and the task fails for Airflow to retry.
"""

from __future__ import annotations

import gc
import logging
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np

from asr_tasks.models import AudioChunk, Segment

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")

# Not in the embedded default's install (requirements.txt): requirements-transformers.txt brings them.


class ModelError(RuntimeError):
    """A model that is missing, incomplete or inconsistent in its configured local folder."""


class EngineUnavailable(RuntimeError):
    """The configured engine's packages are not installed; the message says what to install."""


class EngineOutOfMemory(RuntimeError):
    """Out of memory even at batch size 1: the task fails and Airflow's retry takes over."""


class AsrEngine(ABC):
    """Speech chunks in, timed text with confidence out, many chunks per call."""

    model_name: str
    batch_size: int

    @abstractmethod
    def transcribe_batch(self, items: Sequence[tuple[AudioChunk, np.ndarray]]) -> list[list[Segment]]:
        """Segments of every (chunk, 16 kHz float32 samples) item, in input order, on the recording's clock."""

    def backoff(self, stage: str, what: str) -> Backoff:
        """The stage's out-of-memory back-off, made at its first use and kept for the engine's life."""
        kept: dict[str, Backoff] = vars(self).setdefault("_backoffs", {})
        return kept.setdefault(stage, Backoff(what))

    def transcribe(self, chunk: AudioChunk, audio: np.ndarray) -> list[Segment]:
        """One chunk; batching only pays off through ``transcribe_batch``."""
        return self.transcribe_batch([(chunk, audio)])[0]

    @property
    def work_seconds(self) -> float:
        """Speech per ``transcribe_batch`` call that keeps every batch full (and is small enough to checkpoint)."""
        return 4 * self.batch_size * 30.0


def is_out_of_memory(exc: BaseException) -> bool:
    """CUDA OOM from torch or CTranslate2, or the host running out of memory.

    ``EngineOutOfMemory`` is a back-off that already gave up: an outer back-off
    must not retry it.
    """
    if isinstance(exc, EngineOutOfMemory):
        return False
    if isinstance(exc, MemoryError):
        return True
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(exc, torch.cuda.OutOfMemoryError):
        return True
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and ("out of memory" in text or "cublas_status_alloc_failed" in text)


def free_accelerator_memory() -> None:
    """Give cached GPU memory back before a retry with a smaller batch."""
    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()


class Backoff:
    """One stage's batch size under out-of-memory: a batch that does not fit is halved and retried, and the size
    that fitted stays the stage's limit for its next calls, so an oversized batch fails once per engine, not
    per call.

    Memory is freed after the handler has ended: inside it, the traceback still holds the failed batch's
    tensors, and emptying the cache there gives back nothing. Out of memory with a batch of one becomes
    ``EngineOutOfMemory``.
    """

    def __init__(self, what: str) -> None:
        self.what = what
        self.limit: int | None = None  # the largest batch known to fit, once one did not

    def run(self, items: Sequence[T], batch_size: int, run: Callable[[Sequence[T]], list[R]]) -> list[R]:
        """``run`` over consecutive batches of ``items`` (``batch_size`` each, or the limit); results in order."""
        results: list[R] = []
        size = max(1, min(batch_size, self.limit or batch_size))
        done = 0
        while done < len(items):
            batch = items[done : done + size]
            failed = None
            try:
                out = run(batch)
            except Exception as exc:
                if not is_out_of_memory(exc):
                    raise
                failed = f"{type(exc).__name__}: {exc}"  # the text only: the exception holds the batch's frames
            if failed is not None:
                free_accelerator_memory()
                if len(batch) == 1:
                    raise EngineOutOfMemory(f"out of memory on {self.what} even at batch size 1 ({failed}); "
                                            "the task fails so that Airflow retries it")
                size = self.limit = len(batch) // 2
                log.warning("out of memory on %s (%s); batch size %d from now on", self.what, failed, size)
                continue
            results.extend(out)
            done += len(batch)
        return results
