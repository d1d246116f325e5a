"""ASR engines behind one interface, chosen by configuration and loaded once per process."""

from __future__ import annotations

from typing import Protocol

import numpy as np

from asr_tasks.config import Settings
from asr_tasks.models import AudioChunk, Segment


class ModelError(RuntimeError):
    """A model that is missing or incomplete in its configured local folder."""


class AsrEngine(Protocol):
    """Speech chunks in, timed text with confidence out."""

    model_name: str

    def transcribe(self, chunk: AudioChunk, audio: np.ndarray) -> list[Segment]: ...


def model_tag(settings: Settings) -> str:
    """Names the model and how it runs; part of every transcript's identity."""
    return f"{settings.path('model_dir').name}-{settings.engine}-{settings.compute_type}"


_loaded: dict[tuple[object, ...], AsrEngine] = {}


def get_engine(settings: Settings) -> AsrEngine:
    """The configured engine, loaded once per worker process and reused across tasks."""
    key = (model_tag(settings), settings.path("model_dir"), settings.device, settings.cpu_threads,
           settings.language, settings.beam_size)
    if key not in _loaded:
        if settings.engine != "ctranslate2":
            raise ValueError(f"unknown engine {settings.engine!r} (supported: ctranslate2)")
        from asr_tasks.engines.ctranslate2 import CTranslate2Whisper

        _loaded[key] = CTranslate2Whisper(settings)
    return _loaded[key]
