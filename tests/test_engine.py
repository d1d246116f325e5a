"""The CTranslate2 Whisper engine on real speech, and its model checks."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from stages import transcript_of

from asr_tasks.config import Settings
from asr_tasks.intake.audio import read_pcm
from asr_tasks.intake.days import recording_for_file
from asr_tasks.models import SAMPLE_RATE
from asr_tasks.pipeline.preprocess import preprocess_local
from asr_tasks.transcription.ctranslate2 import check_model_dir
from asr_tasks.transcription.engine import ModelError
from asr_tasks.transcription.engines import get_engine


def words(text: str) -> str:
    return " ".join(re.findall(r"[a-z']+", text.lower()))


def test_missing_or_incomplete_model_folder_is_a_clear_error(tmp_path: Path, model_dir: Path) -> None:
    with pytest.raises(ModelError, match="does not exist"):
        check_model_dir(tmp_path / "nowhere")
    partial = tmp_path / "partial"
    shutil.copytree(model_dir, partial, ignore=shutil.ignore_patterns("tokenizer.json", "model.bin"))
    with pytest.raises(ModelError, match="lacks model.bin, tokenizer.json"):
        check_model_dir(partial)


def test_tokenizer_of_another_model_is_a_clear_error(tmp_path: Path, model_dir: Path) -> None:
    mixed = tmp_path / "mixed"
    shutil.copytree(model_dir, mixed, ignore=shutil.ignore_patterns("model.bin"))
    (mixed / "model.bin").write_bytes(b"")
    tokenizer = json.loads((mixed / "tokenizer.json").read_text(encoding="utf-8"))
    for token in tokenizer["added_tokens"]:  # an English-only Whisper's ids: one lower from here on
        if token["content"] == "<|startoftranscript|>":
            token["id"] -= 1
    (mixed / "tokenizer.json").write_text(json.dumps(tokenizer), encoding="utf-8")
    with pytest.raises(ModelError, match=f"{mixed}: tokenizer.json does not match the model's vocabulary"):
        check_model_dir(mixed)


def test_engine_is_loaded_once_per_process(settings: Settings, model_dir: Path) -> None:
    assert get_engine(settings.asr) is get_engine(settings.override(store_root="/elsewhere").asr)


def test_jfk_transcribed_with_absolute_times(settings: Settings, model_dir: Path, jfk: Path, tmp_path: Path) -> None:
    rec = recording_for_file(jfk)
    pre, pcm = preprocess_local(rec, jfk, tmp_path / "work", settings.audio)
    assert [c.speaker for c in pre.channels] == ["mixed"]  # identical stereo sides fold to mono
    engine = get_engine(settings.asr)
    segments = []
    for chunk in pre.chunks:
        segments += engine.transcribe(chunk, read_pcm(pcm[chunk.channel], SAMPLE_RATE, chunk.start, chunk.end))
    transcript = transcript_of(pre, segments, engine.model_name)
    text = words(" ".join(s.text for s in transcript.segments))
    assert "ask not what your country can do for you" in text
    assert "ask what you can do for your country" in text
    assert transcript.language == "en"
    for seg in transcript.segments:
        assert 0.0 <= seg.start < seg.end <= pre.duration + 0.01
    assert [s.start for s in transcript.segments] == sorted(s.start for s in transcript.segments)
