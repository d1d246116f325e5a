"""The engines behind ``AsrEngine``: transformers (tiny random Qwen3-ASR and Whisper built here), CTranslate2 on real
speech with chunks of several recordings packed into shared windows, OOM back-off and GPU slot assignment.

The tiny models (``random_models.py``) are randomly initialised (wide init, so their greedy output depends on the
audio) and saved with a tokenizer into a temporary folder; the engines load them back through the same local-folder
loader as a real checkpoint.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import wave
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from random_models import build_qwen3_aligner, build_qwen3_asr, build_whisper

from asr_tasks.config import AsrSettings, Settings
from asr_tasks.models import AudioChunk
from asr_tasks.transcription.devices import DeviceBusy, acquire_device, device_slots
from asr_tasks.transcription.engine import Backoff, EngineOutOfMemory, ModelError, is_out_of_memory
from asr_tasks.transcription.engines import get_engine
from asr_tasks.transcription.packing import (
    Decoded,
    PackingStats,
    Slot,
    Window,
    WindowedWhisper,
    Word,
    assign_words,
    pack,
    tighten,
    token_budget,
    window_audio,
    words_to_segments,
)

SR = 16000


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z']+", text.lower()))


@pytest.fixture(scope="session")
def tiny_qwen(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_qwen3_asr(tmp_path_factory.mktemp("qwen3-asr-tiny"))


@pytest.fixture(scope="session")
def tiny_aligner(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_qwen3_aligner(tmp_path_factory.mktemp("qwen3-aligner-tiny"))


@pytest.fixture(scope="session")
def tiny_whisper(tmp_path_factory: pytest.TempPathFactory, model_dir: Path) -> Path:
    return build_whisper(tmp_path_factory.mktemp("whisper-tiny"), model_dir / "tokenizer.json")


def noise_items(lengths: list[float], recordings: int = 2, seed: int = 1) -> list[tuple[AudioChunk, np.ndarray]]:
    """Chunks of several recordings (random audio, distinct per chunk) with their absolute times."""
    rng = np.random.default_rng(seed)
    items, clock = [], [0.0] * recordings
    for n, seconds in enumerate(lengths):
        rec = n % recordings
        start = round(clock[rec] + 0.5, 3)
        chunk = AudioChunk(f"rec{rec}", rec % 2, ("agent", "customer")[rec % 2], f"rec{rec}/ch.pcm",
                           start, round(start + seconds, 3))
        clock[rec] = chunk.end
        items.append((chunk, (rng.standard_normal(int(seconds * SR)) * 0.1).astype(np.float32)))
    return items


def transformers_settings(settings: Settings, model_dir: Path, family: str, **changes: Any) -> Settings:
    """One torch thread: the tiny models gain nothing from more, and the test machine's cores are shared."""
    return settings.override(engine="transformers", model_family=family, model_dir=str(model_dir), cpu_threads=1,
                             **changes)


# -- packing ---------------------------------------------------------------------------------------------------


def test_pack_fills_windows_per_language_and_never_overlaps() -> None:
    durations = [12.0, 3.0, 9.5, 2.0, 30.0, 4.0, 6.0]
    groups = ["en", "en", "en", "zh", "en", "en", "zh"]
    windows = pack(durations, groups, gap=1.0)
    placed = sorted(slot.item for w in windows for slot in w.slots)
    assert placed == list(range(len(durations)))
    for window in windows:
        assert len({groups[s.item] for s in window.slots}) == 1  # a window holds one language
        assert window.end <= 29.0 or len(window.slots) == 1  # a 30 s chunk sits alone
        for a, b in zip(window.slots, window.slots[1:]):
            assert b.offset >= a.end + 1.0 - 1e-9
    assert len(windows) == 4  # [30] alone, [12 9.5 4], [3] (no room left), and zh [6 2]
    assert [w.end for w in windows] == sorted((w.end for w in windows), reverse=True)


