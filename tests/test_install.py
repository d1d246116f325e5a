"""What a new user installs: the embedded default needs neither torch nor transformers, and says what to add."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from asr_tasks.config import PROJECT_ROOT

HEAVY = ("torch", "transformers", "nvidia-", "triton")


def test_the_demo_install_resolves_without_torch(tmp_path: Path) -> None:
    """``make demo`` installs requirements.txt under the constraints; pip's own resolution of it, from the index."""
    report = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet", "--report", str(report),
         "-r", "requirements.txt", "-c", "constraints.txt"],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    names = {item["metadata"]["name"].lower() for item in json.loads(report.read_text())["install"]}
    assert {"faster-whisper", "ctranslate2", "onnxruntime", "apache-airflow"} <= names
    assert sorted(n for n in names if n.startswith(HEAVY)) == []


def test_the_embedded_default_never_imports_torch(jfk: Path, model_dir: Path) -> None:
    """A spot check with the default engine, the DAG files and the index: none of them reaches torch."""
    code = f"""
import json, sys
sys.path.insert(0, {str(PROJECT_ROOT / "dags")!r})
import transcribe_daily, qa_audit_nightly
import asr_tasks.pipeline.transcribe, asr_tasks.pipeline.index, asr_tasks.gate.reports, asr_tasks.audit.reports
import asr_tasks.index.sqlite, asr_tasks.web.app, asr_tasks.records.retention, asr_tasks.cli.main
from asr_tasks.cli.main import main
main(["transcribe", {str(jfk)!r}, "--json"])
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "transformers"))))
"""
    proc = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600,
                          env={"ASR_MODEL_DIR": str(model_dir), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "ask not what your country" in proc.stdout.lower()
    assert proc.stdout.strip().splitlines()[-1] == "[]"


def test_the_transformers_engine_without_its_packages_says_what_to_install() -> None:
    code = """
import sys
sys.modules["torch"] = None  # as if requirements-transformers.txt were not installed
from asr_tasks.config import Settings
from asr_tasks.transcription.engine import EngineUnavailable
from asr_tasks.transcription.engines import get_engine
try:
    get_engine(Settings().override(engine="transformers", model_family="qwen3_asr").asr)
except EngineUnavailable as exc:
    print(exc)
"""
    proc = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == ("engine transformers needs torch and transformers, and torch is not installed: "
                                   "pip install -r requirements-transformers.txt -c constraints.txt")
