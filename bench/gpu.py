"""The engines on a GPU: audio seconds per wall second and peak GPU memory, per batch size.

A check prepared to run in under 8 minutes on a lent GPU machine (the ``device``
tool, whose machine starts bare and reaches no network), over the chunks the
pipeline cuts from the benchmark's synthetic calls:

- ``ctranslate2``: real Whisper-base (the packaged CTranslate2 model), float16;
- ``transformers-whisper``: Whisper-base through transformers, with random
  weights (no Whisper-base in transformers' format ships without a model hub)
  and Whisper's own tokenizer;
- ``transformers-qwen3``: a Qwen3-ASR-0.6B-shaped model with random weights and
  its forced aligner (random too), so word times cost what they cost in
  production.

Every engine runs the production configuration: the shipped settings
(``include/config.yaml``: the term dictionary's hotwords, language detection
per recording), bfloat16 for the transformers engines and float16 for
CTranslate2 on a GPU (``GPU_COMPUTE_TYPE`` of ``.env.example``), over English
and Mandarin chunks.

Random weights rarely say end-of-text, so those models decode up to the token
budget (``max_tokens_per_second`` of speech per chunk): a fixed amount of work per
chunk, which is what makes their figures comparable between runs and machines.

Two steps. Here (espeak-ng, ffmpeg and the VAD; the Mandarin clips of
``tests/data/zh/``), the chunks:

    .venv/bin/python bench/gpu.py prepare [--minutes 12] [--quick] [--json]    # -> var/gpu-bench/chunks.npz

There, with the machine's own torch and transformers, and CTranslate2 and
faster-whisper from wheels carried in ``.whl`` (see the device tool's README):

    python3 bench/gpu.py run [--engines ctranslate2,transformers-whisper,transformers-qwen3]
                             [--batch-sizes 1,2,4,8,16,32,64] [--model-dir var/models/whisper-base] [--quick] [--json]

Each engine is loaded once and warmed up; each batch size then runs over at
least eight batches' worth of chunks (all of them at most), and the sweep of an
engine stops when ``--budget-seconds`` of wall time are spent. Peak memory is
NVML's reading of the device (every engine, CTranslate2's own allocator
included), less what was in use before the engine loaded; torch engines also
report torch's own peak allocation.

``--quick`` runs the same steps small: ``prepare --quick`` cuts half a minute of
calls into var/gpu-bench/quick/, which ``run --quick`` reads, at batch sizes 1
and 4 with a 30 s budget per engine (``--device cpu --tiny --quick`` checks the
whole script on a CPU). ``prepare --json`` prints ``chunks``, ``speech_s`` and
``path``; ``run`` prints ``device``, ``chunks``, ``speech_s`` and ``engines``: per
engine ``model``, ``compute_type``, ``aligner`` and ``hotwords`` (whether they ran), for the
transformers engines ``attn_implementation`` and ``generation_cache`` (``--attn-implementation
flash_attention_2``, ``--generation-cache static`` measure the alternatives),
``load_and_warm_up_s`` and ``batches`` (per
batch size ``batch_size``, ``chunks``, ``speech_s``, ``wall_s``,
``audio_s_per_wall_s``, on a GPU ``peak_gpu_mib``), or ``error`` for an engine
that could not run.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from asr_tasks.config import Settings, get_settings  # noqa: E402
from asr_tasks.models import SAMPLE_RATE, AudioChunk  # noqa: E402

SR = 16000
DEFAULT_OUT = ROOT / "var" / "gpu-bench"
QUICK_PREPARE = {"minutes": 0.5, "out": str(DEFAULT_OUT / "quick")}
QUICK_RUN = {"chunks": str(DEFAULT_OUT / "quick" / "chunks.npz"), "batch_sizes": "1,4", "budget_seconds": 30.0}
ZH_CALLS = ROOT / "tests" / "data" / "zh"  # real Mandarin speech (ORIGIN.md there)
GPU_COMPUTE = {"ctranslate2": "float16", "transformers": "bfloat16"}  # as the GPU workers run them
ENGINES = {  # name: (engine, model family, shape of the random model or None for the real one)
    "ctranslate2": ("ctranslate2", "whisper", None),
    "transformers-whisper": ("transformers", "whisper", "base"),
    "transformers-qwen3": ("transformers", "qwen3_asr", "0.6b"),
}


def prepare(minutes: float, out: Path) -> dict[str, Any]:
    """Synthesise the calls, cut them like the pipeline does and save every chunk's samples (16-bit) with its place."""
    from synthetic import synthesise

    from asr_tasks.intake.audio import read_pcm
    from asr_tasks.intake.days import recording_for_file
    from asr_tasks.pipeline.preprocess import preprocess_local

    audio = Settings().audio
    out.mkdir(parents=True, exist_ok=True)
    pieces, meta = [], []
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "calls").mkdir()
        calls = [call.path for call in synthesise(Path(tmp) / "calls", minutes)] + sorted(ZH_CALLS.glob("*.wav"))
        for n, path in enumerate(calls):
            work = Path(tmp) / str(n)
            work.mkdir()
            pre, pcm = preprocess_local(recording_for_file(path), path, work, audio)
            for chunk in pre.chunks:
                samples = read_pcm(pcm[chunk.channel], SAMPLE_RATE, chunk.start, chunk.end)
                pieces.append(np.clip(samples * 32767, -32768, 32767).astype(np.int16))
                meta.append([chunk.recording_id, chunk.channel, chunk.speaker, chunk.start, chunk.end])
    path = out / "chunks.npz"
    np.savez_compressed(path, audio=np.concatenate(pieces), lengths=np.array([len(p) for p in pieces]),
                        meta=np.array(json.dumps(meta)))
    return {"chunks": len(meta), "speech_s": round(sum(len(p) for p in pieces) / SR, 1), "path": str(path)}


