"""The ``asr`` command as a user runs it: settings, spot-check transcription, bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from asr_tasks.config import PROJECT_ROOT

ASR = str(Path(sys.executable).parent / "asr")


def asr(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("ASR_")}
    full.update(env or {})
    return subprocess.run([ASR, *args], env=full, capture_output=True, text=True, timeout=300, cwd=PROJECT_ROOT)


def test_config_shows_effective_settings_with_env_overrides() -> None:
    shown = json.loads(asr("config", "--json", env={"ASR_CHUNK_MAX_SECONDS": "20"}).stdout)
    assert shown["audio"]["chunk_max_seconds"] == 20.0 and shown["asr"]["engine"] == "ctranslate2"
    assert asr("config", "--get", "gpu_pool").stdout.strip() == "gpu"
    assert asr("config", "--get", "airflow.gpu_pool").stdout.strip() == "gpu"
    bad = asr("config", env={"ASR_BEAM_SIZE": "wide"})
    assert bad.returncode == 2 and "ASR_BEAM_SIZE" in bad.stderr


def test_transcribe_reports_bad_files_and_goes_on(tmp_path: Path, jfk: Path, model_dir: Path) -> None:
    broken = tmp_path / "broken.wav"
    broken.write_text("this is not audio")
    proc = asr("transcribe", str(broken), str(jfk), str(tmp_path / "missing.mp3"), "--json",
               env={"ASR_MODEL_DIR": str(model_dir)})
    assert proc.returncode == 1
    assert f"{broken}: not a decodable media file" in proc.stderr
    assert "missing.mp3: no such file" in proc.stderr
    [result] = json.loads(proc.stdout)
    assert result["file"] == str(jfk)
    text = " ".join(s["text"] for s in result["segments"]).lower()
    assert "ask not what your country can do for you" in text
    assert all({"speaker", "start", "end", "text"} <= set(s) for s in result["segments"])
    assert result["quality"] is None  # the gate runs only when asked for


def test_transcribe_packs_the_files_together_and_gates_them_when_asked(tmp_path: Path, jfk: Path,
                                                                        model_dir: Path) -> None:
    copy = tmp_path / "again.flac"
    copy.write_bytes(jfk.read_bytes())
    proc = asr("transcribe", str(jfk), str(copy), "--json", "--gate", env={"ASR_MODEL_DIR": str(model_dir)})
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout)
    assert [r["file"] for r in results] == [str(jfk), str(copy)]  # in the order given
    assert [r["quality"] for r in results] == ["pass", "pass"]
    texts = [" ".join(s["text"] for s in r["segments"]).lower() for r in results]
    assert all("ask not what your country can do for you" in t for t in texts)
    assert all(0 <= s["start"] < s["end"] <= 11.1 for r in results for s in r["segments"])  # each on its own clock


def test_missing_model_is_a_clear_error(tmp_path: Path, jfk: Path) -> None:
    proc = asr("transcribe", str(jfk), env={"ASR_MODEL_DIR": str(tmp_path / "no-model")})
    assert proc.returncode == 2 and "no-model does not exist" in proc.stderr


def test_config_masks_passwords_inside_urls() -> None:
    env = {"ASR_LEDGER_URL": "postgresql+psycopg2://asr:s3cr%40t@db:5432/asr", "ASR_ES_URL": "https://es:9200",
           "ASR_ES_PASSWORD": "hunter2"}
    shown = asr("config", env=env).stdout
    assert "s3cr" not in shown and "hunter2" not in shown
    assert "postgresql+psycopg2://asr:***@db:5432/asr" in shown and "https://es:9200" in shown
    assert "max_tokens_per_second: 10.0" in shown  # a word inside a name (tokens) is not a secret


def test_config_masks_every_url_of_a_list_and_secrets_asked_for_by_name() -> None:
    env = {"ASR_ES_URL": "https://u:pw1@es1:9200,https://u:pw2@es2:9200", "ASR_ES_PASSWORD": "hunter2"}
    shown = asr("config", env=env).stdout
    assert "pw1" not in shown and "pw2" not in shown and "https://u:***@es1:9200,https://u:***@es2:9200" in shown
    assert asr("config", "--get", "es_password", env=env).stdout.strip() == "***"
    assert asr("config", "--get", "index.es_url", env=env).stdout.strip() == "https://u:***@es1:9200,https://u:***@es2:9200"
    assert asr("config", "--get", "es_password", "--reveal", env=env).stdout.strip() == "hunter2"


def test_config_masks_passwords_however_the_urls_are_written() -> None:
    from asr_tasks.cli.main import masked_url

    assert masked_url("https://u:pw1@a:9200;https://u:pw2@b:9200") == "https://u:***@a:9200;https://u:***@b:9200"
    assert masked_url("u:pw@a:9200") == "u:***@a:9200"  # no scheme
    assert masked_url("https://a:9200/?api_key=zzz&password=qq") == "https://a:9200/?api_key=***&password=***"
    assert masked_url("https://es:9200") == "https://es:9200" and masked_url("sqlite:///var/l.sqlite").endswith("l.sqlite")


def test_transcribe_shows_a_progress_bar_on_a_terminal_and_none_for_scripts(jfk: Path, model_dir: Path) -> None:
    import pty

    main, terminal = pty.openpty()
    try:
        proc = subprocess.run([ASR, "transcribe", str(jfk)], stdout=subprocess.PIPE, stderr=terminal, text=True,
                              timeout=300, cwd=PROJECT_ROOT)
        os.set_blocking(main, False)
        shown = b""
        while True:
            try:
                chunk = os.read(main, 65536)
            except (BlockingIOError, OSError):
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(terminal)
        os.close(main)
    assert proc.returncode == 0 and "ask not what your country" in proc.stdout
    assert b"transcribing" in shown and b"1/1" in shown and b"real time" in shown  # files done, speed, on stderr
    quiet = subprocess.run([ASR, "transcribe", str(jfk), "--json"], capture_output=True, text=True, timeout=300,
                           cwd=PROJECT_ROOT)
    assert quiet.returncode == 0 and "transcribing" not in quiet.stderr and json.loads(quiet.stdout)


def test_backfill_refuses_dates_that_are_not_a_range_before_asking_airflow() -> None:
    backwards = asr("backfill", "--from", "2026-11-02", "--to", "2026-11-01")
    assert backwards.returncode == 2 and "--from 2026-11-02 is after --to 2026-11-01" in backwards.stderr
    nonsense = asr("backfill", "--from", "2026-13-01", "--to", "2026-12-31")
    assert nonsense.returncode == 2 and "'2026-13-01' is not a date (YYYY-MM-DD)" in nonsense.stderr
