"""How long the retention DAG takes to erase a day of recordings.

Fills a day with ``--recordings`` recordings as the pipeline leaves them (ledger
rows, index documents, artefacts, the source objects with their sidecars, the
day's quality report), a few of them under a legal hold, then runs the real
``retention`` DAG (``airflow dags test``) for a day past their retention and
reports its wall time, what it erased and held, and what is left (it must be the
held recordings only).

    .venv/bin/python bench/retention.py [--recordings 1000] [--quick] [--json]

``--quick`` runs the same DAG over 20 recordings. The JSON's keys:
``recordings``, ``held``, ``fill_s``, ``retention_dag_wall_s``,
``ms_per_recording_erased``, ``ledger_states_after``, ``objects_left``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from synthetic import parse_args, print_report

from asr_tasks.config import PROJECT_ROOT, load_settings
from asr_tasks.intake.demo_corpus import JFK
from asr_tasks.models import Recording, Segment, Transcript, recording_id_for

QUICK = {"recordings": 20}
DAY = "2026-11-27"
HELD = 5  # recordings of one customer under a hold


def fill(root: Path, count: int) -> dict[str, str]:
    """A day of ``count`` recordings in a fresh store, index and ledger under ``root``; their ASR_* settings."""
    from asr_tasks.gate.reports import write_reports
    from asr_tasks.index.sqlite import SqliteIndex
    from asr_tasks.intake.artefacts import Artefacts
    from asr_tasks.intake.days import sidecar_key
    from asr_tasks.intake.stores import LocalStore, put_json
    from asr_tasks.records.access_log import AccessLog
    from asr_tasks.records.holds import Holds
    from asr_tasks.records.ledger import Ledger
    from asr_tasks.version import RecordingVersion

    env = {"ASR_STORE_ROOT": str(root / "store"), "ASR_INDEX_PATH": str(root / "index.sqlite"),
           "ASR_LEDGER_URL": f"sqlite:///{root / 'ledger.sqlite'}"}
    settings = load_settings(env=env)
    store, index, ledger = LocalStore(root / "store"), SqliteIndex(root / "index.sqlite"), Ledger(env["ASR_LEDGER_URL"])
    audio = JFK.read_bytes()  # the demo corpus's recording: any install has it
    recs, rows = [], []
    for n in range(count):
        key = f"calls/{DAY.replace('-', '/')}/call_{n:05d}.flac"
        customer = "CU-HELD" if n < HELD else f"CU-{n:05d}"
        rec = Recording(recording_id_for("recordings", key, f"e{n}"), "recordings", key, f"e{n}", len(audio),
                        f"call_{n:05d}", DAY, agent_id=f"AG-{n % 20:03d}", customer_id=customer)
        store.put_bytes("recordings", key, audio)
        store.put_bytes("recordings", sidecar_key(key), json.dumps({"customer_id": customer}).encode())
        version = RecordingVersion.of(rec)
        segments = [Segment(rec.recording_id, s % 2, ("agent", "customer")[s % 2], 2.0 * s, 2.0 * s + 1.8,
                            f"sentence {s} of call {n}") for s in range(30)]
        transcript = Transcript(rec, 60.0, segments, "en", "m", "2", quality="pass")
        for key in (version.transcript("m"), version.gated("m")):
            put_json(store, settings.storage.artefacts_bucket, key, transcript.to_dict())
        put_json(store, settings.storage.artefacts_bucket, version.manifest, {"recording": rec.to_dict()})
        for channel in (0, 1):
            store.put_bytes(settings.storage.artefacts_bucket, version.pcm(channel), b"\0" * 32000)
        index.replace_recording(transcript)
        recs.append(rec)
        rows.append({"recording_id": rec.recording_id, "key": key, "call_date": DAY, "quality": "pass",
                     "quality_failures": "", "state": "indexed", "reason": ""})
    ledger.sensed(recs, "m", "2")
    for rec in recs:
        ledger.advance(rec.recording_id, "indexed", stage="index", seconds=0.1, segments=30)
    write_reports(rows, Artefacts(store, settings.storage.artefacts_bucket, "m"), settings.quality)
    Holds(ledger, AccessLog(ledger)).place("customer", "litigation (benchmark)", "bench", value="CU-HELD")
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--recordings", type=int, default=1000)
    parser.add_argument("--json", action="store_true")
    args = parse_args(parser, QUICK)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        started = time.perf_counter()
        asr_env = fill(root, args.recordings)
        fill_s = time.perf_counter() - started
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "ASR_"))}
        env.update(asr_env)
        env.update({
            "AIRFLOW_HOME": str(root / "airflow"), "AIRFLOW__CORE__DAGS_FOLDER": str(PROJECT_ROOT / "dags"),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(PROJECT_ROOT / "plugins"), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{root / 'airflow' / 'airflow.db'}",
            "ASR_RETENTION_DAYS": json.dumps({"recordings/calls/": 30}), "ASR_TASK_RETRIES": "0",
        })
        airflow = str(Path(sys.executable).parent / "airflow")
        subprocess.run([airflow, "db", "migrate"], env=env, check=True, capture_output=True)
        started = time.perf_counter()
        proc = subprocess.run([airflow, "dags", "test", "retention", "2027-01-15"], env=env, capture_output=True,
                              text=True)
        dag_s = time.perf_counter() - started
        if proc.returncode != 0:
            raise SystemExit(proc.stderr[-3000:])
        from asr_tasks.records.ledger import Ledger

        states: dict[str, int] = {}
        for row in Ledger(asr_env["ASR_LEDGER_URL"]).rows():
            states[row["state"]] = states.get(row["state"], 0) + 1
        left = sum(1 for p in (root / "store").rglob("*") if p.is_file() and "reports" not in p.parts
                   and "quality." not in p.name)
    report = {
        "recordings": args.recordings, "held": HELD, "fill_s": round(fill_s, 1),
        "retention_dag_wall_s": round(dag_s, 1),
        "ms_per_recording_erased": round(1000 * dag_s / max(1, args.recordings - HELD), 1),
        "ledger_states_after": states, "objects_left": left,
    }
    print_report(report, args.json)


if __name__ == "__main__":
    main()
