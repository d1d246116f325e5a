"""The ledger on SQLite and on PostgreSQL (a throw-away server started by the tests), and ``asr status``."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest
from sqlalchemy.engine import make_url

from asr_tasks.config import PROJECT_ROOT
from asr_tasks.ledger import Ledger, resolve_url
from services import throwaway_database
from asr_tasks.models import Recording, recording_id_for

DAY = "2026-11-27"


def rec(name: str, etag: str = "e1", day: str = DAY, bucket: str = "recordings") -> Recording:
    key = f"calls/{day.replace('-', '/')}/{name}"
    return Recording(recording_id_for(bucket, key, etag), bucket, key, etag, 100, name.split(".")[0], day)


@pytest.fixture(scope="module")
def postgres_url(postgres_server: str) -> Iterator[str]:
    """A database of its own on the test server, dropped afterwards."""
    with throwaway_database(postgres_server, "asr_ledger") as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    base = request.getfixturevalue("postgres_url")
    ledger = Ledger(base)
    with ledger.engine.begin() as db:  # the database is shared by this module's tests
        db.exec_driver_sql("DELETE FROM recording_ledger")
    return base


def states(ledger: Ledger) -> dict[str, str]:
    return {row["key"].rsplit("/", 1)[-1]: row["state"] for row in ledger.rows()}


def test_a_recording_walks_through_its_states_with_timings(url: str) -> None:
    ledger = Ledger(url)
    good, bad, quiet = rec("c1.wav"), rec("c2.wav"), rec("c3.wav")
    ledger.sensed([good, bad, quiet], "whisper-base-ctranslate2-int8", "1")
    assert ledger.counts(DAY) == {"sensed": 3}
    assert ledger.advance(good.recording_id, "preprocessed", stage="preprocess", seconds=1.23456)
    assert ledger.advance(bad.recording_id, "quarantined", reason="empty file (0 bytes)", stage="preprocess",
                          seconds=0.01)
    assert ledger.advance(quiet.recording_id, "preprocessed", stage="preprocess", seconds=0.5)
    assert ledger.advance(good.recording_id, "transcribed", stage="transcribe", seconds=4.5)
    assert ledger.advance(quiet.recording_id, "transcribed", stage="transcribe", seconds=0.1)
    assert ledger.advance(good.recording_id, "indexed", stage="index", seconds=0.02, segments=7)
    assert ledger.advance(quiet.recording_id, "needs_review", reason="no speech detected", stage="index",
                          seconds=0.01, segments=0)
    assert ledger.counts(DAY) == {"indexed": 1, "quarantined": 1, "needs_review": 1}
    assert ledger.counts("2026-11-28") == {}
    row = ledger.rows(DAY)[0]
    assert (row["key"], row["etag"], row["state"], row["reason"], row["segments"]) == (good.key, "e1", "indexed",
                                                                                       None, 7)
    assert (row["preprocess_seconds"], row["transcribe_seconds"], row["index_seconds"]) == (1.235, 4.5, 0.02)
    assert (row["model"], row["pipeline_version"]) == ("whisper-base-ctranslate2-int8", "1")
    assert row["updated_at"] >= row["sensed_at"] and row["updated_at"].endswith("+00:00")
    assert [r["reason"] for r in ledger.rows(DAY)] == [None, "empty file (0 bytes)", "no speech detected"]
    json.dumps(ledger.rows())  # what asr status --json prints
    with pytest.raises(ValueError, match="unknown stage"):
        ledger.advance(good.recording_id, "indexed", stage="audit")


def test_states_only_move_forward(url: str) -> None:
    ledger = Ledger(url)
    r = rec("c1.wav")
    ledger.sensed([r], "m", "1")
    assert ledger.advance(r.recording_id, "transcribed")
    assert not ledger.advance(r.recording_id, "preprocessed")  # a retried stage that found its artefact
    assert not ledger.advance(r.recording_id, "transcribed")
    assert ledger.advance(r.recording_id, "needs_review", reason="speech detected but no text transcribed")
    assert not ledger.advance(r.recording_id, "sensed")
    assert not ledger.advance(r.recording_id, "needs_review", reason=None)  # same state: the reason stays
    assert ledger.rows()[0]["reason"] == "speech detected but no text transcribed"
    assert ledger.advance(r.recording_id, "indexed", segments=3)  # the index decides how it ended
    assert ledger.state(r.recording_id) == "indexed"
    assert not ledger.advance("not-in-the-ledger", "indexed")
    assert ledger.state("not-in-the-ledger") is None


def test_sensing_again_keeps_states_and_new_versions_start_over(url: str) -> None:
    ledger = Ledger(url)
    done, bad = rec("c1.wav"), rec("c2.wav")
    ledger.sensed([done, bad], "model-a", "1")
    ledger.advance(done.recording_id, "indexed", stage="index", seconds=1.0, segments=4)
    ledger.advance(bad.recording_id, "quarantined", reason="not a decodable media file")
    ledger.sensed([done, bad], "model-a", "1")  # a re-run of the day
    assert states(ledger) == {"c1.wav": "indexed", "c2.wav": "quarantined"}

    ledger.sensed([done, bad], "model-b", "1")  # a new model redoes transcripts; a bad file stays bad
    assert states(ledger) == {"c1.wav": "sensed", "c2.wav": "quarantined"}
    row = ledger.rows()[0]
    assert (row["model"], row["segments"], row["index_seconds"], row["reason"]) == ("model-b", None, None, None)

    ledger.sensed([done, bad], "model-b", "2")  # a new pipeline version redoes everything
    assert states(ledger) == {"c1.wav": "sensed", "c2.wav": "sensed"}
    assert len(ledger.rows()) == 2


def test_a_new_etag_supersedes_the_old_version(url: str) -> None:
    ledger = Ledger(url)
    first, second = rec("c1.wav", etag="e1"), rec("c1.wav", etag="e2")
    ledger.sensed([first], "m", "1")
    ledger.advance(first.recording_id, "quarantined", reason="truncated upload")
    ledger.sensed([second], "m", "1")
    rows = {r["etag"]: r for r in ledger.rows()}
    assert (rows["e1"]["state"], rows["e1"]["reason"]) == ("superseded", "replaced by a newer version (ETag e2)")
    assert rows["e2"]["state"] == "sensed" and ledger.counts() == {"superseded": 1, "sensed": 1}
    ledger.sensed([first], "m", "1")  # the old bytes uploaded again: that version is current once more
    assert {r["etag"]: r["state"] for r in ledger.rows()} == {"e1": "sensed", "e2": "superseded"}


def _walk(url: str, names: list[str]) -> None:
    ledger = Ledger(url)
    for name in names:
        r = rec(name)
        ledger.sensed([r], "m", "1")
        for state in ("preprocessed", "transcribed", "indexed"):
            assert ledger.advance(r.recording_id, state, stage="index" if state == "indexed" else None)


def test_many_processes_write_at_once(url: str) -> None:
    """Parallel Airflow tasks share one ledger; SQLite waits for its lock instead of failing."""
    Ledger(url)
    batches = [[f"p{p}-{i:03d}.wav" for i in range(25)] for p in range(4)]
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_walk, args=(url, batch)) for batch in batches]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(120)
    assert [proc.exitcode for proc in procs] == [0, 0, 0, 0]
    assert Ledger(url).counts(DAY) == {"indexed": 100}


def test_ledger_urls() -> None:
    relative = make_url(resolve_url("sqlite:///var/ledger.sqlite"))
    assert Path(relative.database) == PROJECT_ROOT / "var" / "ledger.sqlite"
    assert resolve_url("sqlite:////abs/l.sqlite") == "sqlite:////abs/l.sqlite"
    assert make_url(resolve_url("postgresql://asr:pw@db/asr")).drivername == "postgresql+psycopg2"
    with pytest.raises(ValueError, match="ledger_url 'mysql://x@y/z': unsupported database 'mysql'"):
        Ledger("mysql://x@y/z")


def test_asr_status_prints_counts_and_failures(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    ledger = Ledger(url)
    good, silent, broken, old = rec("c1.wav"), rec("c2.wav"), rec("c3.wav", etag="e2"), rec("c3.wav", etag="e1")
    ledger.sensed([good, silent, old], "m", "1")
    ledger.sensed([broken], "m", "1")
    ledger.advance(good.recording_id, "indexed", segments=5)
    ledger.advance(silent.recording_id, "needs_review", reason="no speech detected", segments=0)
    ledger.advance(broken.recording_id, "quarantined", reason="not a decodable media file: Invalid data")
    ledger.sensed([rec("c9.wav", day="2026-11-28")], "m", "1")

    env = {k: v for k, v in os.environ.items() if not k.startswith("ASR_")} | {"ASR_LEDGER_URL": url}
    asr = [str(Path(sys.executable).parent / "asr"), "status"]
    text = subprocess.run([*asr, "--date", DAY], env=env, capture_output=True, text=True, timeout=60)
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines() == [
        f"{DAY}: indexed 1, needs_review 1, quarantined 1, superseded 1",
        "  needs_review  calls/2026/11/27/c2.wav: no speech detected",
        "   quarantined  calls/2026/11/27/c3.wav: not a decodable media file: Invalid data",
    ]
    shown = json.loads(subprocess.run([*asr, "--date", DAY, "--json"], env=env, capture_output=True, text=True,
                                      timeout=60).stdout)
    assert shown["counts"] == {"indexed": 1, "needs_review": 1, "quarantined": 1, "superseded": 1}
    assert {(r["key"].rsplit("/", 1)[-1], r["etag"], r["state"], r["segments"]) for r in shown["recordings"]} == {
        ("c1.wav", "e1", "indexed", 5), ("c2.wav", "e1", "needs_review", 0),
        ("c3.wav", "e2", "quarantined", None), ("c3.wav", "e1", "superseded", None),
    }
    every = json.loads(subprocess.run([*asr, "--json"], env=env, capture_output=True, text=True, timeout=60).stdout)
    assert every["counts"]["sensed"] == 1 and len(every["recordings"]) == 5
    bad = subprocess.run([*asr, "--date", "27.11.2026"], env=env, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "expected YYYY-MM-DD" in bad.stderr
