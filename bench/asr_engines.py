"""Short calls: the naive file-by-file loop against the project's engine path, on the same synthetic corpus.

The corpus is about ten minutes of short English calls (2-15 s each, espeak-ng
at 8 kHz, known text). The naive approach loads faster-whisper's WhisperModel and
calls ``transcribe`` on one file after another. The engine path is what a
transcription task does: preprocess every file (ffprobe, ffmpeg, loudness
normalisation, Silero VAD chunks), then one ``transcribe_batch`` over all chunks
(packed into 30 s windows, batched). Both use the same model, device, compute
type, beam size and language. The corpus is split into blocks that are run
alternately by both approaches (the CPU is shared, so one long run of each would
measure the neighbours' load as much as the code); the speed ratio is the median
over blocks. Word error rate is computed after lowercasing, spelling numbers as
digits and dropping punctuation.

    .venv/bin/python bench/asr_engines.py [--json] [--quick] [--minutes 10] [--blocks 3] [--batch-sizes 1,2,4,8]

``--quick`` runs the same code on half a minute of calls, in two blocks, with
one batch size. The JSON's keys: ``corpus``, ``engine``, ``model_load_s``,
``naive_audio_s_per_wall_s``, ``batched_audio_s_per_wall_s``,
``batched_over_naive``, ``batched_over_naive_total``, ``wer_naive``,
``wer_batched``, ``packing``, ``blocks``, ``batch_size_sweep``.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
import time
from pathlib import Path

from synthetic import Call, Naive, parse_args, print_report, synthesise, timed, wer

from asr_tasks.config import Settings, get_settings
from asr_tasks.intake.days import recording_for_file
from asr_tasks.models import SAMPLE_RATE
from asr_tasks.pipeline.preprocess import preprocess_local
from asr_tasks.pipeline.transcribe import load_engine, transcribe_group
from asr_tasks.text.postprocess import stitch

QUICK = {"minutes": 0.5, "blocks": 2, "batch_sizes": "4"}


def engine_path(calls: list[Call], settings: Settings, work: Path) -> tuple[list[str], float]:
    """Preprocess every call, then one batched engine call over all chunks; returns texts and preprocess time."""
    from asr_tasks.intake.audio import read_pcm

    engine = load_engine(settings)  # as the transcription task loads it: the term dictionary's hotwords included
    started = time.perf_counter()
    items, owners = [], []
    for n, call in enumerate(calls):
        pre, pcm = preprocess_local(recording_for_file(call.path), call.path, work / str(n), settings.audio)
        for chunk in pre.chunks:
            items.append((chunk, read_pcm(pcm[chunk.channel], SAMPLE_RATE, chunk.start, chunk.end)))
            owners.append(n)
    preprocess_s = time.perf_counter() - started
    per_call = transcribe_group(engine, items, owners, len(calls))
    return [" ".join(s.text for s in stitch(segments)) for segments in per_call], preprocess_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--minutes", type=float, default=10.0, help="audio in the corpus")
    parser.add_argument("--blocks", type=int, default=3, help="corpus blocks, run alternately by both approaches")
    parser.add_argument("--batch-sizes", default="1,2,4,8", help="batch sizes of the sweep (on the first block)")
    parser.add_argument("--language", default="en", help="language for both approaches ('auto': detect)")
    args = parse_args(parser, QUICK)

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        base = get_settings().override(work_dir=str(folder / "work"), language=None if args.language == "auto" else args.language)
        calls = synthesise(folder, args.minutes)
        blocks = [calls[i :: args.blocks] for i in range(args.blocks)]

        naive, naive_load = timed(Naive, base)
        engine, engine_load = timed(load_engine, base)
        warm_up = dataclasses.replace(engine.packing_stats)
        naive_texts: dict[int, str] = {}
        engine_texts: dict[int, str] = {}
        rows = []
        for b, block in enumerate(blocks):
            audio = sum(c.duration for c in block)
            order = ("naive", "engine") if b % 2 == 0 else ("engine", "naive")
            seconds: dict[str, float] = {}
            for which in order:
                if which == "naive":
                    texts, seconds["naive"] = timed(naive.run, block)
                    naive_texts.update({calls.index(c): t for c, t in zip(block, texts)})
                else:
                    (texts, pre_s), seconds["engine"] = timed(engine_path, block, base, folder / f"b{b}")
                    seconds["preprocess"] = pre_s
                    engine_texts.update({calls.index(c): t for c, t in zip(block, texts)})
            rows.append({"block": b, "calls": len(block), "audio_s": round(audio, 1),
                         "naive_wall_s": round(seconds["naive"], 2), "engine_wall_s": round(seconds["engine"], 2),
                         "engine_preprocess_wall_s": round(seconds["preprocess"], 2),
                         "ratio": round(seconds["naive"] / seconds["engine"], 3)})
        packing = engine.packing_stats.since(warm_up)

        sweep = []
        for size in [int(s) for s in args.batch_sizes.split(",") if s]:
            settings = base.override(batch_size=size)
            load_engine(settings)
            (_, pre_s), wall = timed(engine_path, blocks[0], settings, folder / f"sweep{size}")
            audio = sum(c.duration for c in blocks[0])
            sweep.append({"batch_size": size, "wall_s": round(wall, 2), "asr_wall_s": round(wall - pre_s, 2),
                          "audio_s_per_wall_s": round(audio / wall, 3)})

    audio_total = sum(c.duration for c in calls)
    naive_wall = sum(r["naive_wall_s"] for r in rows)
    engine_wall = sum(r["engine_wall_s"] for r in rows)
    report = {
        "corpus": {"calls": len(calls), "audio_s": round(audio_total, 1),
                   "call_s_min": round(min(c.duration for c in calls), 2),
                   "call_s_max": round(max(c.duration for c in calls), 2), "language": args.language,
                   "sample_rate": 8000},
        "engine": f"{base.asr.engine} {base.asr.model_family} {base.asr.compute_type} on {base.asr.device}, "
                  f"beam {base.asr.beam_size}, batch {base.asr.batch_size}, packing {base.asr.pack_windows}",
        "model_load_s": {"naive": round(naive_load, 2), "engine_with_warm_up": round(engine_load, 2)},
        "naive_audio_s_per_wall_s": round(audio_total / naive_wall, 3),
        "batched_audio_s_per_wall_s": round(audio_total / engine_wall, 3),
        "batched_over_naive": round(statistics.median(r["ratio"] for r in rows), 3),
        "batched_over_naive_total": round(naive_wall / engine_wall, 3),
        "wer_naive": round(wer(calls, [naive_texts[i] for i in range(len(calls))]), 4),
        "wer_batched": round(wer(calls, [engine_texts[i] for i in range(len(calls))]), 4),
        "packing": packing.as_dict(),
        "blocks": rows,
        "batch_size_sweep": sweep,
    }
    print_report(report, args.json)


if __name__ == "__main__":
    main()
