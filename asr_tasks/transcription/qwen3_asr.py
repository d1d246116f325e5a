"""Qwen3-ASR through transformers: chunks sorted by length and batched in buckets of similar length.

Qwen3-ASR (``Qwen3ASRForConditionalGeneration``) has no fixed window: each
chunk's text keeps its chunk's times, and its words get theirs from
Qwen3-ForcedAligner (``Qwen3ASRForTokenClassification``, ``aligner_dir``) where
one is configured. The loading and checks are the Whisper engine's
(``transcription.transformers``).
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import transformers
from transformers.models.qwen3_asr.processing_qwen3_asr import (
    FORCED_ALIGNER_LANGUAGES,
    LANGUAGE_CODE_TO_NAME,
)

from asr_tasks.chars import CJK_CHAR
from asr_tasks.config import AsrSettings
from asr_tasks.models import SAMPLE_RATE, AudioChunk, Segment, SpokenWord
from asr_tasks.transcription.engine import AsrEngine, ModelError
from asr_tasks.transcription.packing import (
    token_budget,
)
from asr_tasks.transcription.transformers import (
    HOP,
    ChosenLogprobs,
    Loaded,
    TransformersModel,
    check_model_dir,
    pretrained,
)

log = logging.getLogger(__name__)

WORD_SPLITTERS = {"Japanese": "nagisa", "Korean": "soynlp"}  # what the aligner needs to split these into words


class TransformersQwen3Asr(TransformersModel, AsrEngine):
    """Qwen3-ASR over length-sorted buckets; the language is forced (``language``) or read from the output."""

    def __init__(self, settings: AsrSettings, hotwords: str | None = None) -> None:
        loaded = Loaded(settings, "Qwen3ASRForConditionalGeneration")
        self._adopt(loaded, settings)
        config = self.model.config
        if self.processor.audio_token_id != config.audio_token_id:
            raise loaded.mismatch("tokenizer.json", f"the audio token is {self.processor.audio_token_id}, "
                                  f"config.json says {config.audio_token_id}")
        if len(self.tokenizer) > config.text_config.vocab_size:
            raise loaded.mismatch("tokenizer.json", f"{len(self.tokenizer)} tokens, the model has "
                                  f"{config.text_config.vocab_size}")
        if self.processor.feature_extractor.feature_size != config.audio_config.num_mel_bins:
            raise loaded.mismatch("preprocessor_config.json", f"{self.processor.feature_extractor.feature_size} mel "
                                  f"bins, the model takes {config.audio_config.num_mel_bins}")
        if settings.language and settings.language not in LANGUAGE_CODE_TO_NAME:
            loaded.lease.release()
            raise ValueError(f"language {settings.language!r} is not one Qwen3-ASR knows "
                             f"({', '.join(sorted(LANGUAGE_CODE_TO_NAME))})")
        self.codes = {name.lower(): code for code, name in LANGUAGE_CODE_TO_NAME.items()}
        eos = config.eos_token_id
        self.stop_ids = {int(t) for t in (eos if isinstance(eos, (list, tuple)) else [eos])}
        self.context = hotwords  # Qwen3-ASR reads context and hotwords from the system prompt
        self.budget_cut = 0  # chunks whose text the token budget cut off (each one logged)
        self.aligner: Qwen3ForcedAligner | None = None
        if settings.aligner_dir:
            try:
                self.aligner = Qwen3ForcedAligner(settings.path("aligner_dir"), self.dtype, self.device,
                                                  settings.attn_implementation)
            except BaseException:
                self.lease.release()
                raise
        self._warm_up()

    def _warm_up(self) -> None:
        noise = np.random.default_rng(0).normal(0, 0.01, SAMPLE_RATE).astype(np.float32)
        self.transcribe_batch([(AudioChunk("warm-up", 0, "warm-up", "", 0.0, 1.0), noise)])

    def max_new_tokens(self, seconds: float) -> int:
        """A token budget from the chunk's length and the configured language (the largest rate when detected)."""
        return token_budget(self.settings, seconds, self.settings.language)

    def transcribe_batch(self, items: Sequence[tuple[AudioChunk, np.ndarray]]) -> list[list[Segment]]:
        if not items:
            return []
        audios = [_whole_frames(np.asarray(audio, dtype=np.float32)) for _, audio in items]
        order = sorted(range(len(items)), key=lambda i: (-len(audios[i]), i))
        asr = self.backoff("asr", f"{self.device} (bucket of chunks)")
        results = asr.run(order, self.batch_size, lambda batch: self._generate([audios[i] for i in batch]))
        # the aligner is a stage of its own: its out-of-memory halves its batches, not the recogniser's
        aligned = [(n, text, language) for n, (text, language, *_) in zip(order, results)]
        aligner = self.aligner
        timings: list[list[tuple[str, float, float]]] = [[] for _ in aligned] if aligner is None else self.backoff(
            "align", f"{self.device} (forced alignment)").run(aligned, self.batch_size, lambda batch: aligner.align(
                [audios[n] for n, _, _ in batch], [text for _, text, _ in batch], [lang for *_, lang in batch]))
        out: list[list[Segment]] = [[] for _ in items]
        for n, (text, language, logprob, cut), timed in zip(order, results, timings):
            chunk = items[n][0]
            if cut:
                self.budget_cut += 1
                log.warning("recording %s, channel %d, %.3f-%.3f s: the text ran out of its token budget "
                            "(max_tokens_per_second) and ends cut off", chunk.recording_id, chunk.channel,
                            chunk.start, chunk.end)
            if text:
                out[n] = [Segment(recording_id=chunk.recording_id, channel=chunk.channel, speaker=chunk.speaker,
                                  start=round(chunk.start, 3), end=round(chunk.end, 3), text=text,
                                  avg_logprob=round(logprob, 4), language=language,
                                  words=spoken_words(chunk, timed))]
        return out

    def _inputs(self, audios: list[np.ndarray]) -> Any:
        """Prompts and features of one bucket, the features as wide as its longest chunk (``bucket_padding``)."""
        padding, frames = bucket_padding(self.processor.feature_extractor, audios)
        inputs = self.processor.apply_transcription_request(
            audio=audios, language=self.settings.language,
            prompt=[self.context] * len(audios) if self.context else None, processor_kwargs=padding,
        )
        return cut_features(inputs, frames).to(self.device, dtype=self.dtype)

    def _generate(self, audios: list[np.ndarray]) -> list[tuple[str, str | None, float, bool]]:
        """Each chunk's text, language, mean log probability, and whether its token budget cut the text off."""
        inputs = self._inputs(audios)
        budgets = [self.max_new_tokens(len(a) / SAMPLE_RATE) for a in audios]
        chosen = ChosenLogprobs()
        with torch.inference_mode():
            sequences = self.model.generate(**inputs, do_sample=False, num_beams=1, max_new_tokens=max(budgets),
                                            logits_processor=transformers.LogitsProcessorList([chosen]),
                                            **self.cache_options()).cpu()
        prompt = inputs["input_ids"].shape[1]
        logprobs = chosen.per_row()
        results = []
        for row, row_logprobs, budget in zip(sequences[:, prompt:].tolist(), logprobs, budgets):
            # each chunk keeps its own budget: greedy tokens do not depend on the longer budget of the bucket
            row = row[:budget]
            length = next((k for k, t in enumerate(row) if t in self.stop_ids), len(row))
            # as upstream decodes: special tokens go; "<asr_text>", which the language parsing needs, is no special one
            parsed = self.processor.parse_output(self.tokenizer.decode(row[:length], skip_special_tokens=True))
            named = parsed["language"]
            language = self.codes.get(named.lower(), named.lower()) if named else self.settings.language
            scored = row_logprobs[: min(length + 1, len(row))]
            logprob = float(scored.mean()) if len(scored) else 0.0
            results.append((parsed["transcription"].strip(), language, logprob, length == len(row)))
        return results


