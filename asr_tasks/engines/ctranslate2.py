"""Whisper in CTranslate2 format through faster-whisper: int8 on CPU, fp16 on GPU."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from asr_tasks.config import Settings
from asr_tasks.engines import ModelError, model_tag
from asr_tasks.models import AudioChunk, Segment

REQUIRED_FILES = ("model.bin", "config.json", "tokenizer.json")


def check_model_dir(model_dir: Path) -> None:
    """Fail early and clearly when the local model folder is missing or incomplete."""
    if not model_dir.is_dir():
        raise ModelError(f"model folder {model_dir} does not exist (run `asr install-model`)")
    missing = [name for name in REQUIRED_FILES if not (model_dir / name).is_file()]
    if not any((model_dir / v).is_file() for v in ("vocabulary.txt", "vocabulary.json")):
        missing.append("vocabulary.txt")
    if missing:
        raise ModelError(f"model folder {model_dir} lacks {', '.join(missing)}")


class CTranslate2Whisper:
    def __init__(self, settings: Settings) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from faster_whisper import WhisperModel

        model_dir = settings.path("model_dir")
        check_model_dir(model_dir)
        self.settings = settings
        self.model_name = model_tag(settings)
        self.model = WhisperModel(
            str(model_dir),
            device=settings.device,
            compute_type=settings.compute_type,
            cpu_threads=settings.cpu_threads,
            local_files_only=True,
        )

    def transcribe(self, chunk: AudioChunk, audio: np.ndarray) -> list[Segment]:
        """Transcribe one chunk; segment times are shifted to the recording's clock."""
        pieces, info = self.model.transcribe(
            audio,
            language=self.settings.language,
            beam_size=self.settings.beam_size,
            vad_filter=False,  # the pipeline's VAD already cut the chunk
            condition_on_previous_text=False,
        )
        segments = []
        for piece in pieces:
            text = piece.text.strip()
            if not text:
                continue
            start = min(chunk.end, chunk.start + max(0.0, piece.start))
            end = min(chunk.end, chunk.start + max(piece.start, piece.end))
            segments.append(
                Segment(
                    recording_id=chunk.recording_id,
                    channel=chunk.channel,
                    speaker=chunk.speaker,
                    start=round(start, 3),
                    end=round(end, 3),
                    text=text,
                    avg_logprob=round(piece.avg_logprob, 4),
                    no_speech_prob=round(piece.no_speech_prob, 4),
                    language=info.language,
                )
            )
        return segments