def load_chunks(path: Path) -> list[tuple[AudioChunk, np.ndarray]]:
    data = np.load(path)
    bounds = np.cumsum([0, *data["lengths"]])
    audio = data["audio"].astype(np.float32) / 32768.0
    return [(AudioChunk(rid, channel, speaker, f"{rid}.pcm", start, end), audio[bounds[n]:bounds[n + 1]])
            for n, (rid, channel, speaker, start, end) in enumerate(json.loads(str(data["meta"])))]


class MemoryWatch:
    """The device's used memory, sampled every 20 ms through NVML while a measurement runs."""

    def __init__(self, device: str) -> None:
        self.handle: Any = None
        if device == "cuda":
            try:
                import pynvml

                pynvml.nvmlInit()
                self.handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            except Exception:  # no NVML: torch's own figure still comes
                self.handle = None
        self.peak = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def used(self) -> int:
        if self.handle is None:
            return 0
        import pynvml

        return int(pynvml.nvmlDeviceGetMemoryInfo(self.handle).used)

    def __enter__(self) -> MemoryWatch:
        self.peak = self.used()
        self._stop.clear()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, self.used())

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.peak = max(self.peak, self.used())


def model_dirs_for(name: str, shape: str | None, real_model: Path, work: Path) -> tuple[Path, str]:
    """The real model's folder, or a random model of the shape built in ``work``; and Qwen3-ASR's aligner."""
    from random_models import build_qwen3_aligner, build_qwen3_asr, build_whisper

    if shape is None:
        return real_model, ""
    folder = work / f"{name}-{shape}"
    if ENGINES[name][1] == "qwen3_asr":
        return build_qwen3_asr(folder, shape), str(build_qwen3_aligner(work / f"{name}-aligner"))
    return build_whisper(folder, real_model / "tokenizer.json", shape), ""


def sweep(name: str, items: list[tuple[AudioChunk, np.ndarray]], batch_sizes: list[int], args: argparse.Namespace,
          work: Path) -> dict[str, Any]:
    """One engine over the batch sizes; returns its load time and a row per batch size."""
    from asr_tasks.text.postprocess import hotwords
    from asr_tasks.transcription.engines import get_engine

    engine_name, family, shape = ENGINES[name]
    torch = _torch()
    gpu = args.device == "cuda"
    compute = GPU_COMPUTE[engine_name] if gpu else ("int8" if engine_name == "ctranslate2" else "float32")
    folder, aligner = model_dirs_for(name, shape and ("tiny" if args.tiny else shape), Path(args.model_dir), work)
    settings = get_settings().override(engine=engine_name, model_family=family, model_dir=str(folder),
                                       aligner_dir=aligner, device=args.device, compute_type=compute,
                                       batch_size=batch_sizes[0], device_lock_dir=str(work / "locks"),
                                       attn_implementation=args.attn_implementation,
                                       generation_cache=args.generation_cache)
    watch = MemoryWatch(args.device)
    before = watch.used()
    started = time.perf_counter()
    words = hotwords(settings.postprocess)
    engine = get_engine(settings.asr, words)  # as the transcribe task loads it: the term dictionary's hotwords on
    engine.transcribe_batch(items[: max(1, batch_sizes[0])])  # warm-up: CUDA context, kernels, allocator
    report: dict[str, Any] = {"model": str(folder.name), "compute_type": compute, "aligner": bool(aligner),
                              "hotwords": bool(words), **({"attn_implementation": args.attn_implementation,
                                                           "generation_cache": args.generation_cache}
                                                          if engine_name == "transformers" else {}),
                              "load_and_warm_up_s": round(time.perf_counter() - started, 2), "batches": []}
    deadline = time.perf_counter() + args.budget_seconds
    for size in batch_sizes:
        if time.perf_counter() > deadline:
            report["stopped_at_budget"] = size
            break
        engine.batch_size = size  # the same loaded model; only how many windows or chunks go per call changes
        chunks = items[: min(len(items), max(8 * size, 16))]
        if torch is not None and gpu:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        with watch:
            t0 = time.perf_counter()
            engine.transcribe_batch(chunks)
            if torch is not None and gpu:
                torch.cuda.synchronize()
            wall = time.perf_counter() - t0
        speech = sum(c.end - c.start for c, _ in chunks)
        row: dict[str, Any] = {"batch_size": size, "chunks": len(chunks), "speech_s": round(speech, 1),
                               "wall_s": round(wall, 3), "audio_s_per_wall_s": round(speech / wall, 1)}
        if watch.handle is not None:
            row["peak_gpu_mib"] = round((watch.peak - before) / 2**20)
        if torch is not None and gpu and engine_name == "transformers":
            row["torch_peak_allocated_mib"] = round(torch.cuda.max_memory_allocated() / 2**20)
        report["batches"].append(row)
        print(f"{name:22s} batch {size:3d}: {row['audio_s_per_wall_s']:8.1f} audio s/s, "
              f"{row.get('peak_gpu_mib', '-')} MiB", file=sys.stderr, flush=True)
    return report