def bucket_padding(extractor: Any, audios: list[np.ndarray]) -> tuple[dict[str, Any], int]:
    """The processor's audio padding for one bucket, and the mel frames of it that the audio encoder gets.

    The feature extractor's default pads every chunk to 30 s (3,000 frames), all of
    them run through the encoder's convolutions. Here the bucket is padded to its
    longest chunk in whole encoder windows (``2 * n_window`` frames) and one FFT
    window more, so every chunk, the longest too, is followed by zeros as it is
    alone: its frames do not depend on what it was batched with. The processor
    extracts them once; ``cut_features`` drops the frames past the windows.
    """
    window = 2 * extractor.n_window
    longest = max(max(len(a) for a in audios), extractor.min_length) // extractor.hop_length
    frames = -(-longest // window) * window
    samples = frames * extractor.hop_length + extractor.n_fft
    return {"audio_kwargs": {"padding": "max_length", "max_length": samples}}, frames


def cut_features(inputs: Any, frames: int) -> Any:
    """``inputs`` with features and mask cut to ``frames`` (past every chunk's end: only padding goes)."""
    for name in ("input_features", "input_features_mask"):
        inputs[name] = inputs[name][..., :frames]
    return inputs


class TimeSlots:
    """The aligner's chosen time slots where ``decode_forced_alignment`` takes logits: it only reads their argmax."""

    def __init__(self, slots: torch.Tensor) -> None:
        self.slots = slots

    def argmax(self, dim: int) -> torch.Tensor:
        if dim != -1:
            raise ValueError(f"time slots are chosen over the last axis, not {dim}")
        return self.slots


class Qwen3ForcedAligner:
    """Word times for Qwen3-ASR's text: Qwen3-ForcedAligner reads a chunk's audio and words in one forward pass.

    Its head classifies the two ``<timestamp>`` tokens after each word into time
    slots of ``timestamp_segment_time`` ms (the word's start and end). A language
    it does not know (or Japanese and Korean without their word splitters) gets no
    word times, and the segment's own span stands for its words.
    """

    def __init__(self, folder: Path, dtype: torch.dtype, device: str, attn_implementation: str) -> None:
        config = check_model_dir(folder, "qwen3_asr")
        if "Qwen3ASRForTokenClassification" not in (config.get("architectures") or []):
            raise ModelError(f"aligner folder {folder}: config.json describes {config.get('architectures')}, "
                             "not a forced aligner (Qwen3ASRForTokenClassification)")
        self.processor, model = pretrained(folder, "Qwen3ASRForTokenClassification", dtype, attn_implementation)
        self.model = model.to(device).eval()
        self.device, self.dtype = device, dtype
        self.timestamp = int(self.model.config.timestamp_token_id)
        if self.processor.tokenizer.convert_tokens_to_ids("<timestamp>") != self.timestamp:
            raise ModelError(f"aligner folder {folder}: tokenizer.json does not match the model: <timestamp> is "
                             f"{self.processor.tokenizer.convert_tokens_to_ids('<timestamp>')}, config.json says "
                             f"{self.timestamp}")
        self.languages = {code for code, name in LANGUAGE_CODE_TO_NAME.items() if name in FORCED_ALIGNER_LANGUAGES
                          and (name not in WORD_SPLITTERS or importlib.util.find_spec(WORD_SPLITTERS[name]))}

    def align(self, audios: list[np.ndarray], texts: list[str],
              languages: list[str | None]) -> list[list[tuple[str, float, float]]]:
        """Each text's words with (start, end) seconds from its audio's start; none where it cannot be aligned."""
        out: list[list[tuple[str, float, float]]] = [[] for _ in texts]
        todo = [n for n, (text, language) in enumerate(zip(texts, languages))
                if (language is None or language in self.languages)
                and self.processor.split_words_for_alignment(text, language)]  # punctuation only: no words
        if not todo:
            return out
        chosen = [audios[n] for n in todo]
        padding, frames = bucket_padding(self.processor.feature_extractor, chosen)
        inputs, word_lists = self.processor.prepare_forced_aligner_inputs(
            audio=chosen, transcript=[texts[n] for n in todo], language=[languages[n] for n in todo],
            processor_kwargs=padding)
        inputs = cut_features(inputs, frames)
        input_ids = inputs["input_ids"]  # kept on the CPU, where the decoding reads it
        with torch.inference_mode():
            # the slot each token is given, chosen where the logits are: (rows, tokens), not (rows, tokens, slots)
            slots = self.model(**inputs.to(self.device, dtype=self.dtype)).logits.argmax(dim=-1).cpu()
        timed = self.processor.decode_forced_alignment(TimeSlots(slots), input_ids, word_lists,
                                                       timestamp_token_id=self.timestamp)
        for n, words in zip(todo, timed):
            out[n] = [(w["text"], float(w["start_time"]), float(w["end_time"])) for w in words]
        return out


def spoken_words(chunk: AudioChunk, timed: list[tuple[str, float, float]]) -> list[SpokenWord]:
    """The aligner's words on the recording's clock, inside the chunk; a space before each word but a Chinese one."""
    words = []
    for text, start, end in timed:
        start = min(max(0.0, start), chunk.duration)
        end = min(max(start, end), chunk.duration)
        spelled = text if CJK_CHAR.match(text[:1]) else f" {text}"
        words.append(SpokenWord(spelled, round(chunk.start + start, 3), round(chunk.start + end, 3)))
    return words


def _whole_frames(audio: np.ndarray) -> np.ndarray:
    """Zero-pad to a whole number of mel hops, so every chunk's frame count is the same alone or batched."""
    return np.pad(audio, (0, -len(audio) % HOP)) if len(audio) % HOP else audio
