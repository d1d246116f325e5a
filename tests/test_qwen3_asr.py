"""Qwen3-ASR through transformers on tiny random models: what the audio encoder and the aligner are given, how the
text is decoded and flagged, which folders are refused, and the attention and cache settings.
"""

from __future__ import annotations

import json
import logging
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from test_engines import noise_items, tiny_aligner, tiny_qwen, tiny_whisper, transformers_settings  # noqa: F401

from asr_tasks.config import ConfigError, Settings, load_settings
from asr_tasks.transcription.engine import ModelError
from asr_tasks.transcription.engines import get_engine
from asr_tasks.transcription.qwen3_asr import TransformersQwen3Asr
from asr_tasks.transcription.transformers import check_model_dir, pretrained

SR = 16000
HOP = 160


def qwen(settings: Settings, model_dir: Path, **changes: Any) -> TransformersQwen3Asr:
    engine = get_engine(transformers_settings(settings, model_dir, "qwen3_asr", **changes).asr)
    assert isinstance(engine, TransformersQwen3Asr)
    return engine


@pytest.fixture
def hooks() -> Iterator[list[Any]]:
    """Forward hooks a test puts on a model, removed after it: the engines (and their models) outlive the test."""
    handles: list[Any] = []
    yield handles
    for handle in handles:
        handle.remove()


def encoder_frames(model: Any, hooks: list[Any]) -> list[int]:
    """The mel frames of every batch the model's audio encoder is given, as they come."""
    frames: list[int] = []
    hooks.append(model.model.audio_tower.register_forward_pre_hook(
        lambda _, args, kwargs: frames.append((kwargs.get("input_features") if kwargs else args[0]).shape[-1]),
        with_kwargs=True))
    return frames


def thirty_second_texts(engine: TransformersQwen3Asr, audios: list[np.ndarray]) -> list[str]:
    """Each chunk's text with its features padded to 30 s (the feature extractor's default), one chunk at a time."""
    texts = []
    for audio in audios:
        inputs = engine.processor.apply_transcription_request(audio=[audio], language="en")
        alone = engine.processor.feature_extractor(audio, sampling_rate=SR, return_attention_mask=True,
                                                   return_tensors="pt")
        assert alone["input_features"].shape[-1] == 3000
        inputs["input_features"], inputs["input_features_mask"] = alone["input_features"], alone["attention_mask"]
        budget = engine.max_new_tokens(len(audio) / SR)
        with torch.inference_mode():
            row = engine.model.generate(**inputs, do_sample=False, max_new_tokens=budget)[0]
        tokens = row[inputs["input_ids"].shape[1] :].tolist()[:budget]
        end = next((k for k, t in enumerate(tokens) if t in engine.stop_ids), len(tokens))
        said = engine.tokenizer.decode(tokens[:end], skip_special_tokens=True)
        texts.append(engine.processor.parse_output(said)["transcription"].strip())
    return texts


# -- the audio encoder's input ------------------------------------------------------------------------------------