def test_words_go_to_the_slot_they_were_said_in_and_onto_the_recording_clock() -> None:
    window = Window("en", [Slot(0, 0.0, 4.0), Slot(1, 5.0, 3.0)])
    said = [Word(" Hello", 0.2, 0.6, 0.9), Word(" there.", 0.7, 3.9, 0.8), Word(" Next", 4.3, 5.4, 0.5),
            Word(" call.", 5.5, 6.0, 0.7), Word(" late", 7.8, 8.6, 0.9)]
    by_slot = assign_words(window, said)
    assert [w.text for w in by_slot[0]] == [" Hello", " there."]
    assert [w.text for w in by_slot[1]] == [" Next", " call.", " late"]  # midpoint 4.85 s is nearer the 2nd slot
    chunk = AudioChunk("r1", 1, "customer", "k", 100.0, 103.0)
    segments = words_to_segments(chunk, window.slots[1], by_slot[1], "en", 0.1)
    assert [s.text for s in segments] == ["Next call.", "late"]
    assert segments[0].start == 100.0 and segments[0].end == 101.0  # clipped into the chunk
    assert segments[1].start == 102.8 and segments[1].end == 103.0
    assert [(w.text, w.start, w.end) for w in segments[0].words] == [(" Next", 100.0, 100.4), (" call.", 100.5, 101.0)]
    assert all(s.recording_id == "r1" and s.speaker == "customer" for s in segments)
    assert segments[0].avg_logprob == pytest.approx(np.mean(np.log([0.5, 0.7])), abs=1e-4)
    audio = window_audio(window, [np.ones(4 * SR, np.float32), np.full(3 * SR, 2.0, np.float32)], SR)
    assert len(audio) == 8 * SR and audio[4 * SR : 5 * SR].max() == 0.0 and audio[-1] == 2.0


def test_a_pause_before_a_new_sentence_ends_a_segment_and_stretched_words_are_cut_back() -> None:
    said = [Word(" Hello", 0.5, 0.8, 0.9), Word(" this", 0.8, 1.1, 0.9), Word(" is", 1.1, 1.3, 0.9),
            Word(" Ann", 1.3, 1.6, 0.9), Word(" How", 1.6, 9.6, 0.8),  # the pause went to "How"
            Word(" are", 9.6, 9.9, 0.9), Word(" you?", 9.9, 10.3, 0.9), Word(" Bye", 12.0, 12.3, 0.9),
            Word(" now.", 13.9, 17.9, 0.9), Word(" 4111", 18.0, 21.0, 0.9)]
    tight = tighten(said)
    assert [(w.start, w.end) for w in tight[:4]] == [(w.start, w.end) for w in said[:4]]  # plausible words stay
    assert tight[4].start == pytest.approx(8.6) and tight[4].end == 9.6  # cut back at its start
    assert tight[8].start == 13.9 and tight[8].end == pytest.approx(14.9)  # a sentence's last word: at its end
    assert tight[9] == said[9]  # a number is many words said
    chunk = AudioChunk("r1", 0, "agent", "k", 20.0, 40.0)
    segments = words_to_segments(chunk, Slot(0, 0.0, 20.0), tight, "en", 0.1)
    assert [(s.text, s.start, s.end) for s in segments] == [
        ("Hello this is Ann", 20.5, 21.6), ("How are you?", 28.6, 30.3), ("Bye now.", 32.0, 34.9), ("4111", 38.0, 40.0)]


class ScriptedWhisper(WindowedWhisper):
    """The packing logic with a decoder that says what it is told: per window layout, the words it hears."""

    multilingual = False
    device = "cpu"
    batch_size = 8
    model_name = "scripted"

    def __init__(self, settings: AsrSettings, hears: Any) -> None:
        self.settings = settings
        self.packing_stats = PackingStats()
        self.hears = hears
        self.windows: list[list[int]] = []

    def _detect_batch(self, audios: list[np.ndarray]) -> list[str]:
        return ["en"] * len(audios)

    def _decode_batch(self, windows: list[Window], audios: Any, language: str) -> list[Decoded]:
        self.windows += [[slot.item for slot in w.slots] for w in windows]
        return [Decoded(self.hears(w), 0.1, False) for w in windows]


