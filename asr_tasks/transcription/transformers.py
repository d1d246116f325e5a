"""Whisper through transformers, and the loading both transformers engines share: fp32 on CPU, bf16/fp16 on
GPU, the configured attention (``attn_implementation``), greedy batched generate.

Whisper (``WhisperForConditionalGeneration``) reads 30 s windows, so it shares
the packing of the CTranslate2 engine: word times come from the alignment
heads' cross-attention, computed for a whole batch of windows in one decoder
pass on the device (``_align``), and words of languages written without spaces
are split per character, as faster-whisper does. Qwen3-ASR
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
    if family == "qwen3_asr":  # Qwen's own release loads through its qwen-asr package, not through transformers
        extractor = read_json(model_dir / "preprocessor_config.json") or read_json(
            model_dir / "processor_config.json").get("feature_extractor", {})
        kind = extractor.get("feature_extractor_type")
        if "thinker_config" in config or kind not in (None, "Qwen3ASRFeatureExtractor"):
            layout = ("config.json nests the model in thinker_config" if "thinker_config" in config
                      else f"its feature extractor is {kind}, not Qwen3ASRFeatureExtractor")
            raise ModelError(f"model folder {model_dir} holds an original Qwen3 release ({layout}), which "
                             "transformers does not load: use the transformers-format checkpoint, the one named "
                             "-hf (e.g. Qwen/Qwen3-ASR-1.7B-hf), or convert this one with transformers' "
                             "convert_qwen3_asr_to_hf.py")
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


def pretrained(model_dir: Path, model_class: str, dtype: torch.dtype, attn_implementation: str) -> tuple[Any, Any]:
    """Processor and model from a checked local folder; any file that does not fit is an error naming it."""
    try:
        processor = transformers.AutoProcessor.from_pretrained(model_dir, local_files_only=True)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ModelError(f"model folder {model_dir}: tokenizer or preprocessor files could not be "
                         f"loaded: {exc}") from exc
    try:
        model, info = getattr(transformers, model_class).from_pretrained(
            model_dir, local_files_only=True, dtype=dtype, attn_implementation=attn_implementation,
            output_loading_info=True,
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
        if settings.attn_implementation == "flash_attention_2":  # refused before a GPU is taken, with what to do
            if settings.device != "cuda":
                raise ModelError(f"attn_implementation flash_attention_2 runs on CUDA only, and device is "
                                 f"{settings.device}: set attn_implementation: sdpa")
            if not transformers.utils.is_flash_attn_2_available():
                raise ModelError("attn_implementation flash_attention_2 needs the flash-attn package, which is not "
                                 "installed here (pip install flash-attn --no-build-isolation): install it or set "
                                 "attn_implementation: sdpa")
        if settings.device == "cpu" and settings.cpu_threads > 0:
            torch.set_num_threads(settings.cpu_threads)
        self.lease: DeviceLease = acquire_device(settings)
        try:
            if self.lease.kind == "cuda" and self.lease.index >= torch.cuda.device_count():
                raise RuntimeError(f"{self.lease.torch_device} is not visible to torch "
                                   f"({torch.cuda.device_count()} CUDA device(s)); check gpu_count")
            self.processor, model = pretrained(model_dir, model_class, self.dtype, settings.attn_implementation)
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

    def cache_options(self) -> dict[str, Any]:
        """``generate``'s cache switches: a static cache (``generation_cache``) has fixed shapes, so generate
        compiles its decoding step; that pays on CUDA only, and elsewhere costs a compile for every new shape."""
        if self.settings.generation_cache == "dynamic":
            return {}
        return {"cache_implementation": "static", "disable_compile": not self.device.startswith("cuda")}


# Languages written without spaces between words: each complete character is a word (faster-whisper's split).
UNSPACED_LANGUAGES = frozenset({"zh", "ja", "th", "lo", "my", "yue"})


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
        vocabulary = self.tokenizer.get_vocab()
        no_speech = [vocabulary[token] for token in ("<|nospeech|>", "<|nocaptions|>") if token in vocabulary]
        if not no_speech:
            raise loaded.mismatch("tokenizer.json", "no <|nospeech|> token (needed for the no-speech probability)")
        self.no_speech = no_speech[0]
        self.alignment_heads = [(int(layer), int(head)) for layer, head in generation.alignment_heads]
        self.multilingual = bool(getattr(generation, "is_multilingual", False))
        self.eot = int(generation.eos_token_id if isinstance(generation.eos_token_id, int)
                       else generation.eos_token_id[0])
        # kept as ids, not as a tensor: every tensor a decode hands the model is made on the model's device
        self.prompt_tokens: list[int] = (
            self.processor.get_prompt_ids(hotwords, return_tensors="np").tolist() if hotwords else [])
        # decoder positions left after <|startoftranscript|><|lang|><|transcribe|><|notimestamps|> and the hotwords
        self.max_budget = self.model.config.max_target_positions - 4 - len(self.prompt_tokens)
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
        prompt_ids = torch.tensor(self.prompt_tokens, device=self.device) if self.prompt_tokens else None
        chosen = ChosenLogprobs()
        with torch.inference_mode():
            encoded = self.model.get_encoder()(features)
            generated = self.model.generate(
                features, encoder_outputs=encoded, attention_mask=attention_mask, language=language,
                task="transcribe", do_sample=False, num_beams=1, max_new_tokens=max(budgets),
                prompt_ids=prompt_ids, logits_processor=transformers.LogitsProcessorList([chosen]),
            ).cpu()
        logprobs = chosen.per_row()
        prefix = self._decoder_prompt(language)
        offset = len(prefix)
        sequences, ended = [], []
        for row, budget in enumerate(budgets):
            # generate returns the generated tokens only; each window keeps its own budget of them,
            # so its text does not depend on the windows batched with it
            tokens = generated[row, generated.shape[1] - logprobs.shape[1] :][:budget].tolist()
            ended.append(self.eot in tokens)
            sequences.append(prefix + tokens[: tokens.index(self.eot) + 1 if ended[-1] else len(tokens)])
        times, no_speech = self._align(encoded.last_hidden_state, sequences, offset,
                                       [math.ceil(w.end * 100) for w in windows])
        decoded = []
        for row, sequence in enumerate(sequences):
            words = self._words(sequence, times[row], logprobs[row], offset, language)
            exhausted = not ended[row] and len(sequence) - offset >= budgets[row]
            decoded.append(Decoded(words, no_speech[row],
                                   exhausted or looks_degenerate("".join(w.text for w in words))))
        return decoded

    def _decoder_prompt(self, language: str) -> list[int]:
        """The tokens the decoder starts from: hotwords (if any), then <|startoftranscript|>, language, task."""
        ids = self.tokenizer.convert_tokens_to_ids
        start = [ids("<|startoftranscript|>")]
        if self.multilingual:
            start += [ids(f"<|{language}|>"), ids("<|transcribe|>")]
        return [*self.prompt_tokens, *start, ids("<|notimestamps|>")]

    def _align(self, encoded: torch.Tensor, sequences: list[list[int]], offset: int,
               frames: list[int]) -> tuple[list[np.ndarray], list[float]]:
        """Every window's token end times and its no-speech probability, from one decoder pass over the batch.

        The pass is teacher-forced over the windows' own tokens and keeps the
        model's attention implementation (sdpa gives no attention weights):
        hooks take the queries of the alignment heads' layers, and only those
        heads' cross-attention is computed, not every layer's, which is large.
        Rows are padded at their end, where causal attention cannot reach back,
        so a window's times do not depend on the windows batched with it. The
        no-speech probability is Whisper's: that of <|nospeech|> at the step
        after <|startoftranscript|>, the one that picks the language.
        """
        length = max(len(s) for s in sequences)
        ids = torch.tensor([s + [self.eot] * (length - len(s)) for s in sequences], device=self.device)
        decoder = self.model.get_decoder()
        queries: dict[int, torch.Tensor] = {}

        def keep_query(layer: int) -> Any:
            def hook(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
                queries[layer] = args[0] if args else kwargs["hidden_states"]
            return hook

        with torch.inference_mode():
            hooks = [decoder.layers[layer].encoder_attn.register_forward_pre_hook(keep_query(layer), with_kwargs=True)
                     for layer in sorted({layer for layer, _ in self.alignment_heads})]
            try:
                hidden = decoder(input_ids=ids, encoder_hidden_states=encoded, use_cache=False).last_hidden_state
            finally:
                for hook in hooks:
                    hook.remove()
            logits = self.model.get_output_embeddings()(hidden[:, len(self.prompt_tokens)])
            no_speech = torch.softmax(logits.float(), dim=-1)[:, self.no_speech].tolist()
            weights = self._alignment_weights(queries, encoded)
            times = [self._token_times(weights[row], len(sequence), offset, frames[row])
                     for row, sequence in enumerate(sequences)]
        return times, no_speech

    def _alignment_weights(self, queries: dict[int, torch.Tensor], encoded: torch.Tensor) -> torch.Tensor:
        """(rows, heads, tokens, frames) cross-attention of the alignment heads, as eager attention weighs it."""
        layers = self.model.get_decoder().layers
        heads = []
        for layer, head in self.alignment_heads:
            attention = layers[layer].encoder_attn
            part = slice(head * attention.head_dim, (head + 1) * attention.head_dim)
            query = _project(attention.q_proj, queries[layer], part) * attention.scaling
            key = _project(attention.k_proj, encoded, part)
            heads.append(torch.softmax((query @ key.transpose(1, 2)).float(), dim=-1))
        return torch.stack(heads, dim=1)

    def _token_times(self, weights: torch.Tensor, length: int, offset: int, frames: int) -> np.ndarray:
        """End time of each of a window's ``length`` tokens, by DTW over its (heads, tokens, frames) weights."""
        times = np.zeros(length)
        steps = length - offset - 1  # the last token is never fed back while generating
        if steps <= 0:
            return times
        weights = weights[:, offset : offset + steps, : max(1, min(3000, frames) // 2)]
        std, mean = torch.std_mean(weights, dim=-2, keepdim=True, correction=0)
        cost = -median_filter((weights - mean) / std, self.model.config.median_filter_width).mean(dim=0)
        text_indices, time_indices = dynamic_time_warping(cost.double().cpu().numpy())
        jumps = np.pad(np.diff(text_indices), (1, 0), constant_values=1).astype(bool)
        jump_times = time_indices[jumps] * 0.02
        times[offset : offset + len(jump_times)] = jump_times
        times[offset + len(jump_times) :] = jump_times[-1]
        return times

    def _words(self, sequence: list[int], times: np.ndarray, logprobs: torch.Tensor, offset: int,
               language: str) -> list[Word]:
        """Text tokens grouped into words: a word starts at a token with a leading space or, in a language written
        without spaces, after each complete character (one may take several tokens), as faster-whisper splits.

        Token i spans times[i-1] to times[i].
        """
        unspaced = language in UNSPACED_LANGUAGES
        groups: list[list[int]] = []
        for position in range(offset, len(sequence)):
            token = sequence[position]
            if token >= self.eot:  # end of text, timestamps and other special tokens
                continue
            if not groups:
                groups.append([])
            elif unspaced:
                if not self.tokenizer.decode([sequence[p] for p in groups[-1]]).endswith("\ufffd"):
                    groups.append([])
            elif self.tokenizer.convert_ids_to_tokens(token).startswith("Ġ"):
                groups.append([])
            groups[-1].append(position)
        words = []
        for group in groups:
            text = self.tokenizer.decode([sequence[p] for p in group])
            probability = float(np.exp(np.mean([float(logprobs[p - offset]) for p in group])))
            words.append(Word(text, float(times[group[0] - 1]), float(times[group[-1]]), probability))
        return words


def _project(linear: torch.nn.Linear, states: torch.Tensor, part: slice) -> torch.Tensor:
    """The output features ``part`` of a linear layer (one attention head's), without computing the others."""
    bias = None if linear.bias is None else linear.bias[part]
    return torch.nn.functional.linear(states, linear.weight[part], bias)
