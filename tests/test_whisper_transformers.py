"""Whisper through transformers: the device its inputs are on, words of languages written without spaces, the
batched word-timing pass against the per-window one it replaced, and the no-speech probability.

The model is the tiny random Whisper of ``random_models.py`` with the real Whisper tokenizer; where its random
output cannot show a property, ``generate`` (and the path through the attention) say what they are told.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from test_engines import noise_items, tiny_whisper, transformers_settings  # noqa: F401

from asr_tasks.config import Settings
from asr_tasks.text.postprocess import hotwords
from asr_tasks.transcription import transformers as engine_module
from asr_tasks.transcription.alignment import dynamic_time_warping, median_filter
from asr_tasks.transcription.packing import Slot, Window
from asr_tasks.transcription.transformers import TransformersWhisper

SR = 16000


def load(settings: Settings, model: Path, words: str | None = None, **changes: Any) -> TransformersWhisper:
    """An engine of the test's own (not the process-wide one), so that patching it touches no other test."""
    return TransformersWhisper(transformers_settings(settings, model, "whisper", **changes).asr, words)


def tensors(value: Any) -> Iterator[torch.Tensor]:
    """Every tensor in an argument, however nested (encoder outputs are a mapping of tensors)."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from tensors(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from tensors(item)


def scripted(engine: TransformersWhisper, rows: list[list[int]], logits_processor: Any) -> torch.Tensor:
    """What ``generate`` returns for these tokens, its logits processors shown a step for each (all equally likely)."""
    steps = max(map(len, rows))
    for _ in range(steps):
        for processor in logits_processor:
            processor(None, torch.zeros(len(rows), engine.model.config.vocab_size))
    return torch.tensor([row + [engine.eot] * (steps - len(row)) for row in rows])


class Stop(Exception):
    """Ends a decode once what it hands the model is recorded."""


def test_with_hotwords_every_tensor_a_decode_hands_the_model_is_on_its_device(
        settings: Settings, tiny_whisper: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """On a GPU, a prompt made on the CPU next to start tokens on the GPU fails every decode with hotwords."""
    words = hotwords(settings.postprocess)  # the shipped term dictionary's spellings
    assert words
    engine = load(settings, tiny_whisper, words, language="zh")
    engine.model.to("meta")  # a device that is not the CPU, where nothing runs for real
    engine.device = "meta"
    handed: dict[str, list[torch.device]] = {}

    def generate(*args: Any, **kwargs: Any) -> torch.Tensor:
        for name, value in [*((f"argument {n}", a) for n, a in enumerate(args)), *kwargs.items()]:
            handed.setdefault(name, []).extend(t.device for t in tensors(value))
        return scripted(engine, [[engine.eot]] * len(args[0]), kwargs["logits_processor"])  # the end at once

    def decoder(*args: Any, **kwargs: Any) -> Any:
        handed["word timing"] = [t.device for value in [*args, *kwargs.values()] for t in tensors(value)]
        raise Stop

    monkeypatch.setattr(engine.model, "generate", generate)
    monkeypatch.setattr(engine.model.get_decoder(), "forward", decoder)
    with contextlib.suppress(Stop):
        engine.transcribe_batch(noise_items([3.0, 2.0]))
    assert handed["prompt_ids"] == [torch.device("meta")]
    assert handed["word timing"] and {d for devices in handed.values() for d in devices} == {torch.device("meta")}


SAID = {0: "我们今天去银行办理业务。", 1: "郁郁葱葱的山谷里，龘龘作响！", 2: "余额宝利息多少？"}  # no character shared


def test_chinese_words_are_characters_and_stay_in_the_recording_they_were_said_in(
        settings: Settings, tiny_whisper: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """Three recordings' chunks share a window; the decoder says each chunk's sentence where the chunk sits.

    Without spaces, grouping at leading spaces makes the window's whole text one word, which then lands in one chunk.
    """
    engine = load(settings, tiny_whisper, language="zh")
    items = noise_items([5.0, 4.5, 4.0], recordings=3)
    said = {n: engine.tokenizer.encode(text, add_special_tokens=False) for n, text in SAID.items()}
    assert len(said[1]) > len(SAID[1])  # some characters take several tokens
    decoding: list[Window] = []
    token_ends: list[np.ndarray] = []  # per window with text: when each of its tokens ends, in its own chunk

    def decode_batch(windows: list[Window], audios: Any, language: str) -> Any:
        decoding[:] = windows
        return real_decode_batch(windows, audios, language)

    def generate(*args: Any, logits_processor: Any, **kwargs: Any) -> torch.Tensor:
        rows = []
        for window in decoding:
            rows.append([token for slot in window.slots for token in said[slot.item]] + [engine.eot])
            token_ends.append(np.concatenate([  # spread over each chunk, its first token ending 40% into it
                slot.offset + slot.duration * (0.4 + 0.6 * np.arange(1, len(said[slot.item]) + 1) / len(said[slot.item]))
                for slot in window.slots]))
        return scripted(engine, rows, logits_processor)

    def path(cost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ends = token_ends.pop(0)
        assert len(ends) == cost.shape[0]
        return np.arange(len(ends)), np.minimum(np.round(ends / 0.02).astype(int), cost.shape[1] - 1)

    real_decode_batch = engine._decode_batch
    monkeypatch.setattr(engine, "_decode_batch", decode_batch)
    monkeypatch.setattr(engine.model, "generate", generate)
    monkeypatch.setattr(engine_module, "dynamic_time_warping", path)
    before = dataclasses.replace(engine.packing_stats)  # after the warm-up
    out = engine.transcribe_batch(items)
    assert ["".join(s.text for s in segments) for segments in out] == list(SAID.values())  # its own, no other's
    for (chunk, _), segments in zip(items, out):
        words = [w.text for s in segments for w in s.words]
        assert len(words) >= len(SAID[int(chunk.recording_id[3:])]) - 3  # a word per character, or nearly
        assert all("\ufffd" not in w for w in words)  # whole characters only
        assert all(s.recording_id == chunk.recording_id for s in segments)
    stats = engine.packing_stats.since(before)
    assert (stats.windows, stats.shared, stats.empty_redone) == (1, 3, 0)  # all words from the shared window
    assert [w.text for s in out[1] for w in s.words][:4] == ["郁", "郁", "葱", "葱"]  # characters of 2-3 tokens


def test_word_timing_is_one_decoder_pass_per_batch_and_keeps_the_attention_implementation(
        settings: Settings, tiny_whisper: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    engine = load(settings, tiny_whisper, language="en", batch_size=4, pack_windows=False, max_tokens_per_second=3.0)
    prefix = 4  # <|startoftranscript|><|en|><|transcribe|><|notimestamps|>
    decoder = engine.model.get_decoder()
    forward = decoder.forward
    passes: list[tuple[int, ...]] = []
    attention: set[str] = set()
    switched: list[Any] = []

    def counted(*args: Any, **kwargs: Any) -> Any:
        attention.add(engine.model.config._attn_implementation)
        if kwargs["input_ids"].shape[1] > prefix:  # generate feeds the prompt, then one token a step
            passes.append(tuple(kwargs["input_ids"].shape))
        return forward(*args, **kwargs)

    monkeypatch.setattr(decoder, "forward", counted)
    switch = engine.model.set_attn_implementation
    monkeypatch.setattr(engine.model, "set_attn_implementation", lambda *a: switched.append(a) or switch(*a))
    out = engine.transcribe_batch(noise_items([6.0, 2.5, 9.0, 4.0], recordings=2))
    assert sum(1 for segments in out if segments) >= 3  # the windows had text to time
    assert [shape[0] for shape in passes] == [4]  # one pass for the batch of four windows, not one per window
    assert switched == [] and attention == {"sdpa"}


def test_batched_word_times_and_no_speech_equal_the_per_window_eager_pass(settings: Settings,
                                                                        tiny_whisper: Path) -> None:  # noqa: F811
    """The replaced implementation (an eager pass per window, numpy median, loop DTW) is the reference."""
    engine = load(settings, tiny_whisper, language="en")
    ends = [8.0, 29.0, 17.5, 3.0]  # windows of different lengths: each keeps its own frames
    rng = np.random.default_rng(5)
    audios = [(rng.standard_normal(int(end * SR)) * 0.1).astype(np.float32) for end in ends]
    features = engine.processor.feature_extractor(audios, sampling_rate=SR, return_tensors="pt").input_features
    prefix = engine._decoder_prompt("en")
    sequences = [prefix + rng.integers(0, engine.eot, size).tolist() + [engine.eot] for size in (20, 120, 55, 1)]
    frames = [int(np.ceil(end * 100)) for end in ends]
    with torch.inference_mode():
        encoded = engine.model.get_encoder()(features).last_hidden_state
    times, no_speech = engine._align(encoded, sequences, len(prefix), frames)
    for row, sequence in enumerate(sequences):
        expected, expected_no_speech = per_window_eager(engine, encoded[row : row + 1], sequence, len(prefix),
                                                        frames[row])
        assert np.abs(times[row] - expected).max() <= 0.02, row
        assert no_speech[row] == pytest.approx(expected_no_speech, rel=1e-4)
    assert times[0][len(prefix) :].max() <= 8.0 and times[1].max() > 20.0  # each within its own window


def per_window_eager(engine: TransformersWhisper, encoded: torch.Tensor, sequence: list[int], offset: int,
                     frames: int) -> tuple[np.ndarray, float]:
    """The former word timing of one window, and <|nospeech|>'s probability after <|startoftranscript|>."""
    model = engine.model
    model.set_attn_implementation("eager")
    try:
        with torch.inference_mode():
            out = model(encoder_outputs=(encoded,), decoder_input_ids=torch.tensor([sequence]),
                        output_attentions=True)
    finally:
        model.set_attn_implementation("sdpa")
    no_speech = float(torch.softmax(out.logits[0, len(engine.prompt_tokens)], dim=-1)[engine.no_speech])
    times = np.zeros(len(sequence))
    steps = len(sequence) - offset - 1
    if steps <= 0:
        return times, no_speech
    weights = torch.stack([out.cross_attentions[layer][0, head] for layer, head in model.generation_config.alignment_heads])
    weights = weights[:, offset : offset + steps, : max(1, min(3000, frames) // 2)].float()
    std, mean = torch.std_mean(weights, dim=-2, keepdim=True, unbiased=False)
    smoothed = loop_median_filter(((weights - mean) / std).numpy(), model.config.median_filter_width)
    text_indices, time_indices = loop_dynamic_time_warping(-smoothed.mean(0).astype(np.float64))
    first = np.pad(np.diff(text_indices), (1, 0), constant_values=1).astype(bool)
    times[offset : offset + first.sum()] = time_indices[first] * 0.02
    times[offset + first.sum() :] = time_indices[first][-1] * 0.02
    return times, no_speech


def loop_median_filter(weights: np.ndarray, width: int) -> np.ndarray:
    """The numpy median filter the engine had."""
    pad = width // 2
    if weights.shape[-1] <= pad:
        return weights
    padded = np.pad(weights, [(0, 0)] * (weights.ndim - 1) + [(pad, pad)], mode="reflect")
    return np.median(np.lib.stride_tricks.sliding_window_view(padded, width, axis=-1), axis=-1)


def loop_dynamic_time_warping(cost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The cell-by-cell DTW the engine had."""
    tokens, frames = cost.shape
    total = np.full((tokens + 1, frames + 1), np.inf)
    total[0, 0] = 0.0
    step = np.zeros((tokens + 1, frames + 1), dtype=np.int8)
    for j in range(1, frames + 1):
        for i in range(1, tokens + 1):
            diagonal, up, left = total[i - 1, j - 1], total[i - 1, j], total[i, j - 1]
            if diagonal < up and diagonal < left:
                best, move = diagonal, 0
            elif up < diagonal and up < left:
                best, move = up, 1
            else:
                best, move = left, 2
            total[i, j] = cost[i - 1, j - 1] + best
            step[i, j] = move
    step[0, :], step[:, 0] = 2, 1
    i, j = tokens, frames
    path = []
    while i > 0 or j > 0:
        path.append((i - 1, j - 1))
        i, j = {0: (i - 1, j - 1), 1: (i - 1, j)}.get(int(step[i, j]), (i, j - 1))
    return np.array([p[0] for p in path[::-1]]), np.array([p[1] for p in path[::-1]])


def test_vectorised_dtw_and_median_filter_equal_the_loops_they_replaced() -> None:
    rng = np.random.default_rng(3)
    for shape in [(1, 1), (1, 9), (9, 1), (4, 4), (30, 7), (12, 300), (64, 750)]:
        for cost in (rng.standard_normal(shape), rng.integers(0, 3, shape).astype(float), np.zeros(shape)):  # ties
            new, old = dynamic_time_warping(cost), loop_dynamic_time_warping(cost)
            assert np.array_equal(new[0], old[0]) and np.array_equal(new[1], old[1]), shape
    for width in (1, 3, 7):
        for size in (1, 3, 4, 200):
            weights = rng.standard_normal((2, 5, size)).astype(np.float32)
            assert np.array_equal(median_filter(torch.from_numpy(weights), width).numpy(),
                                  loop_median_filter(weights, width))


def test_no_speech_probability_is_that_of_the_first_step(
        settings: Settings, tiny_whisper: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    engine = load(settings, tiny_whisper, language="en")
    windows = [Window("en", [Slot(n, 0.0, seconds)]) for n, seconds in enumerate([3.0, 6.0, 4.5])]
    audios = [audio for _, audio in noise_items([3.0, 6.0, 4.5], seed=7)]
    probabilities = [d.no_speech_prob for d in engine._decode_batch(windows, audios, "en")]
    assert all(0.0 < p < 1.0 for p in probabilities) and len(set(probabilities)) == 3  # it follows the audio
    head = engine.model.get_output_embeddings()
    project = head.forward
    favoured = torch.zeros(engine.model.config.vocab_size)
    favoured[engine.no_speech] = 40.0
    monkeypatch.setattr(head, "forward", lambda hidden: project(hidden) + favoured)  # "nobody speaks"
    assert all(d.no_speech_prob > 0.99 for d in engine._decode_batch(windows, audios, "en"))
