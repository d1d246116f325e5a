"""The configured engine, loaded once per process: ``engine`` (ctranslate2 or transformers) and
``model_family`` (whisper or qwen3_asr) choose it; the heavy libraries load only when it is asked for."""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable
from typing import get_args

from asr_tasks.config import AsrSettings, EngineName, ModelFamily
from asr_tasks.transcription.engine import AsrEngine, EngineUnavailable

log = logging.getLogger(__name__)

ENGINES = get_args(EngineName)
MODEL_FAMILIES = get_args(ModelFamily)
TRANSFORMERS_PACKAGES = ("torch", "transformers")
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
            from asr_tasks.transcription.ctranslate2 import CTranslate2Whisper

            engine = CTranslate2Whisper(settings, hotwords)
        else:
            try:
                if settings.model_family == "qwen3_asr":
                    from asr_tasks.transcription.qwen3_asr import TransformersQwen3Asr

                    loader: Callable[[AsrSettings, str | None], AsrEngine] = TransformersQwen3Asr
                else:
                    from asr_tasks.transcription.transformers import TransformersWhisper

                    loader = TransformersWhisper
            except ModuleNotFoundError as exc:
                if exc.name not in TRANSFORMERS_PACKAGES:
                    raise
                raise EngineUnavailable(
                    f"engine transformers needs {' and '.join(TRANSFORMERS_PACKAGES)}, and {exc.name} is not "
                    "installed: pip install -r requirements-transformers.txt -c constraints.txt"
                ) from exc
            engine = loader(settings, hotwords)
        _loaded[key] = engine
    return _loaded[key]

