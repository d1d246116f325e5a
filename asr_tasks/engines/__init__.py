"""ASR engines behind one interface, chosen by configuration and loaded once per process.

``engine: ctranslate2`` runs Whisper through faster-whisper (int8 on CPU, fp16 on
GPU); ``engine: transformers`` runs Whisper or Qwen3-ASR (``model_family``)
through transformers (fp32 on CPU, bf16/fp16 on GPU). Every engine takes a whole
batch of chunks, from any number of recordings, and returns each chunk's
segments in the order the chunks came in; how it batches (packing into 30 s
windows, length-sorted buckets) is its own business. A CUDA or host
out-of-memory error halves the batch and retries it; at batch size 1 it becomes
``EngineOutOfMemory`` and the task fails for Airflow to retry.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import logging
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import TypeVar, get_args

import numpy as np

from asr_tasks.config import AsrSettings, EngineName, ModelFamily
from asr_tasks.models import AudioChunk, Segment

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")

ENGINES = get_args(EngineName)
MODEL_FAMILIES = get_args(ModelFamily)
# Not in the embedded default's install (requirements.txt): requirements-transformers.txt brings them.
TRANSFORMERS_PACKAGES = ("torch", "transformers")
TRANSFORMERS_GPU_TYPES = ("bfloat16", "float16", "float32")


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

    def transcribe(self, chunk: AudioChunk, audio: np.ndarray) -> list[Segment]:
        """One chunk; batching only pays off through ``transcribe_batch``."""
        return self.transcribe_batch([(chunk, audio)])[0]

    @property
    def work_seconds(self) -> float:
        """Speech per ``transcribe_batch`` call that keeps every batch full (and is small enough to checkpoint)."""
        return 4 * self.batch_size * 30.0


def compute_type(settings: AsrSettings) -> str:
    """The numeric type the model really runs in; part of the model tag.

    CTranslate2 takes the configured type as it is (int8 on CPU, float16 on GPU).
    transformers runs float32 on the CPU whatever is configured, and bfloat16,
    float16 or float32 on a GPU.
    """
    if settings.engine != "transformers":
        return settings.compute_type
    if settings.device == "cpu":
        return "float32"
    if settings.compute_type not in TRANSFORMERS_GPU_TYPES:
        raise ValueError(f"compute_type {settings.compute_type!r} is not supported by the transformers engine on "
                         f"{settings.device} (use one of: {', '.join(TRANSFORMERS_GPU_TYPES)})")
    return settings.compute_type


def model_tag(settings: AsrSettings) -> str:
    """Names the model and how it runs; part of every transcript's identity."""
    return f"{settings.path('model_dir').name}-{settings.engine}-{compute_type(settings)}"


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


def run_with_backoff(items: Sequence[T], batch_size: int, run: Callable[[Sequence[T]], list[R]],
                     what: str) -> list[R]:
    """``run`` over consecutive batches; on out-of-memory free the cache, halve the failed batch and retry it.

    The smaller batch size is kept for the rest of the call; out of memory with a
    batch of one becomes ``EngineOutOfMemory``.
    """
    results: list[R] = []
    size = max(1, batch_size)
    done = 0
    while done < len(items):
        batch = items[done : done + size]
        try:
            out = run(batch)
        except Exception as exc:
            if not is_out_of_memory(exc):
                raise
            free_accelerator_memory()
            if len(batch) == 1:
                raise EngineOutOfMemory(
                    f"out of memory on {what} even at batch size 1 ({type(exc).__name__}: {exc}); "
                    "the task fails so that Airflow retries it"
                ) from exc
            size = len(batch) // 2
            log.warning("out of memory on %s (%s); retrying with batch size %d", what, type(exc).__name__, size)
            continue
        results.extend(out)
        done += len(batch)
    return results


_loaded: dict[tuple[str, str | None], AsrEngine] = {}


def _engine_key(settings: AsrSettings, hotwords: str | None) -> tuple[str, str | None]:
    """Every setting of the engine section (so none can be forgotten) and the hotwords fixed at load."""
    return json.dumps(dataclasses.asdict(settings), sort_keys=True), hotwords


def get_engine(settings: AsrSettings, hotwords: str | None = None) -> AsrEngine:
    """The configured engine, loaded (and warmed up) once per worker process and reused across tasks.

    ``hotwords`` (the term dictionary's spellings, which post-processing owns) are fixed when the
    model loads, so they are part of the cache key.
    """
    key = _engine_key(settings, hotwords)
    if key not in _loaded:
        if settings.engine not in ENGINES:
            raise ValueError(f"unknown engine {settings.engine!r} (supported: {', '.join(ENGINES)})")
        if settings.model_family not in MODEL_FAMILIES:
            raise ValueError(f"unknown model_family {settings.model_family!r} (supported: {', '.join(MODEL_FAMILIES)})")
        engine: AsrEngine
        if settings.engine == "ctranslate2":
            if settings.model_family != "whisper":
                raise ValueError(f"engine ctranslate2 runs model_family whisper only, not {settings.model_family!r}")
            from asr_tasks.engines.ctranslate2 import CTranslate2Whisper

            engine = CTranslate2Whisper(settings, hotwords)
        else:
            try:
                from asr_tasks.engines.transformers import load_transformers_engine
            except ModuleNotFoundError as exc:
                if exc.name not in TRANSFORMERS_PACKAGES:
                    raise
                raise EngineUnavailable(
                    f"engine transformers needs {' and '.join(TRANSFORMERS_PACKAGES)}, and {exc.name} is not "
                    "installed: pip install -r requirements-transformers.txt -c constraints.txt"
                ) from exc
            engine = load_transformers_engine(settings, hotwords)
        _loaded[key] = engine
    return _loaded[key]
