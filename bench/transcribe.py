"""Stage timings and transcription speed over the demo corpus, on the embedded defaults.

Runs the same stage functions as the DAG (without Airflow) in a throw-away store,
index and ledger, and prints audio seconds per wall second for preprocessing and
transcription.

    .venv/bin/python bench/transcribe.py [--recordings N] [--quick] [--json]

``--recordings`` keeps the day's first N recordings (all eight by default);
``--quick`` keeps three. The JSON's keys: ``recordings``, ``transcribed``,
``audio_seconds``, ``channel_audio_seconds``, ``speech_seconds``,
``preprocess_wall_s``, ``model_load_wall_s``, ``transcribe_wall_s``,
``index_wall_s``, ``preprocess_audio_s_per_wall_s``,
``transcribe_audio_s_per_wall_s``, ``transcribe_speech_s_per_wall_s``,
``peak_rss_mib``, ``engine``.
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from datetime import date
from pathlib import Path

from synthetic import parse_args

from asr_tasks.config import get_settings
from asr_tasks.index.sqlite import SqliteIndex
from asr_tasks.intake.demo_corpus import write_demo_corpus
from asr_tasks.intake.stores import LocalStore, get_json
from asr_tasks.models import Preprocessed
from asr_tasks.pipeline.gate import gate_shard
from asr_tasks.pipeline.index import index_results
from asr_tasks.pipeline.preprocess import preprocess
from asr_tasks.pipeline.results import preprocessed
from asr_tasks.pipeline.sense import sense
from asr_tasks.pipeline.transcribe import load_engine, transcribe_shard

DAY = date(2026, 11, 27)
QUICK = {"recordings": 3}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--recordings", type=int, default=None, help="the day's first N recordings (all)")
    args = parse_args(parser, QUICK)

    with tempfile.TemporaryDirectory() as tmp:
        settings = get_settings().override(store_root=f"{tmp}/store", index_path=f"{tmp}/index.sqlite",
                                           work_dir=f"{tmp}/work", ledger_url=f"sqlite:///{tmp}/ledger.sqlite",
                                           device_lock_dir=f"{tmp}/locks")
        store = LocalStore(Path(settings.storage.store_root))
        write_demo_corpus(store, settings.storage, DAY)
        recordings = sense(store, settings, DAY)[: args.recordings]

        t0 = time.perf_counter()
        results = [preprocess(r, store, settings) for r in recordings]
        t_pre = time.perf_counter() - t0
        kept = [r for r in results if r.state == "preprocessed"]
        manifests = [
            Preprocessed.from_dict(get_json(store, settings.storage.artefacts_bucket, r.version.manifest))
            for r in kept
        ]
        audio = sum(m.duration for m in manifests)
        channel_audio = sum(c.duration for m in manifests for c in m.channels)
        speech = sum(m.speech_seconds for m in manifests)

        t0 = time.perf_counter()
        load_engine(settings)
        t_load = time.perf_counter() - t0
        t0 = time.perf_counter()
        transcribe_shard(preprocessed(results), store, settings)
        t_asr = time.perf_counter() - t0

        t0 = time.perf_counter()
        gate_shard(results, store, settings)
        index_results(results, store, SqliteIndex(Path(settings.index.index_path)), settings)
        t_index = time.perf_counter() - t0

    report = {
        "recordings": len(recordings),
        "transcribed": len(kept),
        "audio_seconds": round(audio, 1),
        "channel_audio_seconds": round(channel_audio, 1),
        "speech_seconds": round(speech, 1),
        "preprocess_wall_s": round(t_pre, 2),
        "model_load_wall_s": round(t_load, 2),
        "transcribe_wall_s": round(t_asr, 2),
        "index_wall_s": round(t_index, 2),
        "preprocess_audio_s_per_wall_s": round(audio / t_pre, 1),
        "transcribe_audio_s_per_wall_s": round(audio / t_asr, 2),
        "transcribe_speech_s_per_wall_s": round(speech / t_asr, 2),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "engine": f"{settings.asr.engine} {settings.asr.compute_type} on {settings.asr.device}",
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for key, value in report.items():
            print(f"{key:32} {value}")


if __name__ == "__main__":
    main()