def _torch() -> Any:
    try:
        import torch
    except ModuleNotFoundError:
        return None
    return torch


def run(args: argparse.Namespace) -> dict[str, Any]:
    items = load_chunks(Path(args.chunks))
    sizes = [int(s) for s in args.batch_sizes.split(",")]
    torch = _torch()
    report: dict[str, Any] = {
        "device": torch.cuda.get_device_name(0) if torch is not None and args.device == "cuda" else args.device,
        "chunks": len(items), "speech_s": round(sum(c.end - c.start for c, _ in items), 1), "engines": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.engines.split(","):
            try:
                report["engines"][name] = sweep(name, items, sizes, args, Path(tmp))
            except Exception as exc:  # one engine that cannot run here must not cost the others' figures
                report["engines"][name] = {"error": f"{type(exc).__name__}: {exc}"}
                print(f"{name}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="step", required=True)
    p = sub.add_parser("prepare", help="cut the benchmark's chunks (here: espeak-ng, ffmpeg, the VAD)")
    p.add_argument("--minutes", type=float, default=12.0, help="synthetic calls to cut")
    p.add_argument("--out", default=str(DEFAULT_OUT))
    p.add_argument("--quick", action="store_true", help=f"smaller defaults, a check that it runs: {QUICK_PREPARE}")
    p.add_argument("--json", action="store_true")
    steps = {"prepare": (p, QUICK_PREPARE)}
    p = sub.add_parser("run", help="measure the engines on the prepared chunks")
    p.add_argument("--chunks", default=str(DEFAULT_OUT / "chunks.npz"))
    p.add_argument("--engines", default=",".join(ENGINES))
    p.add_argument("--batch-sizes", default="1,2,4,8,16,32,64")
    p.add_argument("--model-dir", default=str(ROOT / "var" / "models" / "whisper-base"),
                   help="the CTranslate2 Whisper-base folder (also gives Whisper's tokenizer)")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--budget-seconds", type=float, default=120.0, help="wall time per engine's sweep")
    p.add_argument("--tiny", action="store_true", help="tiny random models (a check of the script on a CPU)")
    p.add_argument("--attn-implementation", default="sdpa", choices=["sdpa", "eager", "flash_attention_2"],
                   help="the transformers engines' attention (flash_attention_2: CUDA and flash-attn)")
    p.add_argument("--generation-cache", default="dynamic", choices=["dynamic", "static"],
                   help="Qwen3-ASR's KV cache (static: preallocated, decoding compiled on CUDA)")
    p.add_argument("--quick", action="store_true", help=f"smaller defaults, a check that it runs: {QUICK_RUN}")
    p.add_argument("--json", action="store_true")
    steps["run"] = (p, QUICK_RUN)
    args = parser.parse_args()
    if args.quick:  # the same code on tiny sizes; a size given on the command line still wins
        step, quick = steps[args.step]
        step.set_defaults(**quick)
        args = parser.parse_args()
    if args.step == "prepare":
        done = prepare(args.minutes, Path(args.out))
        print(json.dumps(done, indent=1) if args.json else
              f"{done['chunks']} chunks, {done['speech_s']:.0f} s of speech -> {done['path']}")
        return
    report = run(args)
    print(json.dumps(report, indent=1) if args.json else json.dumps(report))


if __name__ == "__main__":
    main()
