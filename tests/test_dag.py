"""The transcribe_daily DAG: cheap to parse, wired as designed, and a real run over a synthetic day."""

from __future__ import annotations

import base64
import getpass
import json
import os
import re
import shlex
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from misheard import homophone_of
from stored_text import StoredText

from asr_tasks import PIPELINE_VERSION
from asr_tasks.config import PROJECT_ROOT

DAY = "2026-11-27"
BIN = Path(sys.executable).parent
HEAVY = ("torch", "transformers", "ctranslate2", "faster_whisper", "onnxruntime", "numpy")
README = PROJECT_ROOT / "README.md"
SECONDS_MARGIN = 1.0  # a time in the README's sample output may differ this much from a run's (CPU makes differ)
ID_OR_TIME = re.compile(r"(\b[0-9a-f]{24}\b|\d+\.\d+)")
READ_ONLY = {"search", "status", "audit"}  # what a README console block may run against the real run's output...
WRITES = {"--rerun", "--export"}  # ...without these


def airflow_env(tmp: Path) -> dict[str, str]:
    """An isolated Airflow (SQLite metadata DB) and project state, both under ``tmp``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "ASR_"))}
    env.update({
        "AIRFLOW_HOME": str(tmp / "airflow"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(PROJECT_ROOT / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(PROJECT_ROOT / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{tmp / 'airflow' / 'airflow.db'}?timeout=60",  # as the Makefile's
        "ASR_STORE_ROOT": str(tmp / "store"),
        "ASR_INDEX_PATH": str(tmp / "index.sqlite"),
        "ASR_LEDGER_URL": f"sqlite:///{tmp / 'ledger.sqlite'}",
        "ASR_WORK_DIR": str(tmp / "work"),
        "ASR_TASK_RETRIES": "0",
        "HF_HUB_OFFLINE": "1",
    })
    return env


def samples(path: Path) -> np.ndarray:
    """Every sample of a recording's first channel as ffmpeg decodes it, 16-bit at the recording's own rate."""
    raw = subprocess.run(["ffmpeg", "-v", "error", "-i", str(path), "-af", "pan=mono|c0=c0", "-f", "s16le", "-"],
                         check=True, capture_output=True).stdout
    return np.frombuffer(raw, dtype="<i2")


def run(args: list[str], env: dict[str, str], timeout: int = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout, cwd=PROJECT_ROOT)


def same_line(expected: str, actual: str) -> bool:
    """Equal but for runs of spaces, recording ids (any 24 hex digits) and times (numbers with a decimal point,
    within SECONDS_MARGIN); whole numbers (counts, digits said) are equal. A README line that ends in `...`
    stands for every line that begins with it."""
    abridged = expected.endswith("...")
    want = ID_OR_TIME.split(" ".join(expected.removesuffix("...").split()))
    got = ID_OR_TIME.split(" ".join(actual.split()))
    if abridged and len(got) >= len(want) and got[len(want) - 1].startswith(want[-1]):
        got = [*got[: len(want) - 1], want[-1]]
    if len(want) != len(got) or want[::2] != got[::2]:
        return False
    return all(("." in a) == ("." in b) and ("." not in a or abs(float(a) - float(b)) <= SECONDS_MARGIN)
               for a, b in zip(want[1::2], got[1::2]))


def missing_lines(expected: list[str], actual: list[str]) -> list[str]:
    """The README's lines that the output does not have: each run of lines between `...` lines must stand in the
    output as consecutive lines, the runs in the README's order (what `...` leaves out may be anything)."""
    runs: list[list[str]] = [[]]
    for line in expected:
        if line.strip() == "...":
            runs.append([])
        else:
            runs[-1].append(line)
    at = 0
    for lines in filter(None, runs):
        found = next((start for start in range(at, len(actual) - len(lines) + 1)
                      if all(same_line(e, a) for e, a in zip(lines, actual[start:]))), None)
        if found is None:
            return lines
        at = found + len(lines)
    return []


def readme_blocks() -> list[tuple[str, list[str]]]:
    """The README's fenced blocks: (language, lines)."""
    blocks: list[tuple[str, list[str]]] = []
    language: str | None = None
    for line in README.read_text().splitlines():
        if line.startswith("```"):
            if language is None:
                language, lines = line[3:].strip(), []
            else:
                blocks.append((language, lines))
                language = None
        elif language is not None:
            lines.append(line)
    return blocks


def demo_sections() -> dict[str, list[list[str]]]:
    """What `make demo` prints after its DAG runs: each `== title` it echoes, with the asr commands under it."""
    env = {k: v for k, v in os.environ.items() if k != "DEMO_DATE"}
    dry = subprocess.run(["make", "-n", "demo"], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True,
                         timeout=60)
    assert dry.returncode == 0, dry.stderr
    sections: dict[str, list[list[str]]] = {}
    title = None
    for line in dry.stdout.splitlines():
        if echoed := re.fullmatch(r'echo "(== .*)"', line):
            title = echoed[1]
            sections[title] = []
        elif title and line.startswith(".venv/bin/asr "):
            sections[title].append(shlex.split(line))
    return sections