def test_a_bucket_of_short_chunks_reaches_the_encoders_as_wide_as_its_longest_chunk(
        settings: Settings, tiny_qwen: Path, tiny_aligner: Path, hooks: list[Any],  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    engine = qwen(settings, tiny_qwen, language="en", batch_size=6, aligner_dir=str(tiny_aligner))
    assert engine.aligner is not None
    items = noise_items([2.0, 3.1, 4.4, 5.0, 2.7, 3.9], seed=4)
    recognised, aligned = encoder_frames(engine.model, hooks), encoder_frames(engine.aligner.model, hooks)
    extractor = type(engine.processor.feature_extractor)
    extract, extractions = extractor.__call__, []
    monkeypatch.setattr(extractor, "__call__", lambda *args, **kwargs: extractions.append(1) or extract(*args, **kwargs))
    results = engine.transcribe_batch(items)
    window = 2 * engine.model.config.audio_config.n_window  # the encoder takes whole windows of frames
    longest = max(len(audio) for _, audio in items) // HOP
    assert longest == 500 and recognised == aligned == [-(-longest // window) * window]  # not 3,000 (30 s)
    assert all(segments[0].words for segments in results)  # the aligner had every chunk
    assert len(extractions) == 2  # the bucket's features, extracted once for the recogniser and once for the aligner


def test_a_mixed_bucket_says_what_its_chunks_said_with_30_second_features(
        settings: Settings, tiny_qwen: Path, hooks: list[Any]) -> None:  # noqa: F811
    engine = qwen(settings, tiny_qwen, language="en", batch_size=5)
    items = noise_items([0.3, 7.5, 2.2, 4.1, 12.0], seed=5)
    assert all(len(audio) % HOP == 0 for _, audio in items)
    frames = encoder_frames(engine.model, hooks)
    texts = [[s.text for s in segments] for segments in engine.transcribe_batch(items)]
    assert frames == [1200]
    assert texts == [[text] for text in thirty_second_texts(engine, [audio for _, audio in items])]


# -- the aligner --------------------------------------------------------------------------------------------------


def test_the_aligner_brings_only_its_chosen_time_slots_to_the_cpu(
        settings: Settings, tiny_qwen: Path, tiny_aligner: Path,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch) -> None:
    engine = qwen(settings, tiny_qwen, language="en", batch_size=4, aligner_dir=str(tiny_aligner))
    aligner = engine.aligner
    assert aligner is not None
    items = noise_items([2.2, 0.4, 4.1, 3.3], seed=6)
    audios = [audio for _, audio in items]
    texts = [segments[0].text for segments in engine.transcribe_batch(items)]
    processor = aligner.processor
    expected = []
    for audio, text in zip(audios, texts):  # as before: alone, padded to 30 s, all logits in fp32 on the CPU
        if not processor.split_words_for_alignment(text, "en"):
            expected.append([])
            continue
        inputs, word_lists = processor.prepare_forced_aligner_inputs(
            audio=[audio], transcript=[text], language=["en"],
            processor_kwargs={"audio_kwargs": {"padding": "max_length"}})
        with torch.inference_mode():
            logits = aligner.model(**inputs).logits.float()
        timed = processor.decode_forced_alignment(logits, inputs["input_ids"], word_lists,
                                                  timestamp_token_id=aligner.timestamp)[0]
        expected.append([(w["text"], float(w["start_time"]), float(w["end_time"])) for w in timed])

    moved: list[torch.Tensor] = []
    to_cpu = torch.Tensor.cpu

    def recorded(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        out = to_cpu(tensor, *args, **kwargs)
        if sys._getframe(1).f_globals.get("__name__") == "asr_tasks.transcription.qwen3_asr":
            moved.append(out)
        return out

    monkeypatch.setattr(torch.Tensor, "cpu", recorded)
    assert aligner.align(audios, texts, ["en"] * len(texts)) == expected
    assert moved and all(t.dtype == torch.int64 and t.dim() == 2 for t in moved), [(t.dtype, t.shape) for t in moved]
    assert sum(1 for words in expected if words) >= 3


# -- decoding -----------------------------------------------------------------------------------------------------


def test_the_text_is_decoded_without_special_tokens_and_keeps_its_language(
        settings: Settings, tiny_qwen: Path,  # noqa: F811
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    engine = qwen(settings, tiny_qwen, language=None)
    tokenizer = engine.tokenizer
    ids = tokenizer.convert_tokens_to_ids
    said = (tokenizer.encode("language English<asr_text>hi", add_special_tokens=False) + [ids("<|audio_start|>")]
            + tokenizer.encode(" there", add_special_tokens=False) + [ids("<|im_end|>")])
    generate = engine.model.generate

    def scripted(**inputs: Any) -> torch.Tensor:
        """The model says ``said``; the real generate still runs, for the logits processors."""
        real, prompt = generate(**inputs), inputs["input_ids"].shape[1]
        tail = torch.full((real.shape[0], max(real.shape[1] - prompt, len(said))), ids("<|endoftext|>"))
        tail[:, : len(said)] = torch.tensor(said)
        return torch.cat([real[:, :prompt], tail], dim=1)

    monkeypatch.setattr(engine.model, "generate", scripted)
    caplog.clear()  # the warm-up's noise may have run out of its budget
    (segment,) = engine.transcribe_batch(noise_items([2.5], seed=7))[0]
    assert engine.max_new_tokens(2.5) > len(said)
    assert (segment.text, segment.language) == ("hi there", "en")
    assert "token budget" not in caplog.text  # it ended by itself: not flagged


def test_a_chunk_whose_token_budget_cut_its_text_is_flagged(
        settings: Settings, tiny_qwen: Path, caplog: pytest.LogCaptureFixture) -> None:  # noqa: F811
    engine = qwen(settings, tiny_qwen, language="en", batch_size=3, max_tokens_per_second=0.5)
    items = noise_items([2.0, 3.0, 4.0], seed=8)
    assert [engine.max_new_tokens(chunk.duration) for chunk, _ in items] == [9, 10, 10]  # a few tokens
    cut_before = engine.budget_cut
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="asr_tasks.transcription.qwen3_asr"):
        results = engine.transcribe_batch(items)
    assert engine.budget_cut - cut_before == len(items)  # a random model never stops by itself
    for (chunk, _), segments in zip(items, results):
        assert f"recording {chunk.recording_id}, channel {chunk.channel}, {chunk.start:.3f}-{chunk.end:.3f} s: the " \
               "text ran out of its token budget" in caplog.text
        assert segments and segments[0].text  # kept, and flagged


# -- model folders ------------------------------------------------------------------------------------------------


def original_release(hf_folder: Path, folder: Path) -> Path:
    """``hf_folder`` laid out as Qwen's own release: the model nested in thinker_config, Whisper's feature extractor."""
    shutil.copytree(hf_folder, folder, ignore=shutil.ignore_patterns("processor_config.json", "chat_template.jinja"))
    config = json.loads((hf_folder / "config.json").read_text())
    thinker = {key: config.pop(key) for key in ("audio_config", "text_config", "audio_token_id")}
    config.update(thinker_config={**thinker, "model_type": "qwen3_asr_thinker"}, support_languages=["English"])
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "preprocessor_config.json").write_text(json.dumps({
        "feature_extractor_type": "WhisperFeatureExtractor", "processor_class": "Qwen3ASRProcessor",
        "feature_size": 128, "sampling_rate": SR, "hop_length": HOP, "chunk_length": 30, "n_fft": 400}))
    (folder / "chat_template.json").write_text(json.dumps({"chat_template": "{{ messages }}"}))
    return folder


def test_an_original_qwen3_asr_folder_is_refused_before_loading(
        settings: Settings, tiny_qwen: Path, tiny_aligner: Path, tmp_path: Path) -> None:  # noqa: F811
    original = original_release(tiny_qwen, tmp_path / "Qwen3-ASR-0.6B")
    with pytest.raises(ModelError, match=rf"model folder {original} holds an original Qwen3 release \(config.json "
                                         r"nests the model in thinker_config\), which transformers does not load: "
                                         r"use the transformers-format checkpoint, the one named -hf"):
        check_model_dir(original, "qwen3_asr")
    with pytest.raises(ModelError, match=rf"{original} holds an original Qwen3 release.*-hf"):
        qwen(settings, original, language="en")
    aligner = original_release(tiny_aligner, tmp_path / "Qwen3-ForcedAligner-0.6B")
    with pytest.raises(ModelError, match=rf"model folder {aligner} holds an original Qwen3 release"):
        qwen(settings, tiny_qwen, language="en", aligner_dir=str(aligner))
    whisper_features = tmp_path / "whisper-features"  # the -hf config with the original's processor files
    shutil.copytree(tiny_qwen, whisper_features, ignore=shutil.ignore_patterns("processor_config.json"))
    shutil.copy(original / "preprocessor_config.json", whisper_features)
    with pytest.raises(ModelError, match=rf"{whisper_features} holds an original Qwen3 release \(its feature "
                                         r"extractor is WhisperFeatureExtractor, not Qwen3ASRFeatureExtractor\)"):
        check_model_dir(whisper_features, "qwen3_asr")
    assert check_model_dir(tiny_qwen, "qwen3_asr")["model_type"] == "qwen3_asr"  # the -hf layout passes
    assert check_model_dir(tiny_aligner, "qwen3_asr")["model_type"] == "qwen3_asr"


# -- attention and cache settings ---------------------------------------------------------------------------------


def test_attn_implementation_reaches_every_model_the_engine_loads(
        settings: Settings, tiny_qwen: Path, tiny_aligner: Path, tiny_whisper: Path) -> None:  # noqa: F811
    engine = qwen(settings, tiny_qwen, language="en", attn_implementation="eager", aligner_dir=str(tiny_aligner))
    assert engine.aligner is not None
    for config in (engine.model.config, engine.aligner.model.config):
        assert {config._attn_implementation, config.text_config._attn_implementation,
                config.audio_config._attn_implementation} == {"eager"}
    assert qwen(settings, tiny_qwen, language="en").model.config._attn_implementation == "sdpa"  # the default
    _, whisper = pretrained(tiny_whisper, "WhisperForConditionalGeneration", torch.float32, "eager")
    assert whisper.config._attn_implementation == "eager"


def test_unknown_attention_and_cache_settings_are_refused_at_start_up(tmp_path: Path) -> None:
    for key, value in (("ATTN_IMPLEMENTATION", "flash"), ("GENERATION_CACHE", "offloaded")):
        with pytest.raises(ConfigError, match=rf"env ASR_{key}: bad value for {key.lower()}: '{value}'"):
            load_settings(env={f"ASR_{key}": value})
    (tmp_path / "config.yaml").write_text("asr:\n  generation_cache: paged\n")
    with pytest.raises(ConfigError, match=r"config.yaml: bad value for generation_cache: 'paged'"):
        load_settings(config_file=tmp_path / "config.yaml", env={})
    loaded = load_settings(env={"ASR_ATTN_IMPLEMENTATION": "flash_attention_2", "ASR_GENERATION_CACHE": "static"})
    assert (loaded.asr.attn_implementation, loaded.asr.generation_cache) == ("flash_attention_2", "static")
    assert (Settings().asr.attn_implementation, Settings().asr.generation_cache) == ("sdpa", "dynamic")


def test_flash_attention_without_flash_attn_or_cuda_is_refused_with_what_to_do(
        settings: Settings, tiny_qwen: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    import transformers

    monkeypatch.setattr(transformers.utils, "is_flash_attn_2_available", lambda: False)
    with pytest.raises(ModelError, match="flash_attention_2 needs the flash-attn package, which is not installed "
                                         r"here .*or set attn_implementation: sdpa"):
        qwen(settings, tiny_qwen, attn_implementation="flash_attention_2", device="cuda", compute_type="bfloat16")
    monkeypatch.setattr(transformers.utils, "is_flash_attn_2_available", lambda: True)
    with pytest.raises(ModelError, match="flash_attention_2 runs on CUDA only, and device is cpu"):
        qwen(settings, tiny_qwen, attn_implementation="flash_attention_2")


def test_a_static_cache_gives_the_same_greedy_text(
        settings: Settings, tiny_qwen: Path, hooks: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    items = noise_items([2.2, 7.5, 0.4, 4.1, 3.3], seed=9)
    dynamic = qwen(settings, tiny_qwen, language="en", batch_size=3)
    static = qwen(settings, tiny_qwen, language="en", batch_size=3, generation_cache="static")
    caches: dict[str, set[str]] = {"dynamic": set(), "static": set()}
    calls: list[dict[str, Any]] = []
    for name, engine in (("dynamic", dynamic), ("static", static)):
        hooks.append(engine.model.model.language_model.register_forward_pre_hook(
            lambda _, args, kwargs, name=name: caches[name].add(type(kwargs.get("past_key_values")).__name__),
            with_kwargs=True))
    generate = static.model.generate

    def spied(**inputs: Any) -> Any:
        calls.append({k: inputs.get(k) for k in ("cache_implementation", "disable_compile")})
        return generate(**inputs)

    monkeypatch.setattr(static.model, "generate", spied)
    assert static.transcribe_batch(items) == dynamic.transcribe_batch(items)
    assert caches == {"dynamic": {"DynamicCache"}, "static": {"StaticCache"}}
    assert calls == [{"cache_implementation": "static", "disable_compile": True}] * 2  # no compiling on the CPU
