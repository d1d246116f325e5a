"""Every script in bench/ runs in its quick mode: it ends, and prints the JSON keys its docstring lists.

``--quick`` only makes the inputs small (fewer calls, rows, segments, runs), so
these runs go through the code each benchmark measures; the figures themselves
are only checked for being plausible.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from asr_tasks.config import PROJECT_ROOT

BENCH = PROJECT_ROOT / "bench"
Report = dict[str, Any]


def bench(script: str, *args: str, timeout: int = 180) -> Report:
    """``bench/<script> <args> --json`` in a child process of this interpreter; the JSON it printed last."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "ASR_"))}
    env.update({"HF_HUB_OFFLINE": "1", "PYTHONWARNINGS": "ignore"})
    proc = subprocess.run([sys.executable, str(BENCH / script), *args, "--json"], cwd=PROJECT_ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{script} ended {proc.returncode}:\n{proc.stderr[-3000:]}"
    start = proc.stdout.find("{")  # print_report's JSON, after whatever a library printed first
    assert start >= 0, proc.stdout[-2000:]
    report = json.loads(proc.stdout[start:])
    assert isinstance(report, dict)
    return report


def positive(*values: Any) -> bool:
    return all(isinstance(v, (int, float)) and v > 0 for v in values)


def check_asr_engines(r: Report) -> None:
    assert r["corpus"]["calls"] == sum(b["calls"] for b in r["blocks"]) > 0
    assert len(r["blocks"]) == 2 and [s["batch_size"] for s in r["batch_size_sweep"]] == [4]
    assert positive(r["naive_audio_s_per_wall_s"], r["batched_audio_s_per_wall_s"], r["batched_over_naive"],
                    r["batched_over_naive_total"], r["batch_size_sweep"][0]["audio_s_per_wall_s"])
    assert 0 <= r["wer_naive"] < 1 and 0 <= r["wer_batched"] < 1


def check_call_page(r: Report) -> None:
    assert r["call_segments"] == 200 and r["export_hits"] == 1000
    assert positive(r["call_page_ms_median"], r["call_page_ms_first"], r["call_page_kb"])
    assert set(r["export"]) == {"csv", "json"} and all(positive(e["wall_s"], e["mb"]) for e in r["export"].values())


def check_listing(r: Report) -> None:
    assert r["objects_under_prefix"] == 300
    assert positive(r["fill_seconds"], r["fill_objects_per_second"], r["list_keys_seconds"],
                    r["list_with_etags_seconds"], r["sensor_poke_quiet_seconds"])
    assert r["quiet_poke_http_requests"] and r["marker_poke_http_requests"]


def check_pii(r: Report) -> None:
    assert r["calls"] == 8 and positive(r["audio_s"])
    held = {"card", "card_security", "phone", "bank_account", "email", "one_time_code", "prc_id"}  # one call each
    for kinds in (r["kinds"], r["kinds_without_context"]):  # both runs score the same calls
        assert {kind for kind, k in kinds.items() if k["tp"] + k["fn"]} == held
        assert all(k["tp"] + k["fn"] <= 1 and 0 <= k["recall"] <= 1 and 0 <= k["precision"] <= 1
                   for k in kinds.values())
    assert isinstance(r["by_context"], int) and r["by_context"] >= 0
    assert r["masking_s_per_audio_hour"] >= 0 and r["silenced_s_word_times"] >= 0
    assert isinstance(r["misses"], list)


def check_pipeline(r: Report) -> None:
    assert r["day"]["recordings"] == 5 and r["day"]["short_calls"] == 4 and r["day"]["long_calls"] == 1
    assert positive(r["day"]["audio_s"], r["day"]["chunks"], r["pipeline"]["wall_s"], r["pipeline"]["task_instances"],
                    r["engine_alone"]["audio_s_per_wall_s"], r["pipeline_over_engine"], r["pipeline_over_naive"])
    assert r["naive"]["files"] == 1 and 0 <= r["wer_pipeline"] < 1 and 0 <= r["wer_naive"] < 1


def check_preprocess(r: Report) -> None:
    assert set(r) == {"short_calls", "source", "60s"}
    short = r["short_calls"]
    assert short["calls"] == 4 and 8 < short["audio_seconds"] < 60
    assert positive(short["wall_seconds"], short["cpu_seconds"], short["audio_s_per_wall_s"],
                    short["audio_s_per_cpu_s"], short["ms_per_call"])
    run = r["60s"]
    assert abs(run["audio_seconds"] - 60) < 1 and run["channels"] == ["agent", "customer"]
    assert positive(run["wall_seconds"], run["audio_s_per_wall_s"], run["peak_rss_mb"], run["chunks"],
                    run["speech_seconds"])


def check_progress_ledger(r: Report) -> None:
    assert r["rows"] == r["recordings"] == 20_000  # every row's day lies in the ten years asked for
    assert r["periods_by_month"] == 120 and r["failure_groups"] > 0
    assert positive(r["progress_by_month_s"], r["progress_by_day_s"], r["asr_progress_cli_s"])


def check_quality_gate(r: Report) -> None:
    assert r["clean"] > 0 and r["bad"] > 0 and r["expectations"] and r["thresholds"]
    assert 0 <= r["clean_flagged"] <= 1 and 0 <= r["bad_missed"] <= 1 and isinstance(r["missed"], list)


def check_qa_rules(r: Report) -> None:
    assert r["text"]["calls"] > 40 and r["spoken"]["calls"] == 2 and positive(r["audio_s"], r["audit_s_per_call_hour"])
    for part in ("text", "spoken"):
        assert {"overall", "promise-of-return", "complaint"} <= set(r[part]["rules"])
        assert all(0 <= s["precision"] <= 1 and 0 <= s["recall"] <= 1 for s in r[part]["rules"].values())


def check_retention(r: Report) -> None:
    assert r["recordings"] == 20 and r["held"] == 5
    assert sum(r["ledger_states_after"].values()) == 20 and positive(r["retention_dag_wall_s"])
    assert r["objects_left"] > 0  # the held recordings' objects, and only theirs (the script checks)


def check_search(r: Report) -> None:
    assert r["backend"] == "sqlite" and r["segments"] == 20_000
    exact, tolerant = r["matches"]["exact"], r["matches"]["tolerant"]
    assert positive(r["index_mb"], r["build_seconds"], r["segments_per_second"], *exact.values())
    assert exact.keys() == tolerant.keys() and all(tolerant[q] >= exact[q] for q in exact)
    assert tolerant["收益"] > exact["收益"]  # the misheard 手益 too
    assert len(r["latency"]) == 11 and all(positive(t["p50_ms"], t["max_ms"]) for t in r["latency"].values())


def check_spot_check(r: Report) -> None:
    assert r["calls"] == 2 and r["rounds"] == 1 and len(r["bare_runs_s"]) == len(r["spot_check_runs_s"]) == 1
    assert positive(r["audio_s"], r["bare_engine_wall_s"], r["spot_check_wall_s"], r["spot_check_over_bare"])
    assert 0 <= r["wer_bare"] < 1 and 0 <= r["wer_spot_check"] < 1


def check_token_rates(r: Report) -> None:
    for language in ("zh", "en"):
        assert r[language]["chunks"] > 0 and r[language]["max"] >= r[language]["median"] > 0
    assert positive(r["configured"]["max_tokens_per_second"])


def check_layout(r: Report) -> None:
    assert r["modules"] > 50 and r["imports"] > r["modules"] and r["layers"] > 3
    assert r["cycles"] == [] and r["upward_imports"] == [] and r["functions_over_80_lines"] == 0


def check_qa_month(r: Report) -> None:
    assert (r["agents"], r["days"]) == (10, 3) and r["calls"] == 10 * 3 * 4 and r["findings"] > 0
    assert set(r["pages"]) == {"queue_month_open", "queue_month_one_team", "trends_month_by_team",
                               "trends_month_by_agent"}
    assert all(positive(p["p50_ms"], p["p95_ms"], p["kb"]) and p["p95_ms"] >= p["p50_ms"] for p in r["pages"].values())
    assert r["exports"]["findings_csv"]["rows"] == r["exports"]["findings_parquet"]["rows"] == r["findings"]
    assert r["exports"]["scores_parquet"]["rows"] == r["calls"] * 13  # a row per call and question


def check_transcribe(r: Report) -> None:
    assert r["recordings"] >= r["transcribed"] > 0
    assert positive(r["audio_seconds"], r["speech_seconds"], r["preprocess_audio_s_per_wall_s"],
                    r["transcribe_audio_s_per_wall_s"], r["model_load_wall_s"], r["peak_rss_mib"])


def check_scale(r: Report) -> None:
    assert set(r["day"]) == {"4", "12"}
    for size, day in r["day"].items():
        assert day["calls"] == int(size) and day["spoken"] == int(size) // 4
        assert {"sense", "plan_shards", "shard.preprocess", "shard.transcribe", "shard.gate", "index"} <= set(day["tasks"])
        assert positive(day["wall_s"], day["task_s"], day["engine_s"], day["preprocess_s"], day["orchestration_s"])
        assert day["task_s"] > day["engine_s"] + day["preprocess_s"] and positive(day["preprocess_work_s"])
    assert positive(r["growth"])
    assert r["year"]["days"] == 2 and r["year"]["task_instances_per_day"] >= 7
    assert positive(r["year"]["wall_s_per_day"], r["year"]["pipeline_work_s_per_day"], r["year"]["ten_years_wall_h"])
    sqlite = r["archive"]["sqlite"]
    assert sqlite["segments"] == 5000 and "elasticsearch" not in r["archive"]
    assert positive(sqlite["index_mb_per_audio_hour"], sqlite["segments_per_second"])


def check_access_log(r: Report) -> None:
    assert r["rows"] == 200
    for backend in ("sqlite", "postgresql"):
        b = r[backend]
        assert b["intact"] is True
        assert positive(b["chained_ms_per_append"], b["plain_ms_per_append"], b["four_processes_rows_per_s"],
                        b["verify_rows_per_s"])


CASES: dict[str, tuple[str | None, Callable[[Report], None]]] = {  # script: (a test server it needs, checks)
    "access_log.py": ("postgres_server", check_access_log),
    "asr_engines.py": (None, check_asr_engines),
    "call_page.py": (None, check_call_page),
    "layout.py": (None, check_layout),
    "listing.py": ("minio_server", check_listing),
    "pii.py": (None, check_pii),
    "pipeline.py": (None, check_pipeline),
    "preprocess.py": (None, check_preprocess),
    "progress_ledger.py": ("postgres_server", check_progress_ledger),
    "qa_month.py": (None, check_qa_month),
    "qa_rules.py": (None, check_qa_rules),
    "quality_gate.py": (None, check_quality_gate),
    "retention.py": (None, check_retention),
    "scale.py": (None, check_scale),
    "search.py": (None, check_search),
    "spot_check.py": (None, check_spot_check),
    "token_rates.py": (None, check_token_rates),
    "transcribe.py": (None, check_transcribe),
}
DOCUMENTED = {  # the top-level keys each script's docstring lists
    "access_log.py": {"rows", "sqlite", "postgresql"},
    "asr_engines.py": {"corpus", "engine", "model_load_s", "naive_audio_s_per_wall_s", "batched_audio_s_per_wall_s",
                       "batched_over_naive", "batched_over_naive_total", "wer_naive", "wer_batched", "packing",
                       "blocks", "batch_size_sweep"},
    "call_page.py": {"call_segments", "call_page_ms_median", "call_page_ms_first", "call_page_kb", "export_hits",
                     "export"},
    "layout.py": {"modules", "packages", "imports", "layers", "cycles", "upward_imports", "longest_function",
                  "functions_over_80_lines", "longest_module"},
    "listing.py": {"server", "objects_under_prefix", "fill_seconds", "fill_objects_per_second", "list_keys_seconds",
                   "list_with_etags_seconds", "sensor_poke_quiet_seconds", "sensor_poke_marker_missing_seconds",
                   "sensor_poke_marker_present_seconds", "client_cpu_seconds", "quiet_poke_http_requests",
                   "marker_poke_http_requests", "measured_at"},
    "pii.py": {"calls", "audio_s", "kinds", "kinds_without_context", "by_context", "masking_s_per_audio_hour",
               "redacted_audio_s_per_audio_hour", "silenced_s_word_times", "silenced_s_whole_segments", "misses"},
    "pipeline.py": {"machine", "day", "engine", "pipeline", "packing_in_the_dag", "engine_alone", "naive",
                    "pipeline_over_engine", "pipeline_over_naive", "wer_pipeline", "wer_pipeline_on_naive_files",
                    "wer_naive"},
    "preprocess.py": {"short_calls", "source"},
    "progress_ledger.py": {"rows", "fill_s", "progress_by_month_s", "periods_by_month", "progress_by_day_s",
                           "periods_by_day", "asr_progress_cli_s", "recordings", "failure_groups", "eta_hours"},
    "qa_month.py": {"agents", "days", "calls", "findings", "reviews", "build_s", "pages", "exports"},
    "qa_rules.py": {"rule_set", "text", "spoken", "audio_s", "audit_s_per_call_hour"},
    "quality_gate.py": {"clean", "bad", "clean_flagged", "bad_missed", "missed", "expectations", "thresholds"},
    "retention.py": {"recordings", "held", "fill_s", "retention_dag_wall_s", "ms_per_recording_erased",
                     "ledger_states_after", "objects_left"},
    "scale.py": {"machine", "day", "growth", "year", "archive"},
    "search.py": {"backend", "segments", "index_mb", "build_seconds", "segments_per_second", "matches", "latency"},
    "spot_check.py": {"calls", "audio_s", "engine", "rounds", "bare_engine_wall_s", "spot_check_wall_s",
                      "spot_check_over_bare", "bare_runs_s", "spot_check_runs_s", "wer_bare", "wer_spot_check"},
    "token_rates.py": {"zh", "en", "configured"},
    "transcribe.py": {"recordings", "transcribed", "audio_seconds", "channel_audio_seconds", "speech_seconds",
                      "preprocess_wall_s", "model_load_wall_s", "transcribe_wall_s", "index_wall_s",
                      "preprocess_audio_s_per_wall_s", "transcribe_audio_s_per_wall_s",
                      "transcribe_speech_s_per_wall_s", "peak_rss_mib", "engine"},
}


def test_every_script_is_covered() -> None:
    scripts = {p.name for p in BENCH.glob("*.py")} - {"synthetic.py", "scheduler.py"}  # the benchmarks' helpers
    assert scripts == {*CASES, "gpu.py"} and set(CASES) == set(DOCUMENTED)
    for script in scripts:
        doc = (BENCH / script).read_text()
        assert "--quick" in doc.split('"""')[1], f"{script}: --quick is not in its docstring"


def test_every_script_is_in_the_code_map() -> None:
    """docs/code.md says what each script measures: one added without a line there is not found by the reader."""
    code_map = (PROJECT_ROOT / "docs" / "code.md").read_text()
    missing = sorted(p.name for p in BENCH.glob("*.py") if f"`{p.name}`" not in code_map)
    assert not missing, f"bench scripts not named in docs/code.md: {missing}"


@pytest.mark.parametrize("script", sorted(CASES))
def test_quick_mode(script: str, model_dir: Path, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    server, check = CASES[script]
    if server:  # the script starts its own; the fixture says whether this machine can (fails in CI if not)
        request.getfixturevalue(server)
    extra = ["--index", str(tmp_path / "search.sqlite")] if script == "search.py" else []
    report = bench(script, "--quick", *extra, timeout=420 if script == "scale.py" else 180)  # scale: a scheduler
    assert DOCUMENTED[script] <= set(report), sorted(DOCUMENTED[script] - set(report))
    check(report)


def test_gpu_quick_on_cpu(model_dir: Path, tmp_path: Path) -> None:
    """``prepare --quick`` then ``run --quick --device cpu`` with the real Whisper-base through CTranslate2."""
    prepared = bench("gpu.py", "prepare", "--quick", "--out", str(tmp_path))
    assert set(prepared) == {"chunks", "speech_s", "path"} and positive(prepared["chunks"], prepared["speech_s"])
    assert Path(prepared["path"]) == tmp_path / "chunks.npz" and Path(prepared["path"]).is_file()
    # the sweep's wall budget is the bench's own guard on a GPU machine; here every batch size must run, however
    # busy the machine: a budget no quick sweep reaches
    unbounded = ("--budget-seconds", "3600")
    report = bench("gpu.py", "run", "--quick", "--device", "cpu", "--engines", "ctranslate2", "--chunks",
                   prepared["path"], "--model-dir", str(model_dir), *unbounded, timeout=900)
    assert {"device", "chunks", "speech_s", "engines"} <= set(report)
    assert report["device"] == "cpu" and report["chunks"] == prepared["chunks"]
    engine = report["engines"]["ctranslate2"]
    assert "error" not in engine, engine["error"]
    assert {"model", "compute_type", "load_and_warm_up_s", "batches"} <= set(engine)
    assert engine["compute_type"] == "int8" and [b["batch_size"] for b in engine["batches"]] == [1, 4]
    assert all(positive(b["chunks"], b["wall_s"], b["audio_s_per_wall_s"]) for b in engine["batches"])
    assert engine["hotwords"]  # the shipped settings' term dictionary, as production loads the engine

    # The transformers engines in the production configuration, tiny: hotwords, Qwen3-ASR's forced aligner.
    report = bench("gpu.py", "run", "--quick", "--device", "cpu", "--tiny", "--engines",
                   "transformers-whisper,transformers-qwen3", "--chunks", prepared["path"], "--model-dir", str(model_dir),
                   *unbounded, timeout=900)
    for name, engine in report["engines"].items():
        assert "error" not in engine, (name, engine["error"])
        assert engine["hotwords"] and engine["aligner"] == (name == "transformers-qwen3"), name
        assert engine["compute_type"] == "float32" and [b["batch_size"] for b in engine["batches"]] == [1, 4], name
        assert (engine["attn_implementation"], engine["generation_cache"]) == ("sdpa", "dynamic"), name