def asr_output(args: list[str], env: dict[str, str]) -> list[str]:
    """What `.venv/bin/asr ...` prints on a terminal (stdout, then stderr), run on this run's output."""
    assert args[0] == ".venv/bin/asr", args
    proc = run([str(BIN / "asr"), *args[1:]], env)
    assert proc.returncode == 0, (args, proc.stderr[-2000:])
    return [line.rstrip() for line in (proc.stdout + proc.stderr).splitlines()]


def check_readme_sample_output(env: dict[str, str]) -> int:
    """Every sample of output in the README is what the demo day prints: a block of `make demo`'s `== title`
    sections is compared with the asr commands that `make demo` runs under each title, and a `console` block's
    `$ .venv/bin/asr ...` lines with what they print. Returns how many outputs it compared."""
    sections = demo_sections()
    compared = 0
    for language, lines in readme_blocks():
        titled = language != "console" and any(line.startswith("== ") for line in lines)
        if not (titled or language == "console"):
            continue
        marker = "== " if titled else "$ "
        starts = [n for n, line in enumerate(lines) if line.startswith(marker)] + [len(lines)]
        assert starts[0] == 0, f"README: a sample block does not start with {marker!r}: {lines[:3]}"
        for begin, end in zip(starts, starts[1:]):
            head, expected = lines[begin], lines[begin + 1 : end]
            if titled:
                assert head in sections, f"README: {head!r} is not a section that `make demo` prints"
                actual = [line for args in sections[head] for line in asr_output(args, env)]
            else:
                args = shlex.split(head[2:])
                assert args[1:2] and args[1] in READ_ONLY and not WRITES & set(args), f"README: {head!r}"
                actual = asr_output(args, env)
            assert missing_lines(expected, actual) == [], (head, actual)
            compared += 1
    return compared


@pytest.mark.parametrize("dag_file", ["transcribe_daily.py", "qa_audit_nightly.py", "retention.py"])
def test_dag_file_imports_nothing_heavy_at_parse_time(dag_file: str) -> None:
    code = (
        f"import runpy, sys; runpy.run_path('dags/{dag_file}');"
        f"print([m for m in {HEAVY!r} if m in sys.modules])"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]"


def test_dag_structure() -> None:
    code = """
import json, runpy
from datetime import timedelta
dag = runpy.run_path('dags/transcribe_daily.py')['transcribe_daily']()
tasks = {t.task_id: t for t in dag.tasks}
print(json.dumps({
    "schedule": str(dag.schedule) if hasattr(dag, "schedule") else None,
    "tasks": sorted(tasks),
    "pool": tasks["shard.transcribe"].pool,
    "queues": {name: task.queue for name, task in tasks.items()},
    "retries": sorted({t.retries for t in dag.tasks}),
    "backoff": all(t.retry_exponential_backoff for t in dag.tasks),
    "timeouts": sorted({t.execution_timeout.total_seconds() if t.execution_timeout else 0 for t in dag.tasks}),
    "upstream_of_index": sorted(tasks["index"].upstream_task_ids),
    "upstream_of_gate": sorted(tasks["shard.gate"].upstream_task_ids),
}))
"""
    proc = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    assert info["tasks"] == ["index", "plan_shards", "sense", "shard.gate", "shard.preprocess", "shard.transcribe",
                             "wait_for_recordings"]
    assert info["pool"] == "gpu"
    assert info["queues"]["shard.transcribe"] == "gpu" and info["queues"]["shard.preprocess"] == "default"
    assert info["queues"]["shard.gate"] == "default"  # the gate is a task of its own, retried as such
    assert info["retries"] == [3] and info["backoff"]
    assert info["timeouts"] == [21600.0]  # every task: a hung one fails and is retried
    assert info["upstream_of_index"] == ["shard.gate"]
    assert info["upstream_of_gate"] == ["shard.preprocess", "shard.transcribe"]


def test_audit_dag_runs_on_the_asset_that_transcription_updates() -> None:
    code = """
import json, runpy
audit = runpy.run_path('dags/qa_audit_nightly.py')['qa_audit_nightly']()
daily = runpy.run_path('dags/transcribe_daily.py')['transcribe_daily']()
index = next(t for t in daily.tasks if t.task_id == 'index')
print(json.dumps({
    "schedule": sorted(a.uri for a in audit.timetable.asset_condition.objects),
    "outlets": sorted(o.uri for o in index.outlets),
}))
"""
    proc = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    assert info["schedule"] == info["outlets"] == ["asr://transcripts/daily"]


