"""Transcription: the ASR engines behind one interface (CTranslate2 Whisper, transformers Whisper and
Qwen3-ASR), how chunks are packed into their windows and batches, which device each process takes, and the
model assets the project ships."""

import os

# Nothing is downloaded at run time: huggingface_hub reads this when it is first imported, and every engine
# module (transformers among them) is imported after this package.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
