"""Whisper in CTranslate2 format through faster-whisper: int8 on CPU, fp16 on GPU, batched over packed windows.

Chunks of different recordings share 30 s windows (``packing``); a batch of
windows goes through one encoder call and one batched beam search, and words get
their times from CTranslate2's cross-attention alignment.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from asr_tasks.config import AsrSettings
from asr_tasks.models import SAMPLE_RATE, AudioChunk
from asr_tasks.transcription.devices import acquire_device
from asr_tasks.transcription.engine import ModelError
from asr_tasks.transcription.packing import (
    MAX_TOKENS,
    WINDOW_SECONDS,
    Decoded,
    PackingStats,
    Window,
    WindowedWhisper,
    Word,
    looks_degenerate,
    window_audio,
)
from asr_tasks.version import model_tag

REQUIRED_FILES = ("model.bin", "config.json", "tokenizer.json")
_CHECKED_TOKENS = ("<|endoftext|>", "<|startoftranscript|>", "<|transcribe|>", "<|notimestamps|>")


def check_model_dir(model_dir: Path) -> None:
    """Fail early and clearly when the local model folder is missing, incomplete or inconsistent."""
    if not model_dir.is_dir():
        raise ModelError(f"model folder {model_dir} does not exist (run `asr install-model`)")
    missing = [name for name in REQUIRED_FILES if not (model_dir / name).is_file()]
    if not any((model_dir / v).is_file() for v in ("vocabulary.txt", "vocabulary.json")):
        missing.append("vocabulary.txt")
    if missing:
        raise ModelError(f"model folder {model_dir} lacks {', '.join(missing)}")
    vocabulary = _vocabulary(model_dir)
    try:
        tokenizer = json.loads((model_dir / "tokenizer.json").read_text(encoding="utf-8"))
        ids = {**tokenizer["model"]["vocab"], **{t["content"]: t["id"] for t in tokenizer.get("added_tokens", [])}}
    except (ValueError, KeyError, TypeError) as exc:
        raise ModelError(f"model folder {model_dir}: tokenizer.json is not a tokenizer file ({exc})") from exc
    for token in _CHECKED_TOKENS:
        if token not in ids:
            raise ModelError(f"model folder {model_dir}: tokenizer.json has no {token} token (not a Whisper tokenizer)")
        if ids[token] >= len(vocabulary) or vocabulary[ids[token]] != token:
            raise ModelError(f"model folder {model_dir}: tokenizer.json does not match the model's vocabulary "
                             f"({token} is id {ids[token]} in tokenizer.json)")


def _vocabulary(model_dir: Path) -> list[str]:
    if (model_dir / "vocabulary.json").is_file():
        return list(json.loads((model_dir / "vocabulary.json").read_text(encoding="utf-8")))
    return (model_dir / "vocabulary.txt").read_text(encoding="utf-8").splitlines()


class CTranslate2Whisper(WindowedWhisper):
    def __init__(self, settings: AsrSettings, hotwords: str | None = None) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import ctranslate2
        from faster_whisper import WhisperModel

        model_dir = settings.path("model_dir")
        check_model_dir(model_dir)
        self.settings = settings
        self.model_name = model_tag(settings)
        self.batch_size = settings.batch_size
        self.hotwords = hotwords  # the term dictionary's spellings bias decoding towards them
        self.lease = acquire_device(settings)
        self.device = self.lease.torch_device
        try:
            if self.lease.kind == "cuda" and self.lease.index >= ctranslate2.get_cuda_device_count():
                raise RuntimeError(f"{self.device} is not visible to CTranslate2 "
                                   f"({ctranslate2.get_cuda_device_count()} CUDA device(s)); check gpu_count")
            try:
                self.model = WhisperModel(
                    str(model_dir),
                    device=self.lease.kind,
                    device_index=self.lease.index,
                    compute_type=settings.compute_type,
                    cpu_threads=settings.cpu_threads,
                    local_files_only=True,
                )
            except RuntimeError as exc:
                if "cuda" in str(exc).lower():
                    raise
                raise ModelError(f"model folder {model_dir}: model.bin could not be loaded: {exc}") from exc
            self.multilingual = bool(self.model.model.is_multilingual)
            self.packing_stats = PackingStats()
            self._warm_up()
        except BaseException:
            self.lease.release()
            raise

    def _warm_up(self) -> None:
        """One real pass at load time: the first task does not pay for lazy initialisation."""
        noise = np.random.default_rng(0).normal(0, 0.01, SAMPLE_RATE).astype(np.float32)
        self.transcribe_batch([(AudioChunk("warm-up", 0, "warm-up", "", 0.0, 1.0), noise)])

    def _features(self, audio: np.ndarray) -> np.ndarray:
        from faster_whisper.audio import pad_or_trim

        return pad_or_trim(self.model.feature_extractor(audio)[..., :-1])

    def _detect_batch(self, audios: list[np.ndarray]) -> list[str]:
        encoder_output = self.model.encode(np.stack([self._features(a) for a in audios]))
        return [ranked[0][0][2:-2] for ranked in self.model.model.detect_language(encoder_output)]

    def _decode_batch(self, windows: list[Window], audios: Sequence[np.ndarray], language: str) -> list[Decoded]:
        from faster_whisper.tokenizer import Tokenizer
        from faster_whisper.transcribe import get_suppressed_tokens

        tokenizer = Tokenizer(self.model.hf_tokenizer, self.multilingual, task="transcribe", language=language)
        prompt = self.model.get_prompt(tokenizer, [], without_timestamps=True, hotwords=self.hotwords)
        budgets = [min(MAX_TOKENS - len(prompt), self.max_new_tokens(w.speech_seconds, language))
                   for w in windows]
        features = np.stack([self._features(window_audio(w, audios, SAMPLE_RATE)) for w in windows])
        encoder_output = self.model.encode(features)
        results = self.model.model.generate(
            encoder_output,
            [prompt] * len(windows),
            beam_size=self.settings.beam_size,
            max_length=len(prompt) + max(budgets),
            return_no_speech_prob=True,
            suppress_blank=True,
            suppress_tokens=get_suppressed_tokens(tokenizer, [-1]),
        )
        # each window keeps its own budget, so its text does not depend on the windows batched with it
        tokens = [[t for t in r.sequences_ids[0][:budget] if t < tokenizer.eot] for r, budget in zip(results, budgets)]
        frames = [min(int(WINDOW_SECONDS * 100), max(1, math.ceil(w.end * 100))) for w in windows]
        alignments = self.model.find_alignment(tokenizer, tokens, encoder_output, frames)
        decoded = []
        for result, text_tokens, alignment, budget in zip(results, tokens, alignments, budgets):
            exhausted = len(result.sequences_ids[0]) >= budget
            words = [Word(a["word"], float(a["start"]), float(a["end"]), float(a["probability"]))
                     for a in alignment if a["word"]]
            degenerate = exhausted or looks_degenerate(tokenizer.decode(text_tokens))
            decoded.append(Decoded(words, float(result.no_speech_prob), degenerate))
        return decoded

