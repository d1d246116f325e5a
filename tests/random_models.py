"""Randomly initialised Qwen3-ASR and Whisper checkpoints, saved like real ones, in two shapes.

``tiny`` models (a few thousand weights, wide init so their greedy output depends
on the audio) let the tests run the transformers engines on the CPU; the full
shapes (Qwen3-ASR-0.6B, Whisper-base) let ``bench/gpu.py`` measure the engines'
speed and memory on a GPU without weights from a model hub: with a fixed token
budget, a model's cost per batch depends on its shape, not on what it learnt.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

QWEN_TEMPLATE = (
    "{%- if messages[0].role != 'system' %}<|im_start|>system\n<|im_end|>\n{% endif -%}"
    "{%- for message in messages -%}"
    "<|im_start|>{{ message.role }}\n"
    "{% if message.content is string %}{{ message.content }}{% else %}{% for part in message.content %}"
    "{% if part.type == 'audio' %}<|audio_start|><|audio_pad|><|audio_end|>"
    "{% elif part.type == 'text' %}{{ part.text }}{% endif %}{% endfor %}{% endif %}"
    "{% if not (loop.last and message.role == 'assistant') %}<|im_end|>\n{% endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif -%}"
)

# Qwen3-ASR-0.6B: an 18-layer audio encoder (896 wide) in front of Qwen3-0.6B (28 layers, 1024 wide, 151,936 tokens).
QWEN3_ASR_SHAPES: dict[str, dict[str, Any]] = {
    "tiny": {
        "audio": {"d_model": 32, "encoder_layers": 1, "encoder_attention_heads": 2, "encoder_ffn_dim": 64,
                  "output_dim": 32, "downsample_hidden_size": 16, "initializer_range": 1.0},
        "text": {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
                 "num_key_value_heads": 1, "head_dim": 16, "initializer_range": 1.0},
        "vocab_size": None, "initializer_range": 1.0,
    },
    "0.6b": {
        "audio": {"d_model": 896, "encoder_layers": 18, "encoder_attention_heads": 14, "encoder_ffn_dim": 3584,
                  "output_dim": 1024, "downsample_hidden_size": 480},
        "text": {"hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 16,
                 "num_key_value_heads": 8, "head_dim": 128},
        "vocab_size": 151936, "initializer_range": 0.02,
    },
}
# Whisper-base: 6 + 6 layers, 512 wide, 8 heads; the tokenizer is Whisper's own (51,865 tokens).
WHISPER_SHAPES: dict[str, dict[str, Any]] = {
    "tiny": {"d_model": 32, "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 2,
             "decoder_attention_heads": 2, "encoder_ffn_dim": 64, "decoder_ffn_dim": 64, "init_std": 1.0},
    "base": {"d_model": 512, "encoder_layers": 6, "decoder_layers": 6, "encoder_attention_heads": 8,
             "decoder_attention_heads": 8, "encoder_ffn_dim": 2048, "decoder_ffn_dim": 2048, "init_std": 0.02},
}


ALIGNER_TEMPLATE = (  # the forced aligner's prompt: the audio, then every word followed by its two time slots
    "{%- for message in messages -%}{%- for part in message.content -%}"
    "{%- if part.type == 'audio' -%}<|audio_start|><|audio_pad|><|audio_end|>"
    "{%- elif part.type == 'text' -%}{{ part.text }}<timestamp><timestamp>{%- endif -%}"
    "{%- endfor -%}{%- endfor -%}"
)
ALIGNER_CLASSES = 400  # 80 ms time slots: 32 s, enough for the longest chunk (the real aligner has 5,000)


def _qwen_tokenizer(shape: str, extra: tuple[str, ...] = ()) -> Any:
    """A byte-level tokenizer with Qwen3-ASR's special tokens (and ``extra`` ones), padded to the shape's vocabulary."""
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import Qwen2Tokenizer

    dims = QWEN3_ASR_SHAPES[shape]
    vocab = {ch: i for i, ch in enumerate(sorted(ByteLevel.alphabet()))}
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|audio_start|>", "<|audio_end|>", "<|audio_pad|>",
                *extra, "<asr_text>"]
    if dims["vocab_size"]:  # plain tokens up to the real vocabulary size, so the output layer has its real cost
        vocab.update({f"t{n}": n for n in range(len(vocab), dims["vocab_size"] - len(specials))})
    tokenizer = Qwen2Tokenizer(
        vocab=vocab, merges=[], unk_token=None, bos_token=None, eos_token="<|im_end|>", pad_token="<|endoftext|>",
        extra_special_tokens={"audio_token": "<|audio_pad|>", "audio_bos_token": "<|audio_start|>",
                              "audio_eos_token": "<|audio_end|>"},
    )
    tokenizer.add_special_tokens({"additional_special_tokens": specials[:-1]})
    tokenizer.add_tokens([specials[-1]])
    return tokenizer


def _qwen_config(shape: str, tokenizer: Any, **extra: Any) -> Any:
    from transformers import Qwen3ASRConfig

    dims = QWEN3_ASR_SHAPES[shape]
    ids = tokenizer.convert_tokens_to_ids
    return Qwen3ASRConfig(
        audio_config=dims["audio"],
        text_config={**dims["text"], "vocab_size": len(tokenizer), "max_position_embeddings": 4096,
                     "tie_word_embeddings": True},
        audio_token_id=ids("<|audio_pad|>"), pad_token_id=ids("<|endoftext|>"),
        eos_token_id=[ids("<|endoftext|>"), ids("<|im_end|>")], initializer_range=dims["initializer_range"], **extra,
    )


def build_qwen3_asr(folder: Path, shape: str = "tiny") -> Path:
    """A randomly initialised Qwen3-ASR with a byte-level tokenizer (padded to the shape's vocabulary)."""
    import torch
    from transformers import Qwen3ASRFeatureExtractor, Qwen3ASRForConditionalGeneration, Qwen3ASRProcessor

    tokenizer = _qwen_tokenizer(shape)
    Qwen3ASRProcessor(feature_extractor=Qwen3ASRFeatureExtractor(), tokenizer=tokenizer,
                      chat_template=QWEN_TEMPLATE).save_pretrained(folder)
    torch.manual_seed(0)
    Qwen3ASRForConditionalGeneration(_qwen_config(shape, tokenizer, timestamp_token_id=0)).save_pretrained(folder)
    return folder


def build_qwen3_aligner(folder: Path, shape: str = "tiny") -> Path:
    """A randomly initialised Qwen3-ForcedAligner: Qwen3-ASR's body, a head over time slots, ``<timestamp>`` tokens."""
    import torch
    from transformers import Qwen3ASRFeatureExtractor, Qwen3ASRForTokenClassification, Qwen3ASRProcessor

    tokenizer = _qwen_tokenizer(shape, extra=("<timestamp>",))
    Qwen3ASRProcessor(feature_extractor=Qwen3ASRFeatureExtractor(), tokenizer=tokenizer,
                      chat_template=ALIGNER_TEMPLATE).save_pretrained(folder)
    config = _qwen_config(shape, tokenizer, timestamp_token_id=tokenizer.convert_tokens_to_ids("<timestamp>"),
                          num_labels=ALIGNER_CLASSES)
    torch.manual_seed(0)
    Qwen3ASRForTokenClassification(config).save_pretrained(folder)
    return folder


def build_whisper(folder: Path, tokenizer_json: Path, shape: str = "tiny") -> Path:
    """A randomly initialised Whisper with Whisper's own tokenizer and a complete generation config."""
    import tokenizers
    import torch
    from transformers import (
        GenerationConfig,
        WhisperConfig,
        WhisperFeatureExtractor,
        WhisperForConditionalGeneration,
        WhisperProcessor,
        WhisperTokenizer,
    )

    eot = "<|endoftext|>"
    tokenizer = WhisperTokenizer(tokenizer_object=tokenizers.Tokenizer.from_file(str(tokenizer_json)),
                                 unk_token=eot, bos_token=eot, eos_token=eot, pad_token=eot)
    processor = WhisperProcessor(feature_extractor=WhisperFeatureExtractor(feature_size=80), tokenizer=tokenizer)
    processor.save_pretrained(folder)
    ids = tokenizer.get_vocab()
    languages = {f"<|{code}|>": ids[f"<|{code}|>"] for code in ("en", "zh", "de", "fr", "es")}
    config = WhisperConfig(
        vocab_size=len(tokenizer), num_mel_bins=80, max_source_positions=1500, max_target_positions=448,
        decoder_start_token_id=ids["<|startoftranscript|>"], pad_token_id=ids[eot], eos_token_id=ids[eot],
        bos_token_id=ids[eot], **WHISPER_SHAPES[shape],
    )
    torch.manual_seed(0)
    model = WhisperForConditionalGeneration(config)
    model.generation_config = GenerationConfig(
        decoder_start_token_id=ids["<|startoftranscript|>"], eos_token_id=ids[eot], pad_token_id=ids[eot],
        bos_token_id=ids[eot], lang_to_id=languages,
        task_to_id={"transcribe": ids["<|transcribe|>"], "translate": ids["<|translate|>"]},
        no_timestamps_token_id=ids["<|notimestamps|>"], is_multilingual=True, max_initial_timestamp_index=50,
        begin_suppress_tokens=[220, ids[eot]], suppress_tokens=[], alignment_heads=[[1, 0], [1, 1]], max_length=448,
    )
    model.save_pretrained(folder)
    return folder