def test_every_task_of_a_nightly_run_goes_ahead_of_every_backfill_task(tmp_path: Path) -> None:
    """As the scheduler weighs them: the DAG serialized and loaded back, its strategy found through the plugin.
    Inside a run the later stages go first (Airflow's upstream order): a shard ready for transcription is not
    held back behind the next shards' preprocessing."""
    code = """
import json
from airflow.dag_processing.dagbag import DagBag
from airflow.models.taskinstance import TaskInstance
from airflow.serialization.serialized_objects import DagSerialization
from airflow.task.priority_strategy import validate_and_load_priority_weight_strategy

upstream = validate_and_load_priority_weight_strategy("upstream")
out = {}
for dag_id, dag in DagBag("dags").dags.items():
    loaded = DagSerialization.from_dict(DagSerialization.to_dict(dag))
    runs = {"backfill": "backfill__2026-11-01T00:00:00+00:00", "scheduled": "scheduled__2026-11-30T00:00:00+00:00",
            "manual": "manual__2026-11-30T08:00:00+00:00", "asset": "asset_triggered__2026-11-30T03:00:00+00:00"}
    out[dag_id] = {kind: {t.task_id: t.weight_rule.get_weight(TaskInstance(task=t, run_id=run, map_index=-1,
                                                                           dag_version_id=None))
                          for t in loaded.tasks} for kind, run in runs.items()}
    out[dag_id]["upstream"] = {t.task_id: upstream.get_weight(TaskInstance(task=t, run_id="x", map_index=-1,
                                                                           dag_version_id=None))
                               for t in loaded.tasks}
print(json.dumps(out))
"""
    proc = run([sys.executable, "-c", code], airflow_env(tmp_path), timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    weights = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(weights) == {"transcribe_daily", "qa_audit_nightly", "retention"}
    for dag_id, kinds in weights.items():
        backfill = kinds.pop("backfill")
        order = sorted(backfill, key=backfill.__getitem__)
        assert order == sorted(kinds["upstream"], key=kinds["upstream"].__getitem__), dag_id  # Airflow's own
        for kind in ("scheduled", "manual", "asset"):
            assert min(kinds[kind].values()) > max(backfill.values()), (dag_id, kind)
            assert sorted(kinds[kind], key=kinds[kind].__getitem__) == order, (dag_id, kind)
    daily = weights["transcribe_daily"]["scheduled"]
    assert daily["wait_for_recordings"] < daily["shard.preprocess"] < daily["shard.transcribe"] < daily["index"]


@pytest.mark.e2e
def test_real_dag_run_over_a_synthetic_day(tmp_path: Path, model_dir: Path) -> None:
    env = {**airflow_env(tmp_path), "ASR_SHARD_MAX_RECORDINGS": "3"}  # 9 recordings: three shards
    asr, airflow = str(BIN / "asr"), str(BIN / "airflow")
    for step in (
        [airflow, "db", "migrate"],
        [airflow, "pools", "set", "gpu", "1", "ASR transcription"],
        [asr, "demo-corpus", "--date", DAY],
    ):
        proc = run(step, env)
        assert proc.returncode == 0, f"{step}: {proc.stdout[-2000:]}{proc.stderr[-2000:]}"

    proc = run([airflow, "dags", "test", "transcribe_daily", DAY], env)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-5000:]
    assert "state=success" in log
    shards = set(re.findall(r"task_id='shard\.transcribe'.*?map_index=(\d+)", log))
    assert shards == {"0", "1", "2"}

    status = json.loads(run([asr, "status", "--date", DAY, "--json"], env).stdout)
    states = {row["key"].rsplit("/", 1)[-1]: row["state"] for row in status["recordings"]}
    corrupt = next(r["recording_id"] for r in status["recordings"] if r["key"].endswith("call_0007.wav"))
    assert f"recording {corrupt} of {DAY}: quarantined: not a decodable media file" in log
    named = re.search(r"call_000\d|CU-55\d\d", log)  # task logs name recordings by id: no key, no party
    assert named is None, log[max(0, named.start() - 1500) : named.end() + 300]

    # XCom (any Airflow user who may see the DAG reads it) carries ids, states and counts: no key, no party.
    with sqlite3.connect(tmp_path / "airflow" / "airflow.db") as conn:
        xcom = " ".join(str(value) for (value,) in conn.execute("SELECT value FROM xcom"))
    assert "recording_id" in xcom and "call_0" not in xcom and "calls/" not in xcom
    assert not re.search(r"AG-\d|CU-\d|agent_id|customer_id|started_at|not a decodable", xcom)
    assert states == {
        "call_0001.wav": "indexed", "call_0002.wav": "indexed", "call_0003.mp3": "indexed",
        "call_0004.wav": "indexed", "call_0005_jfk.flac": "indexed",
        "call_0006.wav": "needs_review", "call_0007.wav": "quarantined", "call_0008.ogg": "indexed",
        "call_0009_zh.flac": "indexed",
    }

    hits = json.loads(run([asr, "search", "ask not what your country", "--json"], env).stdout)
    assert hits and hits[0]["key"].endswith("call_0005_jfk.flac")
    assert 0 <= hits[0]["start"] < hits[0]["end"] <= 11.1
    assert {"recording_id", "key", "speaker", "start", "end", "text", "highlight"} <= set(hits[0])
    text = " ".join(re.findall(r"[a-z]+", " ".join(h["text"] for h in hits).lower()))
    assert "ask not what your country can do for you" in text

    # The Mandarin call is found by its words, on its own and beside English ones in one query: the words the model
    # wrote (Whisper-base errs on a character or two of this clip, and which ones moves with the CPU's int8 kernels).
    mandarin = next(r["recording_id"] for r in status["recordings"] if r["key"].endswith("call_0009_zh.flac"))
    with sqlite3.connect(tmp_path / "index.sqlite") as conn:
        written = "".join(text for (text,) in conn.execute(
            "SELECT text FROM segments WHERE recording_id = ? ORDER BY start", (mandarin,)))
    runs = re.findall(r"[\u4e00-\u9fff]{3,}", written)
    assert runs and sum(map(len, runs)) >= 10, written  # Chinese characters, not a transliteration
    assert not set(written) & set("歡來體驗達識別語"), written  # the post-processing step t2s: simplified script
    word = max(runs, key=len)[1:4]
    zh = json.loads(run([asr, "search", word, "--json"], env).stdout)
    assert [h["key"].rsplit("/", 1)[-1] for h in zh] == ["call_0009_zh.flac"], (word, zh)
    assert word in zh[0]["text"] and 0 <= zh[0]["start"] < zh[0]["end"] <= 5.6
    both = json.loads(run([asr, "search", f'{word} | "ask not"', "--json"], env).stdout)
    assert {h["key"].rsplit("/", 1)[-1] for h in both} == {"call_0009_zh.flac", "call_0005_jfk.flac"}

    # The stereo call keeps both sides apart: the agent's words on channel 0, the customer's on 1.
    customer = json.loads(run([asr, "search", "minimum deposit", "--speaker", "customer", "--json"], env).stdout)
    assert [h["key"].rsplit("/", 1)[-1] for h in customer] == ["call_0001.wav"]
    assert json.loads(run([asr, "search", "calling Harbor Bank", "--speaker", "agent", "--json"], env).stdout)
    assert not json.loads(run([asr, "search", "calling Harbor Bank", "--speaker", "customer", "--json"], env).stdout)
    assert json.loads(run([asr, "search", "policy number", "--agent", "AG-1002", "--json"], env).stdout)

    # The nightly audit over the same day finds the planted violations and nothing else.
    proc = run([airflow, "dags", "test", "qa_audit_nightly", DAY], env)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-5000:]
    report = json.loads((tmp_path / "store" / "asr-artefacts" / "reports" / "qa" / DAY / "qa-audit.json").read_text())
    assert {(f["key"].rsplit("/", 1)[-1], f["rule_id"]) for f in report["findings"]} == {
        ("call_0001.wav", "promise-of-return"),
        ("call_0008.ogg", "promise-of-return"),
        ("call_0008.ogg", "card-number-read-out"),
        ("call_0008.ogg", "recording-disclosure"),
        ("call_0002.wav", "recording-disclosure"),
        ("call_0003.mp3", "recording-disclosure"),
        ("call_0004.wav", "recording-disclosure"),
        ("call_0005_jfk.flac", "recording-disclosure"),
        ("call_0009_zh.flac", "recording-disclosure"),
    }
    with sqlite3.connect(tmp_path / "airflow" / "airflow.db") as conn:
        (totals,) = [json.loads(value) for (value,) in conn.execute(
            "SELECT value FROM xcom WHERE dag_id = 'qa_audit_nightly' AND task_id = 'audit_days'")]
    (day_totals,) = totals if isinstance(totals, list) else json.loads(totals)
    assert day_totals["findings"] == day_totals["added"] == len(report["findings"]) and day_totals["removed"] == 0
    assert day_totals["by_tag"] == {"cancellation": 1} and day_totals["rule_set"] == report["summary"]["rule_set"]
    card = next(f for f in report["findings"] if f["rule_id"] == "card-number-read-out")
    assert card["speaker"] == "agent" and 15.0 < card["start"] < card["end"] <= 33.0  # said from ~17 s to ~31 s
    # Every audited call is scored on the scorecard; the call with three findings scores lowest.
    scored = json.loads(run([asr, "scores", "--date", DAY, "--json"], env).stdout)
    by_key = {c["key"].rsplit("/", 1)[-1]: c for c in scored["calls"]}
    assert scored["scorecard"]["id"] == "bank-call" and len(by_key) == 8  # all but the quarantined call
    assert by_key.pop("call_0006.wav")["score"] is None  # nothing was said in it: not scored
    assert by_key["call_0008.ogg"]["answers"]["no-card-read-out"] == "no"
    assert by_key["call_0001.wav"]["answers"]["no-promise-of-return"] == "no"
    assert all(0 <= c["score"] <= 100 for c in by_key.values())
    assert by_key["call_0008.ogg"]["score"] < min(c["score"] for k, c in by_key.items() if k != "call_0008.ogg")
    assert card["matched_text"].startswith("[CARD ****")  # found before masking, stored masked

    # What was said, where the model wrote it wrong: the Mandarin call's word with a character of the same sound,
    # and the English phrase misspelt, miss exactly and are found by a tolerant search (the words the model wrote,
    # so whatever the CPU's int8 kernels made of the clips).
    heard = homophone_of(word)
    exact = json.loads(run([asr, "search", heard, "--json"], env).stdout)
    assert not any(h["key"].endswith("call_0009_zh.flac") for h in exact), (heard, exact)
    alike = json.loads(run([asr, "search", heard, "--sounds-like", "--json"], env).stdout)
    assert {(h["key"].rsplit("/", 1)[-1], h["match"]) for h in alike} == {("call_0009_zh.flac", "sound")}, heard
    fuzzy = json.loads(run([asr, "search", '~"ask knot what your cuntry"', "--json"], env).stdout)
    assert [(h["key"].rsplit("/", 1)[-1], h["match"]) for h in fuzzy][:1] == [("call_0005_jfk.flac", "fuzzy")]
    # Saved, the same search runs with the day's audit: its hit is a finding of its own rule.
    proc = run([asr, "watch", "add", "said", heard, "--sounds-like", "--severity", "low"], env)
    assert proc.returncode == 0, proc.stderr
    rerun = json.loads(run([asr, "audit", "--date", DAY, "--rerun", "--json"], env).stdout)
    assert {(f["key"].rsplit("/", 1)[-1], f["rule_id"], f["severity"]) for f in rerun["findings"]
            if f["rule_id"].startswith("watch:")} == {("call_0009_zh.flac", f"watch:{getpass.getuser()}/said", "low")}
    assert run([asr, "watch", "remove", "said"], env).returncode == 0
    assert run([asr, "audit", "--date", DAY, "--rerun"], env).returncode == 0  # the day's audit as the DAG left it

    # The README's sample output is this day's: make demo's sections and its console blocks.
    assert check_readme_sample_output(env) >= 4

    # No card number in clear anywhere: artefacts, reports, the index, the ledger, the logs (ids, hashes, times aside).
    stored = StoredText()
    stored.add_store(tmp_path / "store" / "asr-artefacts")
    for path in (tmp_path / "store" / "asr-artefacts").rglob("*.json"):  # the words, as the model said them
        if isinstance(transcript := json.loads(path.read_text()), dict) and "segments" in transcript:
            stored.add_text(f"{path}: words", "\n".join("".join(w["text"] for w in seg["words"])
                                                         for seg in transcript["segments"]))
    assert any(where.endswith(": words") and "[CARD ****" in text
               for where, texts in stored.texts.items() for text in texts)
    stored.add_sqlite(tmp_path / "index.sqlite", ("segments", "recordings", "findings"))
    stored.add_sqlite(tmp_path / "ledger.sqlite", ("recording_ledger",))
    assert any(len(v) == 32 for v in stored.ids)  # the ETags are known as hashes, whatever digits they hold
    stored.add_free_text("the DAG's log", log)
    assert stored.clear_numbers() == {}

    # The page plays a rendition of the card call that is silent over the card number and unchanged elsewhere.
    rid = next(r["recording_id"] for r in status["recordings"] if r["key"].endswith("call_0008.ogg"))
    prefix = tmp_path / "store" / "asr-artefacts" / f"v{PIPELINE_VERSION}" / DAY / rid
    found = json.loads(next(prefix.glob("gated.*.json")).read_text())["pii"]
    assert sorted((d["kind"], d["speaker"]) for d in found) == [("bank_account", "agent"), ("card", "agent"),
                                                                ("phone", "customer")]
    spans = [(a - 0.25, b + 0.25) for d in found for a, b in d["parts"]]
    # word times: the silence covers the number, not its whole sentence ("Let me read back your card number, ...");
    # read back in two goes, it is silent over each half and not over the pause between them
    card_span = next(d for d in found if d["kind"] == "card")
    assert card_span["start"] > 18.0 and len(card_span["parts"]) == 2, card_span
    assert all(b - a < 6.0 for a, b in card_span["parts"]) and card_span["parts"][1][0] - card_span["parts"][0][1] > 3
    original, redacted = (samples(path) for path in (tmp_path / "store" / "recordings" / "calls/2026/11/27/call_0008.ogg",
                                                      prefix / "redacted.flac"))
    rate = int(json.loads(run(["ffprobe", "-v", "error", "-show_entries", "stream=sample_rate", "-of", "json",
                               str(prefix / "redacted.flac")], env).stdout)["streams"][0]["sample_rate"])
    inside, outside = np.zeros(len(original), dtype=bool), np.ones(len(original), dtype=bool)
    for a, b in spans:
        lo, hi = int(max(0.0, a) * rate), int(b * rate)
        inside[lo + 1 : hi - 1] = True
        outside[max(0, lo - 1) : hi + 1] = False
    assert spans and len(redacted) == len(original)
    assert not redacted[inside].any() and original[inside].any(), np.flatnonzero(redacted[inside])[:5]
    # and the rest as it was: the Opus call decodes to floats, which FLAC keeps as 16-bit, so within one step
    difference = np.abs(redacted[outside].astype(np.int32) - original[outside].astype(np.int32))
    assert difference.max() <= 1
    # Transcribed again, the rendition says neither the card nor the phone number (nor the account).
    proc = run([asr, "transcribe", str(prefix / "redacted.flac"), "--json"], {**env, "ASR_REDACT_PII": "false"})
    heard = " ".join(s["text"] for s in json.loads(proc.stdout)[0]["segments"])
    assert "correct" in heard and not re.search(r"\d(?:\W{0,2}\d){2}", heard), heard
    assert not (prefix.parent / next(r["recording_id"] for r in status["recordings"]
                                     if r["key"].endswith("call_0005_jfk.flac")) / "redacted.flac").exists()

    # Running the day again indexes nothing twice.
    before = json.loads(run([asr, "status", "--json"], env).stdout)
    proc = run([airflow, "dags", "test", "transcribe_daily", DAY], env)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-5000:]
    after = json.loads(run([asr, "status", "--json"], env).stdout)
    assert [(r["recording_id"], r["segments"]) for r in after["recordings"]] == [
        (r["recording_id"], r["segments"]) for r in before["recordings"]
    ]
    again = json.loads(run([asr, "search", "ask not what your country", "--json"], env).stdout)
    assert [(h["recording_id"], h["start"]) for h in again] == [(h["recording_id"], h["start"]) for h in hits]

    # A day without recordings (a holiday in a backfill) has no shards and still ends indexed.
    proc = run([airflow, "dags", "test", "transcribe_daily", "2026-11-26"], env)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "state=success" in log, log[-5000:]
    assert "Returned value was: {}" in log  # the index step: nothing to count

    # The call page of the stereo call in a real browser, then records management on the day's output.
    call_page_in_a_browser(tmp_path, env, status)
    records_management(tmp_path, env, status)


