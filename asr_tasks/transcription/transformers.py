"""Whisper through transformers, and the loading both transformers engines share: fp32 on CPU, bf16/fp16 on
GPU, sdpa attention, greedy batched generate.

Whisper (``WhisperForConditionalGeneration``) reads 30 s windows, so it shares
the packing of the CTranslate2 engine: word times come from the model's
cross-attention alignment (``return_token_timestamps``). Qwen3-ASR
(``Qwen3ASRForConditionalGeneration``) has no fixed window: chunks are sorted by
length and batched in buckets of similar length, each chunk's text keeps its
chunk's times, and its words get theirs from Qwen3-ForcedAligner
(``Qwen3ASRForTokenClassification``, ``aligner_dir``) where one is configured.
All load only from their configured local folders (``local_files_only``),
checked file by file before loading and for consistency after, and run one
warm-up pass at load time.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import transformers

from asr_tasks.config import AsrSettings
from asr_tasks.models import SAMPLE_RATE, AudioChunk
from asr_tasks.transcription.alignment import dynamic_time_warping, median_filter
from asr_tasks.transcription.devices import DeviceLease, acquire_device
from asr_tasks.transcription.engine import ModelError
from asr_tasks.transcription.packing import (
    Decoded,
    PackingStats,
    Window,
    WindowedWhisper,
    Word,
    looks_degenerate,
    window_audio,
)
from asr_tasks.version import compute_type, model_tag

MODEL_TYPES = {"whisper": "whisper", "qwen3_asr": "qwen3_asr"}
HOP = 160  # samples per mel frame at 16 kHz


def check_model_dir(model_dir: Path, family: str) -> dict[str, Any]:
    """The folder's config, after checking that every file a load needs is there; errors name folder and file."""
    if not model_dir.is_dir():
        raise ModelError(f"model folder {model_dir} does not exist")
    if not (model_dir / "config.json").is_file():
        raise ModelError(f"model folder {model_dir} lacks config.json")
    config = read_json(model_dir / "config.json")
    if config.get("model_type") != MODEL_TYPES[family]:
        raise ModelError(f"model folder {model_dir}: config.json describes a {config.get('model_type')!r} model, "
                         f"but model_family is {family!r}")
    missing = []
    if not any((model_dir / name).is_file() for name in ("model.safetensors", "model.safetensors.index.json",
                                                         "pytorch_model.bin")):
        missing.append("model.safetensors")
    index = model_dir / "model.safetensors.index.json"
    if index.is_file():
        shards = sorted(set(read_json(index).get("weight_map", {}).values()))
        missing += [shard for shard in shards if not (model_dir / shard).is_file()]
    if not (model_dir / "tokenizer.json").is_file() and not (
        (model_dir / "vocab.json").is_file() and (model_dir / "merges.txt").is_file()
    ):
        missing.append("tokenizer.json")
    if not (model_dir / "tokenizer_config.json").is_file():
        missing.append("tokenizer_config.json")
    if not (model_dir / "preprocessor_config.json").is_file() and "feature_extractor" not in read_json(
        model_dir / "processor_config.json"
    ):
        missing.append("preprocessor_config.json")
    if family == "whisper" and not (model_dir / "generation_config.json").is_file():
        missing.append("generation_config.json")
    if family == "qwen3_asr" and not _has_chat_template(model_dir):
        missing.append("chat_template.jinja")
    if missing:
        raise ModelError(f"model folder {model_dir} lacks {', '.join(missing)}")
    return config


def read_json(path: Path) -> dict[str, Any]:
    """A JSON file's top-level mapping; empty when the file is absent."""
    if not path.is_file():
        return {}
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ModelError(f"model folder {path.parent}: {path.name} is not valid JSON ({exc})") from exc
    return loaded if isinstance(loaded, dict) else {}


def _has_chat_template(model_dir: Path) -> bool:
    if (model_dir / "chat_template.jinja").is_file() or (model_dir / "chat_template.json").is_file():
        return True
    names = ("processor_config.json", "tokenizer_config.json")
    return any("chat_template" in read_json(model_dir / name) for name in names)


def pretrained(model_dir: Path, model_class: str, dtype: torch.dtype) -> tuple[Any, Any]:
    """Processor and model from a checked local folder; any file that does not fit is an error naming it."""
    try:
        processor = transformers.AutoProcessor.from_pretrained(model_dir, local_files_only=True)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ModelError(f"model folder {model_dir}: tokenizer or preprocessor files could not be "
                         f"loaded: {exc}") from exc
    try:
        model, info = getattr(transformers, model_class).from_pretrained(
            model_dir, local_files_only=True, dtype=dtype, attn_implementation="sdpa", output_loading_info=True,
        )
    except (OSError, ValueError, RuntimeError) as exc:
        raise ModelError(f"model folder {model_dir}: the weights could not be loaded "
                         f"(model.safetensors): {exc}") from exc
    problems = {k: sorted(v) for k, v in info.items() if k != "error_msgs" and v}
    if problems or info.get("error_msgs"):
        raise ModelError(f"model folder {model_dir}: model.safetensors does not match config.json: "
                         f"{problems or info['error_msgs']}")
    return processor, model


