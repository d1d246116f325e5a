"""Qwen3-ASR through transformers: chunks sorted by length and batched in buckets of similar length.

Qwen3-ASR (``Qwen3ASRForConditionalGeneration``) has no fixed window: each
chunk's text keeps its chunk's times, and its words get theirs from
Qwen3-ForcedAligner (``Qwen3ASRForTokenClassification``, ``aligner_dir``) where
one is configured. The loading and checks are the Whisper engine's
(``transcription.transformers``).
"""

from __future__ import annotations

import importlib.util
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
from asr_tasks.transcription.engine import AsrEngine, ModelError, run_with_backoff
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
        self.aligner: Qwen3ForcedAligner | None = None
        if settings.aligner_dir:
            try:
                self.aligner = Qwen3ForcedAligner(settings.path("aligner_dir"), self.dtype, self.device)
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
        results = run_with_backoff(order, self.batch_size, lambda batch: self._generate([audios[i] for i in batch]),
                                   f"{self.device} (bucket of chunks)")
        out: list[list[Segment]] = [[] for _ in items]
        for n, (text, language, logprob, timed) in zip(order, results):
            chunk = items[n][0]
            if text:
                out[n] = [Segment(recording_id=chunk.recording_id, channel=chunk.channel, speaker=chunk.speaker,
                                  start=round(chunk.start, 3), end=round(chunk.end, 3), text=text,
                                  avg_logprob=round(logprob, 4), language=language,
                                  words=spoken_words(chunk, timed))]
        return out

    def _inputs(self, audios: list[np.ndarray]) -> Any:
        """Prompts and features of one bucket, each chunk's features its own (``chunk_features``)."""
        inputs = self.processor.apply_transcription_request(
            audio=audios, language=self.settings.language,
            prompt=[self.context] * len(audios) if self.context else None,
        )
        return chunk_features(self.processor.feature_extractor, audios, inputs).to(self.device, dtype=self.dtype)

    def _generate(self, audios: list[np.ndarray]) -> list[tuple[str, str | None, float, list[tuple[str, float, float]]]]:
        inputs = self._inputs(audios)
        budgets = [self.max_new_tokens(len(a) / SAMPLE_RATE) for a in audios]
        chosen = ChosenLogprobs()
        with torch.inference_mode():
            sequences = self.model.generate(**inputs, do_sample=False, num_beams=1, max_new_tokens=max(budgets),
                                            logits_processor=transformers.LogitsProcessorList([chosen])).cpu()
        prompt = inputs["input_ids"].shape[1]
        logprobs = chosen.per_row()
        results = []
        for row, row_logprobs, budget in zip(sequences[:, prompt:].tolist(), logprobs, budgets):
            # each chunk keeps its own budget: greedy tokens do not depend on the longer budget of the bucket
            row = row[:budget]
            length = next((k for k, t in enumerate(row) if t in self.stop_ids), len(row))
            raw = self.tokenizer.decode(row[:length], skip_special_tokens=False)
            parsed = self.processor.parse_output(raw)
            named = parsed["language"]
            language = self.codes.get(named.lower(), named.lower()) if named else self.settings.language
            scored = row_logprobs[: min(length + 1, len(row))]
            logprob = float(scored.mean()) if len(scored) else 0.0
            results.append((parsed["transcription"].strip(), language, logprob))
        if self.aligner is None:
            return [(*r, []) for r in results]
        timed = self.aligner.align(audios, [r[0] for r in results], [r[1] for r in results])
        return [(*r, words) for r, words in zip(results, timed)]


def chunk_features(extractor: Any, audios: list[np.ndarray], inputs: Any) -> Any:
    """``inputs`` with every chunk's features computed alone and zero-padded on the mel axis.

    The processor extracts features of the whole bucket at once, and a short
    chunk's last frames then depend on the longer chunks' samples padded after
    it; computed alone, as for a bucket of one, a chunk's output does not depend
    on what it was batched with.
    """
    singles = [extractor(a, sampling_rate=SAMPLE_RATE, return_attention_mask=True, return_tensors="pt")
               for a in audios]
    frames = max(s["input_features"].shape[-1] for s in singles)
    features = torch.zeros(len(audios), extractor.feature_size, frames)
    mask = torch.zeros(len(audios), frames, dtype=inputs["input_features_mask"].dtype)
    for n, single in enumerate(singles):
        width = single["input_features"].shape[-1]
        features[n, :, :width] = single["input_features"][0]
        mask[n, :width] = single["attention_mask"][0]
    if not torch.equal(mask.sum(-1), inputs["input_features_mask"].sum(-1)):
        raise RuntimeError("per-chunk feature lengths differ from the processor's; cannot batch these chunks")
    inputs["input_features"], inputs["input_features_mask"] = features, mask
    return inputs


class Qwen3ForcedAligner:
    """Word times for Qwen3-ASR's text: Qwen3-ForcedAligner reads a chunk's audio and words in one forward pass.

    Its head classifies the two ``<timestamp>`` tokens after each word into time
    slots of ``timestamp_segment_time`` ms (the word's start and end). A language
    it does not know (or Japanese and Korean without their word splitters) gets no
    word times, and the segment's own span stands for its words.
    """

    def __init__(self, folder: Path, dtype: torch.dtype, device: str) -> None:
        config = check_model_dir(folder, "qwen3_asr")
        if "Qwen3ASRForTokenClassification" not in (config.get("architectures") or []):
            raise ModelError(f"aligner folder {folder}: config.json describes {config.get('architectures')}, "
                             "not a forced aligner (Qwen3ASRForTokenClassification)")
        self.processor, model = pretrained(folder, "Qwen3ASRForTokenClassification", dtype)
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
        inputs, word_lists = self.processor.prepare_forced_aligner_inputs(
            audio=chosen, transcript=[texts[n] for n in todo], language=[languages[n] for n in todo])
        inputs = chunk_features(self.processor.feature_extractor, chosen, inputs)
        with torch.inference_mode():
            logits = self.model(**inputs.to(self.device, dtype=self.dtype)).logits.float().cpu()
        timed = self.processor.decode_forced_alignment(logits, inputs["input_ids"].cpu(), word_lists,
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
