"""The ``asr`` command as a user runs it: settings, spot-check transcription, the audit, tables, bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.cells import cell_len

from asr_tasks.cli.main import build_parser
from asr_tasks.cli.options import commands
from asr_tasks.config import PROJECT_ROOT, Settings

ASR = str(Path(sys.executable).parent / "asr")
COMMANDS = sorted(commands(build_parser()))
# Bad input of each command beyond an unknown option, which every command is given; a command missing here is
# still run with that.
BAD: dict[str, list[list[str]]] = {
    "config": [["--get", "no_such_setting"]],
    "install-model": [["--to"]],
    "demo-corpus": [["--date", "2026-13-01"], ["--date", "yesterday"]],
    "transcribe": [[]],
    "search": [["x", "--date-from", "2026-13-01"], ["x", "--date-to", "yesterday"], ["--", "-risk"],
               ["x", "--limit", "0"], ["x", "--limit", "-1"], ["x", "--limit", "100000"], ["x", "--speaker", "boss"],
               ["x", "--date-from", "2026-11-02", "--date-to", "2026-11-01"], ["x", "--export", "hits.xml"],
               ["x", "--min-non-talk-share", "nan"], ["x", "--min-agent-interruptions", "many"],
               ["(" * 17 + "x" + ")" * 17], ["x" * 1001]],
    "ui": [["--port", "99999"], ["--port", "http"]],
    "audit": [["--date", "bad"], ["--date", "2026-02-30"], ["--date", "2026-11-27", "--rules", "include/qa_rules"]],
    "reindex": [["--date", "2026-11-02", "--to", "2026-11-01"], ["--date", "yesterday"]],
    "status": [["--date", "2026-02-30"]],
    "erase": [["--before", "2026-13-01", "--reason", "customer-request"], ["--key", "k", "--reason", "because"]],
    "hold": [["--from", "2026-11-02", "--to", "2026-11-01", "--why", "case"], ["--from", "1.1.2026", "--why", "x"]],
    "release": [["one", "--why", "done"]],
    "retention": [["--date", "tomorrow"]],
    "access-log": [["--since", "2026-11-02", "--until", "2026-11-01"], ["--until", "2026-11-31"]],
    "produce": [["--to", "case"], ["--query", "x"], ["--query", "x", "--to", "case", "--prefix", "1A"],
                ["--recordings", "r", "--to", "case", "--start", "0"], ["--recordings", "r", "--to", "case", "--agent", "A"],
                ["--query", "x", "--to", "case", "--redacted", "--original"],
                ["--query", "x", "--to", "case", "--date-from", "2026-13-01"]],
    "progress": [["--from", "2026-11-02", "--to", "2026-11-01"], ["--every", "0"], ["--by", "week"],
                 ["--from", "0001-01-01"]],
    "backfill": [["--from", "2026-13-01", "--to", "2026-12-31"], ["--from", "2026-11-02", "--to", "2026-11-01"],
                 ["--from", "2026-11-01", "--to", "2026-11-02", "--max-active-runs", "0"]],
}


def asr(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("ASR_")}
    full.update(env or {})
    return subprocess.run([ASR, *args], env=full, capture_output=True, text=True, timeout=300, cwd=PROJECT_ROOT)


def stores_in(settings: Settings) -> dict[str, str]:
    """The ledger, the index and the store of these settings, for a child process."""
    return {"ASR_LEDGER_URL": settings.ledger.ledger_url, "ASR_INDEX_PATH": str(settings.index.path("index_path")),
            "ASR_STORE_ROOT": str(settings.storage.path("store_root"))}


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_refuses_bad_input_in_one_line(command: str, tmp_path: Path) -> None:
    """Exit status 2 and one line naming the command and what was wrong, before anything is opened or written."""
    env = {"ASR_LEDGER_URL": f"sqlite:///{tmp_path / 'ledger.sqlite'}", "ASR_INDEX_PATH": str(tmp_path / "index"),
           "ASR_STORE_ROOT": str(tmp_path / "store"), "ASR_MODEL_DIR": str(tmp_path / "model")}
    for args in [["--no-such-option"], *BAD.get(command, [])]:
        proc = asr(command, *args, env=env)
        assert (proc.returncode, proc.stdout) == (2, ""), (args, proc.stdout, proc.stderr)
        [line] = proc.stderr.splitlines()
        assert line.startswith(f"asr {command}: ") and "Traceback" not in line, (args, line)
    assert list(tmp_path.iterdir()) == []


def test_the_bad_inputs_are_of_real_commands() -> None:
    assert set(BAD) <= set(COMMANDS)


def test_help_is_the_asr_command_s_and_a_refusal_names_the_subcommand() -> None:
    shown = asr("--help").stdout
    assert shown.startswith("usage: asr ") and "cli/" not in shown and "asr_tasks" not in shown
    unknown = asr("search", "x", "--bogus")
    assert unknown.returncode == 2
    assert unknown.stderr == "asr search: unrecognized arguments: --bogus (asr search --help lists its options)\n"


def test_config_get_prints_an_unset_value_as_nothing_or_as_json_null() -> None:
    assert asr("config", "--get", "language").stdout == "\n"
    assert asr("config", "--get", "language", "--json").stdout == "null\n"
    assert asr("config", "--get", "gpu_pool", "--json").stdout == '"gpu"\n'
    assert asr("config", "--get", "loudness_normalize").stdout == "true\n"  # as `asr config` spells it
    warned = asr("config", "--get", "gpu_pool", env={"ASR_NO_SUCH_KNOB": "1"})
    assert warned.stdout == "gpu\n" and "ASR_NO_SUCH_KNOB is not a setting" in warned.stderr


def test_a_reader_that_goes_away_ends_the_command_quietly() -> None:
    """``asr config --json | head -1``: the pipe closes before the command writes; no traceback follows."""
    proc = subprocess.Popen([ASR, "config", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=PROJECT_ROOT)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    said = proc.stderr.read()
    assert proc.wait(timeout=60) == 1 and said == ""


def test_audit_shows_the_stored_report_and_reruns_only_when_asked(settings: Settings) -> None:
    from test_audit import DAY, _record_day

    index = _record_day(settings)
    env = stores_in(settings)
    none = asr("audit", "--date", DAY, env=env)
    assert none.returncode == 1 and none.stderr.startswith(f"asr audit: no report is stored for {DAY}")
    assert index.findings(DAY) == []  # reading audits nothing
    again = asr("audit", "--date", DAY, "--rerun", env=env)
    assert again.returncode == 0, again.stderr
    stored = asr("audit", "--date", DAY, env=env)
    assert stored.returncode == 0 and stored.stdout.splitlines()[:-1] == again.stdout.splitlines()[:-1]
    assert stored.stdout.splitlines()[-1] == f"the report: asr-artefacts/reports/qa/{DAY}/qa-audit.html"
    lines = stored.stdout.splitlines()
    rows = lines[lines.index(next(line for line in lines if line.startswith("SEVERITY"))):-1]
    assert len(rows) == 1 + len(index.findings(DAY))
    link_at = {cell_len(row[:row.index("CALL PAGE" if n == 0 else "http")]) for n, row in enumerate(rows)}
    assert len(link_at) == 1  # the columns stay put, Chinese text in a row before them included
    assert all("http://localhost:8091/call/" in row and "?t=" in row for row in rows[1:])
    [disclosure] = [row for row in rows if "recording-disclosure" in row]
    assert "0:00.0-0:15.0  not said in the first 15 s  http" in disclosure
    data = json.loads(asr("audit", "--date", DAY, "--json", env=env).stdout)
    assert data["summary"]["findings"] == len(rows) - 1


def test_progress_keeps_its_columns_when_piped(settings: Settings) -> None:
    from asr_tasks.models import Recording, recording_id_for
    from asr_tasks.records.ledger import open_ledger

    ledger = open_ledger(settings.ledger)
    keys = [f"calls/2026/11/27/a-long-name-for-a-recording-{n}.wav" for n in range(4)]
    recs = [Recording(recording_id_for("recordings", k, "e"), "recordings", k, "e", 1, k, "2026-11-27") for k in keys]
    ledger.sensed(recs, "m", "2")
    ledger.advance(recs[0].recording_id, "preprocessed", audio_seconds=144.0)  # 0.04 audio hours
    ledger.advance(recs[0].recording_id, "indexed")
    ledger.advance(recs[1].recording_id, "quarantined", reason="not a decodable media file: " + "x" * 80)
    ledger.advance(recs[2].recording_id, "preprocessed", audio_seconds=144.0)
    shown = asr("progress", "--from", "2026-11-27", "--to", "2026-11-27", "--by", "day", env=stores_in(settings))
    assert shown.returncode == 0, shown.stderr
    assert "…" not in shown.stdout and "x" * 80 in shown.stdout and keys[1] in shown.stdout
    [row] = [line for line in shown.stdout.splitlines() if line.startswith("│ 2026-11-27")]
    assert "indexed 1, preprocessed 1, quarantined 1, sensed 1" in row and "0.04" in row


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
    assert result["state"] == "transcribed"  # a spot check indexes nothing


def test_transcribe_packs_the_files_together_and_gates_them_when_asked(tmp_path: Path, jfk: Path,
                                                                        model_dir: Path) -> None:
    copy = tmp_path / "again.flac"
    copy.write_bytes(jfk.read_bytes())
    proc = asr("transcribe", str(jfk), str(copy), "--json", "--gate", env={"ASR_MODEL_DIR": str(model_dir)})
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout)
    assert [r["file"] for r in results] == [str(jfk), str(copy)]  # in the order given
    assert [r["quality"] for r in results] == ["pass", "pass"]
    assert [r["state"] for r in results] == ["transcribed", "transcribed"]  # checked, and indexed nowhere
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
    assert backwards.returncode == 2 and backwards.stderr == "asr backfill: --from 2026-11-02 is after --to 2026-11-01\n"
    nonsense = asr("backfill", "--from", "2026-13-01", "--to", "2026-12-31")
    assert nonsense.returncode == 2
    assert nonsense.stderr == "asr backfill: --from '2026-13-01': not a calendar date (YYYY-MM-DD)\n"


def test_commands_that_ask_airflow_refuse_without_its_home(tmp_path: Path) -> None:
    """Without AIRFLOW_HOME, Airflow would make a home of its own in ~/airflow and know no DAG of the project's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")} | {"HOME": str(tmp_path)}
    proc = subprocess.run([ASR, "backfill", "--from", "2026-11-01", "--to", "2026-11-02", "--dry-run"], env=env,
                          capture_output=True, text=True, timeout=120, cwd=PROJECT_ROOT)
    assert proc.returncode == 2 and proc.stderr.startswith("asr: configuration error: AIRFLOW_HOME is not set")
    assert not (tmp_path / "airflow").exists()