def test_a_chunk_left_empty_by_its_shared_window_is_decoded_again_alone(settings: Settings) -> None:
    """Whisper often skips a short utterance after a pause in a packed window: it gets a window of its own."""
    items = noise_items([12.0, 1.6, 3.7, 1.8], recordings=4)

    def hears(window: Window) -> list[Word]:  # speaks only for the first slot when a window is shared
        return [Word(f" said{slot.item}.", slot.offset + 0.1, slot.offset + 0.5, 0.9)
                for slot in window.slots[: 1 if len(window.slots) > 1 else None]]

    engine = ScriptedWhisper(settings.override(language="en").asr, hears)
    out = engine.transcribe_batch(items)
    assert [[s.text for s in segs] for segs in out] == [["said0."], ["said1."], ["said2."], ["said3."]]
    assert engine.windows[0] == [0, 2, 3, 1] and sorted(engine.windows[1:]) == [[1], [2], [3]]
    assert engine.packing_stats.as_dict() == {"chunks": 4, "windows": 1, "shared": 4, "degenerate_redone": 0,
                                              "empty_redone": 3, "empty_after_redo": 0, "fallback_rate": 0.75}

    silent = ScriptedWhisper(settings.override(language="en").asr, lambda w: [])
    assert silent.transcribe_batch(items) == [[], [], [], []]  # only decoded alone may a chunk end empty
    assert (silent.packing_stats.empty_redone, silent.packing_stats.empty_after_redo) == (4, 4)
    assert len(silent.windows) == 5


def test_token_budgets_follow_the_language(settings: Settings) -> None:
    conf = settings.override(max_tokens_per_second=10.0, language_tokens_per_second={"zh": "16"})
    assert token_budget(conf.asr, 10.0, "en") == 108 and token_budget(conf.asr, 10.0, "zh") == 168
    assert token_budget(conf.asr, 10.0, None) == 168  # not known yet: the most any language gets
    assert token_budget(conf.asr, 10.0, "de") == 108


# -- OOM back-off ------------------------------------------------------------------------------------------------


def test_back_off_halves_the_batch_keeps_the_size_that_fitted_and_gives_up_at_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    import torch

    from asr_tasks.transcription import engine as engine_module

    seen: list[int] = []
    freed_in_a_handler: list[bool] = []

    def run(batch: Any) -> list[int]:
        seen.append(len(batch))
        if len(batch) > 3:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return [x * 10 for x in batch]

    def free() -> None:  # the failed batch's tensors are only freed once no traceback holds them
        freed_in_a_handler.append(sys.exc_info()[0] is not None)

    monkeypatch.setattr(engine_module, "free_accelerator_memory", free)
    backoff = Backoff("cuda:0")
    assert backoff.run(list(range(7)), 8, run) == [x * 10 for x in range(7)]
    assert seen == [7, 3, 3, 1] and freed_in_a_handler == [False]
    seen.clear()
    assert backoff.run(list(range(7)), 8, run) == [x * 10 for x in range(7)]
    assert seen == [3, 3, 1] and backoff.limit == 3  # the next call starts from the size that fitted
    seen.clear()
    assert backoff.run(list(range(4)), 2, run) == [0, 10, 20, 30] and seen == [2, 2]  # a smaller size is taken
    with pytest.raises(EngineOutOfMemory, match="even at batch size 1"):
        Backoff("the host").run([1, 2], 2, lambda b: (_ for _ in ()).throw(MemoryError()))
    with pytest.raises(ValueError):  # anything else is not retried
        Backoff("cpu").run([1], 4, lambda b: (_ for _ in ()).throw(ValueError("bad input")))
    assert is_out_of_memory(RuntimeError("CUDA failed with error out of memory"))  # CTranslate2's wording
    assert not is_out_of_memory(RuntimeError("CUDA failed with error invalid device ordinal"))
    gave_up = EngineOutOfMemory("out of memory on cuda:0 even at batch size 1")
    outer: list[int] = []

    def inner_gave_up(batch: Any) -> list[int]:
        outer.append(len(batch))
        raise gave_up

    with pytest.raises(EngineOutOfMemory):  # an outer back-off does not retry an inner one that gave up
        Backoff("cuda:0").run([1, 2, 3, 4], 4, inner_gave_up)
    assert outer == [4]


# -- transformers: Qwen3-ASR -------------------------------------------------------------------------------------