def call_page_in_a_browser(tmp_path: Path, env: dict[str, str], status: dict[str, Any]) -> None:
    """Every segment in order with both speakers; a click on a turn seeks there; playing moves the highlight."""
    from browser import Browser
    from services import free_port

    rid = next(r["recording_id"] for r in status["recordings"] if r["key"].endswith("call_0001.wav"))
    with sqlite3.connect(tmp_path / "index.sqlite") as conn:
        said = [(round(start, 3), speaker) for start, speaker in conn.execute(
            "SELECT start, speaker FROM segments WHERE recording_id = ? ORDER BY start, channel", (rid,))]
    port = free_port()
    ui = subprocess.Popen([str(BIN / "asr"), "ui", "--port", str(port)], env=env, cwd=PROJECT_ROOT,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    browser = Browser(tmp_path / "chromium-profile")
    try:
        assert ui.stdout is not None
        address = re.search(r"http://\S+/\?token=\S+", ui.stdout.readline())  # for whoever holds its token
        assert address
        url = f"http://127.0.0.1:{port}/call/{rid}"
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(url, timeout=5).close()
                break
            except urllib.error.HTTPError as exc:
                assert exc.code == 401, exc.code  # up, and the page is not ours without the token
                break
            except OSError:
                assert time.monotonic() < deadline and ui.poll() is None, "asr ui did not come up"
                time.sleep(0.2)
        browser.send("Page.enable")
        browser.send("Page.navigate", url=address.group())  # the browser holds the token's cookie from now on
        browser.wait_for("document.readyState === 'complete' && !!document.getElementById('search')")
        browser.send("Page.navigate", url=url)
        browser.wait_for("document.readyState === 'complete' && document.querySelectorAll('.seg').length > 0")
        shown = browser.js("Array.from(document.querySelectorAll('.seg')).map(s => [parseFloat(s.dataset.start),"
                           " s.closest('.turn').classList[1]])")
        assert [(round(a, 3), who) for a, who in shown] == said  # every segment, in the order said
        assert {who for _, who in said} == {"agent", "customer"}
        second = browser.js("parseFloat(document.querySelectorAll('.turn')[1].dataset.start)")
        browser.click(".turn:nth-of-type(2) .who")
        browser.wait_for(f"Math.abs(document.getElementById('player').currentTime - {second}) < 0.3")
        half = browser.js("(() => { const b = document.getElementById('timeline').getBoundingClientRect();"
                          " return [b.x + b.width * (70 + 465) / 1000, b.y + 10]; })()")  # the axis' middle
        for kind in ("mousePressed", "mouseReleased"):
            browser.send("Input.dispatchMouseEvent", type=kind, x=half[0], y=half[1], button="left", clickCount=1)
        browser.wait_for("(() => { const p = document.getElementById('player');"
                         " return Math.abs(p.currentTime - p.duration / 2) < 0.5; })()")  # the timeline seeks
        browser.js("document.getElementById('player').currentTime = 0; document.getElementById('player').play()")
        first = browser.wait_for("document.querySelector('.seg.current') && document.querySelector('.seg.current')"
                                 ".dataset.start")
        later = browser.wait_for(f"(() => {{ const c = document.querySelector('.seg.current');"
                                 f" return c && c.dataset.start !== '{first}' && c.dataset.start; }})()", timeout=60)
        assert float(later) > float(first)  # the highlight follows the playback
        browser.js("document.getElementById('player').pause()")
        shot = browser.send("Page.captureScreenshot", format="png")
        artefacts = PROJECT_ROOT / "var" / "test-artefacts"
        artefacts.mkdir(parents=True, exist_ok=True)
        (artefacts / "call-page-stereo.png").write_bytes(base64.b64decode(shot["data"]))

        # The operator's page for the day: its month's bar full, the day's detail a click away.
        browser.send("Page.navigate", url=f"http://127.0.0.1:{port}/progress?date_from={DAY}&date_to={DAY}")
        browser.wait_for("document.readyState === 'complete' && !!document.querySelector('tr.year')")
        assert browser.js("document.querySelector('tr.year td:nth-child(2)').innerText") == "100 %"
        assert browser.js("document.querySelectorAll('svg .col').length") == 48
        shot = browser.send("Page.captureScreenshot", format="png")
        (artefacts / "progress-page.png").write_bytes(base64.b64decode(shot["data"]))
        qa_day_in_a_browser(browser, port, env, status)
    finally:
        browser.close()
        ui.terminate()
        ui.wait(timeout=30)


def qa_day_in_a_browser(browser: Any, port: int, env: dict[str, str], status: dict[str, Any]) -> None:
    """A reviewer dismisses a finding with a reason on the day's queue; the queue, the rule's counts and the
    access log show it; the call page shows the scorecard's score as ``asr scores`` prints it; the trends."""
    artefacts, base = PROJECT_ROOT / "var" / "test-artefacts", f"http://127.0.0.1:{port}"

    def shot(name: str) -> None:
        (artefacts / name).write_bytes(base64.b64decode(browser.send("Page.captureScreenshot", format="png")["data"]))

    browser.send("Page.navigate", url=f"{base}/reviews?date={DAY}")
    browser.wait_for("document.readyState === 'complete' && document.querySelectorAll('form.verdict').length > 0")
    finding, rule = browser.js("(() => { const f = document.querySelector('form.verdict');"
                               " return [f.dataset.finding, f.closest('tr').children[2].innerText]; })()")
    browser.js(f"(() => {{ const f = document.querySelector('form.verdict[data-finding=\"{finding}\"]');"
               " f.querySelector('[name=status]').value = 'dismissed';"
               " f.querySelector('[name=reason]').value = 'other-party';"
               " f.querySelector('[name=comment]').value = 'the customer said it';"
               " f.querySelector('button').click(); })()")
    browser.wait_for(f"document.readyState === 'complete' && document.querySelectorAll('form.verdict').length > 0"
                     f" && !document.querySelector('form.verdict[data-finding=\"{finding}\"]')")  # reloaded
    browser.send("Page.navigate", url=f"{base}/reviews?date={DAY}&status=dismissed")
    browser.wait_for("document.readyState === 'complete' && !!document.querySelector('h2')")
    row = browser.js(f"document.querySelector('form.verdict[data-finding=\"{finding}\"]').closest('tr').innerText")
    assert "dismissed" in row and "said by the other party, or quoted" in row and "the customer said it" in row
    counts = browser.js("Array.from(document.querySelectorAll('tbody')).pop().innerText")
    assert any(line.split("\t")[0] == rule and line.split("\t")[4] == "1" for line in counts.splitlines()), counts
    shot("reviews-page.png")
    browser.send("Page.navigate", url=f"{base}/access-log?days=1")
    browser.wait_for("document.readyState === 'complete' && !!document.querySelector('table')")
    assert f"finding {finding} of {rule}: dismissed (other-party)" in browser.js("document.body.innerText")

    rid = next(r["recording_id"] for r in status["recordings"] if r["key"].endswith("call_0008.ogg"))
    scored = json.loads(run([str(BIN / "asr"), "scores", "--date", DAY, "--json"], env).stdout)
    score = next(c["score"] for c in scored["calls"] if c["recording_id"] == rid)
    browser.send("Page.navigate", url=f"{base}/call/{rid}")
    browser.wait_for("document.readyState === 'complete' && !!document.querySelector('#scorecard .score')")
    assert float(browser.js("document.querySelector('#scorecard .score').innerText")) == score
    browser.send("Emulation.setDeviceMetricsOverride", width=1280, height=1600, deviceScaleFactor=1, mobile=False)
    shot("call-page-scorecard.png")  # the whole form beside the conversation
    browser.send("Page.navigate", url=f"{base}/trends?date_to={DAY}&by=agent")
    browser.wait_for("document.readyState === 'complete' && document.querySelectorAll('svg.trend rect.col').length > 0")
    shot("trends-page.png")


def traces(tmp_path: Path, rid: str, key: str, *said: str) -> list[str]:
    """Where a recording still shows, byte for byte, in any file of any store: its key and what was said in it
    or about it (words, the sidecar's customer) anywhere (artefacts, reports, source, the index's and the
    ledger's SQLite files with their write-ahead logs, Airflow's metadata database and task logs); its id
    anywhere but where an id is all that is left (the ledger's tombstone and access log, Airflow's XCom and
    logs). The browser's profile is the user's, not a store."""
    found = []
    for path in sorted(tmp_path.rglob("*")):
        if not path.is_file() or "chromium-profile" in path.parts:
            continue
        data, where = path.read_bytes(), str(path.relative_to(tmp_path))
        ids_only = path.name.startswith("ledger.sqlite") or where.startswith("airflow/")
        for needle in (key, *said, *(() if ids_only else (rid,))):
            if needle.encode() in data or (not ids_only and rid in where):
                found.append(f"{where}: {needle if needle.encode() in data else rid}")
    return found


def confirmed_erasure(asr: str, args: list[str], env: dict[str, str]) -> list[str]:
    """``asr erase ARGS``'s first step, which erases nothing, and the command it prints to erase exactly that."""
    plan = run([asr, "erase", *args], env)
    assert plan.returncode == 0 and "nothing is erased yet" in plan.stdout, plan.stdout + plan.stderr
    command = shlex.split(plan.stdout.splitlines()[-1])
    assert command[:-2] == ["asr", "erase", *args] and command[-2] == "--confirm", command
    return [asr, *command[1:]]


def records_management(tmp_path: Path, env: dict[str, str], status: dict[str, Any]) -> None:
    asr, airflow = str(BIN / "asr"), str(BIN / "airflow")
    ids = {r["key"].rsplit("/", 1)[-1]: r["recording_id"] for r in status["recordings"]}
    keys = {r["key"].rsplit("/", 1)[-1]: r["key"] for r in status["recordings"]}
    held, erased = "call_0005_jfk.flac", "call_0001.wav"
    said = ("minimum deposit", "CU-5501")  # the customer's words, and the sidecar's customer
    before = traces(tmp_path, ids[erased], keys[erased], *said)
    assert {w.split("/")[0].split(".")[0] for w in before} >= {"store", "index", "ledger"}, before  # everywhere

    proc = run([asr, "hold", "--key", keys[held], "--why", "litigation 2026-17"], env)
    assert proc.returncode == 0 and "legal hold 1" in proc.stdout, proc.stderr
    proc = run(confirmed_erasure(asr, ["--key", keys[erased], "--reason", "customer-request"], env), env)
    assert proc.returncode == 0 and f"erased   {keys[erased]}" in proc.stdout, proc.stderr
    assert traces(tmp_path, ids[erased], keys[erased], *said) == []  # no store keeps a byte of it
    # The searches that found the call (the README's, the page's) are sealed for good; the chain still holds.
    log_text = run([asr, "access-log", "--json"], env).stdout
    assert "(sealed: the call was erased)" in log_text and not [w for w in said if w in log_text], log_text[-3000:]
    proc = run([asr, "access-log", "--verify"], env)
    assert proc.returncode == 0 and "the chain holds" in proc.stdout, proc.stdout + proc.stderr
    minimum = json.loads(run([asr, "search", "minimum deposit", "--json"], env).stdout)
    assert minimum == []  # call_0001's words are no longer found
    proc = run(confirmed_erasure(asr, ["--key", keys[held], "--reason", "mistaken-upload"], env), env)
    assert proc.returncode == 1 and "legal hold 1 on key" in proc.stdout  # held: left alone, the hold named
    report = json.loads((tmp_path / "store" / "asr-artefacts" / "reports" / "qa" / DAY / "qa-audit.json").read_text())
    assert erased not in json.dumps(report) and any(held in f["key"] for f in report["findings"])

    # SIGKILL while the whole day is erased; the rerun finishes it and touches nothing else.
    held_files = {p: p.read_bytes() for p in (tmp_path / "store").rglob("*") if p.is_file() and ids[held] in str(p)}
    day_erase = ["--before", "2026-11-28", "--reason", "legal-order"]
    proc = subprocess.Popen(confirmed_erasure(asr, day_erase, env), env=env, cwd=PROJECT_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        with sqlite3.connect(tmp_path / "ledger.sqlite") as conn:
            started = conn.execute("SELECT count(*) FROM recording_ledger WHERE state IN ('erasing', 'erased')"
                                   " AND recording_id != ?", (ids[erased],)).fetchone()[0]
        if started:
            proc.kill()
            break
        time.sleep(0.005)
    proc.wait(timeout=60)
    assert proc.returncode == -9, "the erasure ended before it could be killed"
    with sqlite3.connect(tmp_path / "ledger.sqlite") as conn:
        states = dict(conn.execute("SELECT recording_id, state FROM recording_ledger WHERE recording_id != ?",
                                   (ids[held],)).fetchall())
    assert set(states.values()) - {"erased"}, states  # cut short: some not erased yet
    proc = run(confirmed_erasure(asr, day_erase, env), env)  # planned again: part of it is gone already
    assert proc.returncode == 1 and "legal hold 1" in proc.stdout, proc.stdout + proc.stderr
    for name, rid in ids.items():
        if name != held:
            assert traces(tmp_path, rid, keys[name], "CU-55") == [], name  # no customer of the day is left
    assert {p: p.read_bytes() for p in (tmp_path / "store").rglob("*")
            if p.is_file() and ids[held] in str(p)} == held_files  # the held call untouched
    rows = json.loads(run([asr, "status", "--json"], env).stdout)["recordings"]
    assert {r["recording_id"]: r["state"] for r in rows if r["recording_id"] != ids[held]} == {
        rid: "erased" for n, rid in ids.items() if n != held}
    assert {r["reason"] for r in rows if r["state"] == "erased"} == {"customer-request", "legal-order"}
    assert {r["key"] for r in rows if r["state"] == "erased"} == {f"erased/{r['recording_id']}" for r in rows
                                                                   if r["state"] == "erased"}  # no key kept

    # A run triggered for a day in the future erases nothing early: retention counts to today at most.
    retention = {**env, "ASR_RETENTION_DAYS": json.dumps({"recordings/calls/": 3650})}
    proc = run([airflow, "dags", "test", "retention", "2036-12-01"], retention)
    assert proc.returncode == 0 and "'erased': 0, 'held': 0" in proc.stdout + proc.stderr, proc.stderr[-3000:]
    # The retention DAG keeps the held call; released, the next run erases it.
    retention = {**env, "ASR_RETENTION_DAYS": json.dumps({"recordings/calls/": 1})}
    proc = run([airflow, "dags", "test", "retention", "2026-11-30"], retention)
    assert proc.returncode == 0 and "'erased': 0, 'held': 1" in proc.stdout + proc.stderr, proc.stderr[-3000:]
    assert run([asr, "release", "1", "--why", "case closed"], env).returncode == 0
    proc = run([airflow, "dags", "test", "retention", "2026-12-01"], retention)
    assert proc.returncode == 0 and "'erased': 1, 'held': 0" in proc.stdout + proc.stderr, proc.stderr[-3000:]
    assert traces(tmp_path, ids[held], keys[held], "ask not what your country") == []
    log = json.loads(run([asr, "access-log", "--json"], env).stdout)
    assert [e["action"] for e in log if e["action"] in ("hold", "release")] == ["hold", "release"]
    assert {e["user"] for e in log if e["action"] == "erase"} == {getpass.getuser(), "retention"}