class Loaded:
    """Model, processor and device of a transformers engine, loaded and checked once."""

    def __init__(self, settings: AsrSettings, model_class: str) -> None:
        model_dir = settings.path("model_dir")
        self.config = check_model_dir(model_dir, settings.model_family)
        self.dtype = getattr(torch, compute_type(settings))
        if settings.device == "cpu" and settings.cpu_threads > 0:
            torch.set_num_threads(settings.cpu_threads)
        self.lease: DeviceLease = acquire_device(settings)
        try:
            if self.lease.kind == "cuda" and self.lease.index >= torch.cuda.device_count():
                raise RuntimeError(f"{self.lease.torch_device} is not visible to torch "
                                   f"({torch.cuda.device_count()} CUDA device(s)); check gpu_count")
            self.processor, model = pretrained(model_dir, model_class, self.dtype)
            self.model = model.to(self.lease.torch_device).eval()
        except BaseException:
            self.lease.release()
            raise
        self.model_dir = model_dir

    def mismatch(self, file: str, what: str) -> ModelError:
        self.lease.release()
        return ModelError(f"model folder {self.model_dir}: {file} does not match the model: {what}")


class ChosenLogprobs(transformers.LogitsProcessor):
    """Records, step by step, the log probability of the token greedy decoding picks.

    The last logits processor sees the scores the choice is made from; keeping one
    number per row and step costs nothing, where ``output_scores`` would keep a
    whole vocabulary (150k entries for Qwen3) per row and step.
    """

    def __init__(self) -> None:
        self.steps: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        self.steps.append(torch.log_softmax(scores.float(), dim=-1).max(dim=-1).values)
        return scores

    def per_row(self) -> torch.Tensor:
        """(rows, steps) log probabilities."""
        return torch.stack(self.steps, dim=1).cpu() if self.steps else torch.zeros(0, 0)


class TransformersModel:
    """What both transformers engines keep of the load: settings, model, processor and device."""

    settings: AsrSettings
    model_name: str
    batch_size: int
    lease: DeviceLease
    device: str
    dtype: torch.dtype
    model: Any
    processor: Any
    tokenizer: Any

    def _adopt(self, loaded: Loaded, settings: AsrSettings) -> None:
        self.settings = settings
        self.model_name = model_tag(settings)
        self.batch_size = settings.batch_size
        self.lease = loaded.lease
        self.device = loaded.lease.torch_device
        self.dtype = loaded.dtype
        self.model = loaded.model
        self.processor = loaded.processor
        self.tokenizer = loaded.processor.tokenizer