def test_qwen3_asr_engine_batches_by_length_and_keeps_order(settings: Settings, tiny_qwen: Path) -> None:
    items = noise_items([2.2, 7.5, 0.4, 4.1, 3.3])
    base = transformers_settings(settings, tiny_qwen, "qwen3_asr", language="en")
    results = {size: get_engine(base.override(batch_size=size).asr).transcribe_batch(items)
               for size in (1, 2, 8)}
    engine = get_engine(base.override(batch_size=2).asr)
    assert engine.model_name == f"{tiny_qwen.name}-transformers-float32"
    assert engine.model.dtype.is_floating_point and engine.model.config._attn_implementation == "sdpa"
    texts = {size: [[s.text for s in segs] for segs in out] for size, out in results.items()}
    assert texts[1] == texts[2] == texts[8]  # greedy output does not depend on the batch
    assert all(texts[1]) and len({t[0] for t in texts[1]}) == len(items)  # audio-dependent text per chunk
    for (chunk, _), segments in zip(items, results[2]):
        assert [(s.recording_id, s.channel, s.speaker, s.start, s.end, s.language) for s in segments] == [
            (chunk.recording_id, chunk.channel, chunk.speaker, chunk.start, chunk.end, "en")]
        assert segments[0].avg_logprob < 0
    one = engine.transcribe(*items[3])  # a chunk alone gives what it gave inside a bucket
    assert [s.text for s in one] == texts[1][3]


def test_qwen3_asr_words_get_their_times_from_the_forced_aligner(settings: Settings, tiny_qwen: Path,
                                                                 tiny_aligner: Path) -> None:
    from asr_tasks.transcription.qwen3_asr import Qwen3ForcedAligner

    items = noise_items([2.2, 7.5, 0.4, 4.1, 3.3])
    base = transformers_settings(settings, tiny_qwen, "qwen3_asr", language="en", aligner_dir=str(tiny_aligner))
    results = {size: get_engine(base.override(batch_size=size).asr).transcribe_batch(items) for size in (1, 4)}
    engine = get_engine(base.override(batch_size=4).asr)
    assert isinstance(engine.aligner, Qwen3ForcedAligner)
    assert results[1] == results[4]  # a chunk's words and times do not depend on what it was batched with
    for (chunk, audio), segments in zip(items, results[4]):
        (segment,) = segments
        expected = engine.aligner.processor.split_words_for_alignment(segment.text, "en")
        assert [w.text for w in segment.words] == [f" {w}" for w in expected]  # every word of the text, in order
        assert all(chunk.start <= w.start <= w.end <= chunk.end for w in segment.words)
        alone = engine.aligner.align([audio], [segment.text], ["en"])[0]
        assert [round(chunk.start + min(max(0.0, a), chunk.duration), 3) for _, a, _ in alone] == [
            w.start for w in segment.words]
    assert sum(len(s.words) for segs in results[4] for s in segs) >= len(items) - 1
    without = get_engine(base.override(aligner_dir="", batch_size=4).asr).transcribe_batch(items)
    assert [[s.text for s in segs] for segs in without] == [[s.text for s in segs] for segs in results[4]]
    assert all(not s.words for segs in without for s in segs)  # no aligner: no word times, the segment's span
    arabic = get_engine(base.override(language="ar", batch_size=4).asr).transcribe_batch(items[:1])
    assert arabic[0][0].text and arabic[0][0].words == []  # a language the aligner does not know


def test_aligned_words_are_spelled_and_clipped_onto_the_chunk() -> None:
    from asr_tasks.transcription.qwen3_asr import spoken_words

    chunk = AudioChunk("r1", 0, "agent", "k", 10.0, 12.0)
    assert [(w.text, w.start, w.end) for w in spoken_words(chunk, [("您", 0.1, 0.2), ("card", 1.5, 9.0)])] == [
        ("您", 10.1, 10.2), (" card", 11.5, 12.0)]


def test_an_asr_model_given_as_the_aligner_is_refused(settings: Settings, tiny_qwen: Path) -> None:
    with pytest.raises(ModelError, match=rf"aligner folder {tiny_qwen}.*not a forced aligner"):
        get_engine(transformers_settings(settings, tiny_qwen, "qwen3_asr", aligner_dir=str(tiny_qwen)).asr)


def test_qwen3_asr_budget_follows_chunk_length(settings: Settings, tiny_qwen: Path) -> None:
    engine = get_engine(transformers_settings(settings, tiny_qwen, "qwen3_asr", language="en", batch_size=2).asr)
    short, long = engine.transcribe_batch(noise_items([0.5, 6.0]))
    assert len(short[0].text) < len(long[0].text)  # a random model never stops: the budget does
    assert engine.max_new_tokens(0.5) == 13 and engine.max_new_tokens(6.0) == 68


