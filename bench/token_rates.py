"""Whisper tokens per second of speech, per language, on real speech: what ``language_tokens_per_second`` must fit.

Every VAD chunk of the test clips (Mandarin: tests/data/zh/; English:
asr_tasks/intake/data/jfk.flac and the shared faster-whisper clips when present, plus
espeak-ng calls) is decoded alone, unpacked, with a budget far above any real
rate; the text's tokens (the model's own tokenizer, special tokens left out) are
divided by the chunk's seconds. The budget a language needs is its highest rate
with some margin: a budget under it cuts a fast speaker's words off.

    .venv/bin/python bench/token_rates.py [--clips N] [--minutes 2] [--quick] [--json]

``--clips`` keeps the first N real clips of each language (all by default),
``--minutes`` is the espeak-ng calls' length; ``--quick`` decodes one clip of
each language and a quarter of a minute of calls. The JSON's keys: ``zh`` and
``en`` (each ``chunks``, ``mean``, ``median``, ``max``), ``configured``
(``max_tokens_per_second``, ``language_tokens_per_second``).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path
from typing import Any

from synthetic import parse_args, print_report, synthesise

from asr_tasks.config import PROJECT_ROOT, get_settings
from asr_tasks.intake.audio import read_pcm
from asr_tasks.intake.days import recording_for_file
from asr_tasks.intake.demo_corpus import JFK
from asr_tasks.models import SAMPLE_RATE
from asr_tasks.pipeline.preprocess import preprocess_local
from asr_tasks.pipeline.transcribe import load_engine

SHARED = PROJECT_ROOT.parent / "shared" / "audio"
QUICK = {"clips": 1, "minutes": 0.25}


def rates(files: list[Path], language: str, work: Path) -> list[float]:
    settings = get_settings().override(language=language, pack_windows=False, max_tokens_per_second=60.0, language_tokens_per_second={})
    engine = load_engine(settings)  # as the transcription task loads it: the term dictionary's hotwords included
    tokenizer = engine.model.hf_tokenizer  # type: ignore[attr-defined]
    out = []
    for n, path in enumerate(files):
        (work / f"{language}{n}").mkdir()
        pre, pcm = preprocess_local(recording_for_file(path), path, work / f"{language}{n}", settings.audio)
        for chunk in pre.chunks:
            audio = read_pcm(pcm[chunk.channel], SAMPLE_RATE, chunk.start, chunk.end)
            text = " ".join(s.text for s in engine.transcribe(chunk, audio))
            if text.strip():
                out.append(len(tokenizer.encode(text, add_special_tokens=False).ids) / (chunk.end - chunk.start))
    return out


def summary(values: list[float]) -> dict[str, float]:
    return {"chunks": len(values), "mean": round(statistics.mean(values), 2),
            "median": round(statistics.median(values), 2), "max": round(max(values), 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--clips", type=int, default=None, help="the first N real clips of each language (all)")
    parser.add_argument("--minutes", type=float, default=2.0, help="espeak-ng calls among the English clips")
    args = parse_args(parser, QUICK)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        zh = sorted((PROJECT_ROOT / "tests" / "data" / "zh").glob("*.wav"))[: args.clips]
        (work / "espeak").mkdir()
        en = [JFK, *[SHARED / n for n in ("hotwords.mp3",)
                                                               if (SHARED / n).is_file()]][: args.clips]
        en += [c.path for c in synthesise(work / "espeak", minutes=args.minutes)]
        report: dict[str, Any] = {"zh": summary(rates(zh, "zh", work)), "en": summary(rates(en, "en", work))}
    settings = get_settings()
    report["configured"] = {"max_tokens_per_second": settings.asr.max_tokens_per_second,
                            "language_tokens_per_second": settings.asr.language_tokens_per_second}
    print_report(report, args.json)


if __name__ == "__main__":
    main()