class TransformersWhisper(TransformersModel, WindowedWhisper):
    def __init__(self, settings: AsrSettings, hotwords: str | None = None) -> None:
        loaded = Loaded(settings, "WhisperForConditionalGeneration")
        self._adopt(loaded, settings)
        generation = self.model.generation_config
        if self.processor.feature_extractor.feature_size != self.model.config.num_mel_bins:
            raise loaded.mismatch("preprocessor_config.json", f"{self.processor.feature_extractor.feature_size} mel "
                                  f"bins, the model takes {self.model.config.num_mel_bins}")
        if len(self.tokenizer) > self.model.config.vocab_size:
            raise loaded.mismatch("tokenizer.json", f"{len(self.tokenizer)} tokens, the model has "
                                  f"{self.model.config.vocab_size}")
        start = self.tokenizer.convert_tokens_to_ids("<|startoftranscript|>")
        if start != generation.decoder_start_token_id:
            raise loaded.mismatch("tokenizer.json", f"<|startoftranscript|> is {start}, generation_config.json says "
                                  f"{generation.decoder_start_token_id}")
        if getattr(generation, "alignment_heads", None) is None:
            raise loaded.mismatch("generation_config.json", "no alignment_heads (needed for word times)")
        self.multilingual = bool(getattr(generation, "is_multilingual", False))
        self.eot = int(generation.eos_token_id if isinstance(generation.eos_token_id, int)
                       else generation.eos_token_id[0])
        words = hotwords
        self.prompt_ids = self.processor.get_prompt_ids(words, return_tensors="pt") if words else None
        # decoder positions left after <|startoftranscript|><|lang|><|transcribe|><|notimestamps|> and the hotwords
        self.max_budget = self.model.config.max_target_positions - 4 - (
            len(self.prompt_ids) if self.prompt_ids is not None else 0)
        self.packing_stats = PackingStats()
        self._warm_up()

    def _warm_up(self) -> None:
        noise = np.random.default_rng(0).normal(0, 0.01, SAMPLE_RATE).astype(np.float32)
        self.transcribe_batch([(AudioChunk("warm-up", 0, "warm-up", "", 0.0, 1.0), noise)])

    def _features(self, audios: list[np.ndarray]) -> Any:
        features = self.processor.feature_extractor(audios, sampling_rate=SAMPLE_RATE, return_tensors="pt",
                                                    return_attention_mask=True)
        return features.input_features.to(self.device, self.dtype), features.attention_mask.to(self.device)

    def _detect_batch(self, audios: list[np.ndarray]) -> list[str]:
        features, _ = self._features(audios)
        with torch.inference_mode():
            ids = self.model.detect_language(features)
        return [token[2:-2] for token in self.tokenizer.convert_ids_to_tokens(ids.view(-1).tolist())]

    def _decode_batch(self, windows: list[Window], audios: Sequence[np.ndarray], language: str) -> list[Decoded]:
        features, attention_mask = self._features([window_audio(w, audios, SAMPLE_RATE) for w in windows])
        budgets = [min(self.max_budget, self.max_new_tokens(w.speech_seconds, language)) for w in windows]
        chosen = ChosenLogprobs()
        with torch.inference_mode():
            encoded = self.model.get_encoder()(features)
            sequences = self.model.generate(
                features, encoder_outputs=encoded, attention_mask=attention_mask, language=language,
                task="transcribe", do_sample=False, num_beams=1, max_new_tokens=max(budgets),
                prompt_ids=self.prompt_ids, logits_processor=transformers.LogitsProcessorList([chosen]),
            ).cpu()
        logprobs = chosen.per_row()
        prefix = self._decoder_prompt(language)
        offset = len(prefix)
        decoded = []
        for row, (window, budget) in enumerate(zip(windows, budgets)):
            # generate returns the generated tokens only; each window keeps its own budget of them,
            # so its text does not depend on the windows batched with it
            generated = sequences[row, sequences.shape[1] - logprobs.shape[1] :][:budget].tolist()
            ended = self.eot in generated
            sequence = torch.tensor(prefix + generated[: generated.index(self.eot) + 1 if ended else len(generated)])
            times = self._token_times(encoded.last_hidden_state[row : row + 1], sequence, offset,
                                      math.ceil(window.end * 100))
            words = self._words(sequence, times, logprobs[row], offset)
            exhausted = not ended and len(sequence) - offset >= budget
            decoded.append(Decoded(words, 0.0, exhausted or looks_degenerate("".join(w.text for w in words))))
        return decoded

    def _decoder_prompt(self, language: str) -> list[int]:
        """The tokens the decoder starts from: hotwords (if any), then <|startoftranscript|>, language, task."""
        ids = self.tokenizer.convert_tokens_to_ids
        start = [ids("<|startoftranscript|>")]
        if self.multilingual:
            start += [ids(f"<|{language}|>"), ids("<|transcribe|>")]
        hotword_ids = self.prompt_ids.tolist() if self.prompt_ids is not None else []
        return [int(t) for t in hotword_ids] + start + [ids("<|notimestamps|>")]

    def _token_times(self, encoded: torch.Tensor, sequence: torch.Tensor, offset: int, frames: int) -> np.ndarray:
        """End time of every token, by DTW over the alignment heads' cross-attention (Whisper's word timing).

        A teacher-forced decoder pass over the window's own tokens, in eager
        attention (sdpa returns no attention weights), one window at a time: the
        cross-attention of every layer is large, and a window's times must not
        depend on the windows batched with it.
        """
        times = np.zeros(len(sequence))
        steps = len(sequence) - offset - 1  # the last token is never fed back while generating
        if steps <= 0:
            return times
        self.model.set_attn_implementation("eager")
        try:
            with torch.inference_mode():
                cross = self.model(encoder_outputs=(encoded,), decoder_input_ids=sequence[None].to(self.device),
                                   output_attentions=True).cross_attentions
        finally:
            self.model.set_attn_implementation("sdpa")
        weights = torch.stack([cross[layer][0, head] for layer, head in self.model.generation_config.alignment_heads])
        weights = weights[:, offset : offset + steps, : max(1, min(3000, frames) // 2)].float()
        std, mean = torch.std_mean(weights, dim=-2, keepdim=True, unbiased=False)
        smoothed = median_filter(((weights - mean) / std).cpu().numpy(), self.model.config.median_filter_width)
        text_indices, time_indices = dynamic_time_warping(-smoothed.mean(0).astype(np.float64))
        jumps = np.pad(np.diff(text_indices), (1, 0), constant_values=1).astype(bool)
        jump_times = time_indices[jumps] * 0.02
        times[offset : offset + len(jump_times)] = jump_times
        times[offset + len(jump_times) :] = jump_times[-1]
        return times

    def _words(self, sequence: Any, times: Any, logprobs: Any, offset: int) -> list[Word]:
        """Text tokens grouped into words (a word starts at a token with a leading space).

        Token i spans times[i-1] to times[i].
        """
        groups: list[list[int]] = []
        for position in range(offset, len(sequence)):
            token = int(sequence[position])
            if token >= self.eot:  # end of text, timestamps and other special tokens
                continue
            if not groups or self.tokenizer.convert_ids_to_tokens(token).startswith("Ġ"):
                groups.append([])
            groups[-1].append(position)
        words = []
        for group in groups:
            text = self.tokenizer.decode([int(sequence[p]) for p in group])
            probability = float(np.exp(np.mean([float(logprobs[p - offset]) for p in group])))
            words.append(Word(text, float(times[group[0] - 1]), float(times[group[-1]]), probability))
        return words