def test_qwen3_asr_oom_on_generate_halves_the_bucket(settings: Settings, tiny_qwen: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    engine = get_engine(transformers_settings(settings, tiny_qwen, "qwen3_asr", language="en", batch_size=4).asr)
    items = noise_items([1.0, 2.0, 3.0, 1.5, 2.5], seed=3)
    expected = engine.transcribe_batch(items)
    generate, sizes = engine.model.generate, []

    def on_a_small_gpu(**inputs: Any) -> Any:
        sizes.append(inputs["input_ids"].shape[0])
        if sizes[-1] > 1:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 1.00 GiB")
        return generate(**inputs)

    monkeypatch.setattr(engine.model, "generate", on_a_small_gpu)
    assert engine.transcribe_batch(items) == expected
    assert sizes == [4, 2, 1, 1, 1, 1, 1]
    sizes.clear()
    assert engine.transcribe_batch(items) == expected and sizes == [1] * 5  # the size that fitted is kept
    monkeypatch.setattr(engine.model, "generate", lambda **_: (_ for _ in ()).throw(MemoryError()))
    with pytest.raises(EngineOutOfMemory, match="cpu .*batch size 1"):
        engine.transcribe_batch(items[:2])


def test_qwen3_aligner_oom_retries_the_alignment_not_the_recognition(
        settings: Settings, tiny_qwen: Path, tiny_aligner: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from asr_tasks.transcription.qwen3_asr import Qwen3ForcedAligner

    engine = get_engine(transformers_settings(settings, tiny_qwen, "qwen3_asr", language="en", batch_size=4,
                                              aligner_dir=str(tiny_aligner)).asr)
    assert isinstance(engine.aligner, Qwen3ForcedAligner)
    items = noise_items([1.0, 2.0, 3.0, 1.5], seed=3)
    expected = engine.transcribe_batch(items)
    generate, align, generated, aligned = engine.model.generate, engine.aligner.model.forward, [], []

    def counted(**inputs: Any) -> Any:
        generated.append(inputs["input_ids"].shape[0])
        return generate(**inputs)

    def small_aligner(*args: Any, **inputs: Any) -> Any:
        aligned.append(inputs["input_ids"].shape[0])
        if aligned[-1] > 2:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 1.00 GiB")
        return align(*args, **inputs)

    monkeypatch.setattr(engine.model, "generate", counted)
    monkeypatch.setattr(engine.aligner.model, "forward", small_aligner)
    assert engine.transcribe_batch(items) == expected
    assert generated == [4] and aligned[0] == 4 and max(aligned[1:]) <= 2  # the recogniser ran once


# -- transformers: Whisper ---------------------------------------------------------------------------------------


def test_whisper_transformers_engine_packs_and_keeps_chunks_apart(settings: Settings, tiny_whisper: Path) -> None:
    items = noise_items([6.0, 2.5, 9.0, 3.0, 4.5, 12.0], recordings=3)
    base = transformers_settings(settings, tiny_whisper, "whisper", language="en", max_tokens_per_second=3.0)
    by_size = {size: get_engine(base.override(batch_size=size).asr).transcribe_batch(items) for size in (1, 3)}
    assert by_size[1] == by_size[3]
    assert sum(1 for segs in by_size[1] if segs) >= 4  # the random model writes something for most chunks
    for (chunk, _), segments in zip(items, by_size[1]):
        for seg in segments:
            assert (seg.recording_id, seg.channel, seg.speaker, seg.language) == (
                chunk.recording_id, chunk.channel, chunk.speaker, "en")
            assert chunk.start <= seg.start <= seg.end <= chunk.end
        assert [s.start for s in segments] == sorted(s.start for s in segments)


def test_whisper_transformers_detects_language_per_recording(settings: Settings, tiny_whisper: Path) -> None:
    engine = get_engine(transformers_settings(settings, tiny_whisper, "whisper", language=None).asr)
    items = noise_items([3.0, 2.0, 4.0, 1.0], recordings=2)
    results = engine.transcribe_batch(items)
    detected = {seg.recording_id: seg.language for segs in results for seg in segs}
    assert detected and set(detected.values()) <= {"en", "zh", "de", "fr", "es"}
    per_recording = {}
    for (chunk, _), segs in zip(items, results):
        for seg in segs:
            assert per_recording.setdefault(chunk.recording_id, seg.language) == seg.language


# -- model folder checks -----------------------------------------------------------------------------------------


def test_transformers_model_folder_errors_name_folder_and_file(settings: Settings, tiny_qwen: Path,
                                                               tiny_whisper: Path, tmp_path: Path) -> None:
    def load(folder: Path, family: str = "qwen3_asr") -> None:
        get_engine(transformers_settings(settings, folder, family, language="en").asr)

    with pytest.raises(ModelError, match="does not exist"):
        load(tmp_path / "nowhere")
    no_tokenizer = tmp_path / "no-tokenizer"
    shutil.copytree(tiny_qwen, no_tokenizer, ignore=shutil.ignore_patterns("tokenizer.json"))
    with pytest.raises(ModelError, match=f"{no_tokenizer} lacks tokenizer.json"):
        load(no_tokenizer)
    with pytest.raises(ModelError, match="describes a 'qwen3_asr' model, but model_family is 'whisper'"):
        load(tiny_qwen, "whisper")
    resized = tmp_path / "resized"
    shutil.copytree(tiny_qwen, resized)
    config = json.loads((resized / "config.json").read_text())
    config["text_config"]["hidden_size"] = 48
    (resized / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelError, match=f"{resized}: .*model.safetensors"):
        load(resized)
    other_tokenizer = tmp_path / "other-tokenizer"
    shutil.copytree(tiny_whisper, other_tokenizer)
    generation = json.loads((other_tokenizer / "generation_config.json").read_text())
    generation["decoder_start_token_id"] = 50257
    (other_tokenizer / "generation_config.json").write_text(json.dumps(generation))
    with pytest.raises(ModelError, match=f"{other_tokenizer}: tokenizer.json does not match the model"):
        load(other_tokenizer, "whisper")


def test_transformers_on_gpu_wants_a_gpu_type(settings: Settings, tiny_qwen: Path) -> None:
    cuda = transformers_settings(settings, tiny_qwen, "qwen3_asr", device="cuda", compute_type="int8")
    with pytest.raises(ValueError, match="compute_type 'int8' is not supported by the transformers engine"):
        get_engine(cuda.asr)


# -- CTranslate2 on real speech ----------------------------------------------------------------------------------

CALLS = {
    "weather": "The weather in Paris is sunny and warm today.",
    "invoice": "Please send the invoice to the accounting department.",
    "violin": "My daughter plays the violin every Sunday morning.",
    "parcel": "The parcel was delivered to the wrong address yesterday.",
}


def speak(text: str, folder: Path) -> np.ndarray:
    """espeak-ng speech as 16 kHz float32 samples."""
    raw, out = folder / "tts.wav", folder / "tts16k.wav"
    subprocess.run(["espeak-ng", "-v", "en-us", "-s", "150", "-w", str(raw), text], check=True, capture_output=True)
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-i", str(raw), "-ar", str(SR), "-ac", "1", str(out)],
                   check=True)
    with wave.open(str(out)) as wav:
        return np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2").astype(np.float32) / 32768.0


@pytest.fixture(scope="module")
def spoken_calls(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[AudioChunk, np.ndarray]]:
    folder = tmp_path_factory.mktemp("calls")
    items = []
    for n, (name, text) in enumerate(CALLS.items()):
        audio = speak(text, folder)
        items.append((AudioChunk(name, n % 2, ("agent", "customer")[n % 2], f"{name}.pcm", 10.0,
                                 round(10.0 + len(audio) / SR, 3)), audio))
    return items


def test_ctranslate2_packs_calls_into_one_window_without_leaking_text(
    settings: Settings, model_dir: Path, spoken_calls: list[tuple[AudioChunk, np.ndarray]]
) -> None:
    durations = [len(a) / SR for _, a in spoken_calls]
    assert len(pack(durations, ["en"] * len(durations), gap=settings.asr.pack_gap_seconds)) == 1  # all share a window
    engine = get_engine(settings.asr)  # language: null, detected per recording before packing
    results = engine.transcribe_batch(spoken_calls)
    distinct = {name: words(text) - set().union(*(words(t) for n, t in CALLS.items() if n != name))
                for name, text in CALLS.items()}
    for (chunk, _), segments in zip(spoken_calls, results):
        said = words(" ".join(s.text for s in segments))
        assert len(said & distinct[chunk.recording_id]) >= len(distinct[chunk.recording_id]) - 1, (chunk, said)
        for other, own in distinct.items():
            if other != chunk.recording_id:
                assert not said & own, f"{other}'s words in {chunk.recording_id}: {said}"
        for seg in segments:
            assert (seg.recording_id, seg.speaker, seg.language) == (chunk.recording_id, chunk.speaker, "en")
            assert chunk.start <= seg.start < seg.end <= chunk.end
            assert -3.0 < seg.avg_logprob <= 0.0
            assert "".join(w.text for w in seg.words).strip() == seg.text  # the words said it, with their times
            assert [seg.start, seg.end] == [seg.words[0].start, seg.words[-1].end]
            assert all(a.start <= a.end <= b.start + 0.02 for a, b in zip(seg.words, seg.words[1:]))
    assert "paris" in words(" ".join(s.text for s in results[0]))


def test_shard_batches_its_recordings_and_keeps_per_recording_checkpoints(
    settings: Settings, model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from datetime import date

    from asr_tasks.intake.artefacts import Artefacts
    from asr_tasks.intake.stores import LocalStore
    from asr_tasks.pipeline.preprocess import preprocess
    from asr_tasks.pipeline.results import preprocessed
    from asr_tasks.pipeline.sense import sense
    from asr_tasks.pipeline.transcribe import load_engine, transcribe_shard

    store = LocalStore(settings.storage.path("store_root"))
    names = ["weather", "invoice", "violin"]
    for name in names:
        audio = speak(CALLS[name], tmp_path)
        path = tmp_path / f"{name}.wav"
        with wave.open(str(path), "wb") as wav:
            wav.setnchannels(1)
            wav.setsampwidth(2)
            wav.setframerate(SR)
            wav.writeframes((np.pad(audio, (SR // 2, SR // 2)) * 32767).astype("<i2").tobytes())
        store.put_file(settings.storage.recordings_bucket, f"calls/2026/11/27/{name}.wav", path)
    results = [preprocess(r, store, settings) for r in sense(store, settings, date(2026, 11, 27))]
    shard = preprocessed(results)
    by_name = {r.key.rsplit("/", 1)[-1][:-4]: r.version for r in results}
    artefacts = Artefacts.of(store, settings)
    assert transcribe_shard([by_name["weather"]], store, settings)["recordings"] == 1
    first = settings.storage.path("store_root") / settings.storage.artefacts_bucket / by_name["weather"].transcript(artefacts.model)
    stamp = first.stat().st_mtime_ns

    engine = load_engine(settings)
    calls: list[int] = []
    batch = engine.transcribe_batch
    monkeypatch.setattr(engine, "transcribe_batch", lambda items: calls.append(len(items)) or batch(items))
    assert transcribe_shard(shard, store, settings)["recordings"] == 2  # the weather call is checkpointed
    assert first.stat().st_mtime_ns == stamp and calls == [2]  # one engine call for both remaining recordings
    for name in names:
        transcript = artefacts.transcript(by_name[name])
        said = words(" ".join(s.text for s in transcript.segments))
        assert {"weather": "paris", "invoice": "invoice", "violin": "violin"}[name] in said
        assert not said & ({"paris", "invoice", "violin"} - {"paris" if name == "weather" else name})


# -- devices -----------------------------------------------------------------------------------------------------

HOLD = """
import dataclasses, sys, time
from asr_tasks.config import AsrSettings, Settings
from asr_tasks.transcription.devices import acquire_device
lease = acquire_device(Settings().override(device="cuda", gpu_count=2, device_lock_dir=sys.argv[1]).asr)
print(lease.torch_device, flush=True)
time.sleep(60)
"""


@pytest.fixture
def gpu0_taken(tmp_path: Path) -> Iterator[Path]:
    """Another worker process holding the first GPU."""
    locks = tmp_path / "locks"
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(locks)], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)})
    assert proc.stdout is not None and proc.stdout.readline().strip() == "cuda:0"
    yield locks
    proc.kill()
    proc.wait()


def test_each_task_gets_a_gpu_of_its_own(settings: Settings, gpu0_taken: Path) -> None:
    cuda = settings.override(device="cuda", gpu_count=2, device_lock_dir=str(gpu0_taken), device_wait_seconds=0.5)
    second = acquire_device(cuda.asr)
    assert second.torch_device == "cuda:1"
    with pytest.raises(DeviceBusy, match=f"all 2 GPU slots under {gpu0_taken} stayed taken"):
        acquire_device(cuda.asr)
    second.release()
    assert acquire_device(cuda.asr).torch_device == "cuda:1"
    two_streams = cuda.override(streams_per_gpu=2)
    leases = [acquire_device(two_streams.asr) for _ in range(3)]
    assert [lease.torch_device for lease in leases] == ["cuda:1", "cuda:0", "cuda:1"]
    assert device_slots(two_streams.asr) == 4 and device_slots(settings.asr) == 1


def test_ctranslate2_engine_takes_the_free_gpu_and_backs_off_on_cuda_oom(
    settings: Settings, model_dir: Path, gpu0_taken: Path, monkeypatch: pytest.MonkeyPatch,
    spoken_calls: list[tuple[AudioChunk, np.ndarray]],
) -> None:
    """The GPU calls are where the errors are injected: CTranslate2 sees two GPUs, the model lands on the CPU."""
    import ctranslate2

    created: list[dict[str, Any]] = []
    real_whisper = ctranslate2.models.Whisper

    def on_gpu(path: str, **kwargs: Any) -> Any:
        created.append(kwargs)
        return real_whisper(path, **{**kwargs, "device": "cpu", "device_index": 0, "compute_type": "int8"})

    monkeypatch.setattr(ctranslate2, "get_cuda_device_count", lambda: 2)
    monkeypatch.setattr(ctranslate2.models, "Whisper", on_gpu)
    cuda = settings.override(device="cuda", compute_type="float16", gpu_count=2, language="en", device_lock_dir=str(gpu0_taken), batch_size=4, pack_windows=False)
    engine = get_engine(cuda.asr)
    assert engine.device == "cuda:1" and (created[0]["device"], created[0]["device_index"]) == ("cuda", 1)
    assert engine.model_name == "whisper-base-ctranslate2-float16"

    class SmallGpu:
        """The CTranslate2 model, out of memory for batches of more than one window."""

        def __init__(self, model: Any) -> None:
            self.model, self.sizes = model, []

        def generate(self, features: Any, prompts: list[list[int]], **kwargs: Any) -> Any:
            self.sizes.append(len(prompts))
            if len(prompts) > 1:
                raise RuntimeError("CUDA failed with error out of memory")
            return self.model.generate(features, prompts, **kwargs)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.model, name)

    small = SmallGpu(engine.model.model)
    monkeypatch.setattr(engine.model, "model", small)
    results = engine.transcribe_batch(spoken_calls[:2])
    assert small.sizes == [2, 1, 1]  # the batch of two windows halved, then each window alone
    assert "invoice" in words(" ".join(s.text for s in results[1]))
    small.sizes.clear()
    monkeypatch.setattr(small, "generate", lambda *a, **k: (_ for _ in ()).throw(
        RuntimeError("CUDA failed with error out of memory")))
    with pytest.raises(EngineOutOfMemory, match="cuda:1 .*even at batch size 1"):
        engine.transcribe_batch(spoken_calls[:1])


def test_asr_pools_sizes_the_airflow_gpu_pool_from_the_settings(tmp_path: Path) -> None:
    bin_dir = Path(sys.executable).parent
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "ASR_"))}
    env.update({"AIRFLOW_HOME": str(tmp_path), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{tmp_path / 'airflow.db'}",
                "ASR_DEVICE": "cuda", "ASR_GPU_COUNT": "2", "ASR_STREAMS_PER_GPU": "3"})

    def run(*args: str) -> str:
        proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    assert json.loads(run(str(bin_dir / "asr"), "pools"))["gpu"]["slots"] == 6
    run(str(bin_dir / "airflow"), "db", "migrate")
    assert run(str(bin_dir / "asr"), "pools", "--apply").strip() == "pool gpu: 6 slots"
    pool = json.loads(run(str(bin_dir / "airflow"), "pools", "get", "gpu", "-o", "json"))[0]
    assert (pool["pool"], int(pool["slots"])) == ("gpu", 6)
