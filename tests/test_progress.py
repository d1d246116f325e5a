"""Progress, throughput and ETA from a ledger of known states and timings, and what an empty or odd range says."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import update

from asr_tasks.models import Recording, recording_id_for
from asr_tasks.records.ledger import Ledger
from asr_tasks.records.tables import recordings
from asr_tasks.records.progress import progress

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)


def rec(day: str, n: int, size: int = 1_000_000) -> Recording:
    key = f"calls/{day.replace('-', '/')}/c{n}.wav"
    return Recording(recording_id_for("recordings", key, "e"), "recordings", key, "e", size, f"c{n}", day)


@pytest.fixture
def ledger(fresh_url: str) -> Ledger:
    """October: 4 calls indexed (an hour of audio each, finished 30 min, 5 h and 30 h ago), one quarantined;
    November: 2 decoded (half an hour of 2 MB each), 2 only sensed (2 MB each). SQLite and PostgreSQL alike."""
    ledger = Ledger(fresh_url)
    october = [rec("2026-10-05", n) for n in range(5)]
    november = [rec("2026-11-02", n, size=2_000_000) for n in range(4)]
    ledger.sensed(october + november, "m", "2")
    finished = [NOW - timedelta(minutes=30), NOW - timedelta(hours=5), NOW - timedelta(hours=5),
                NOW - timedelta(hours=30)]
    for r, at in zip(october[:4], finished):
        ledger.advance(r.recording_id, "preprocessed", audio_seconds=3600.0)
        ledger.advance(r.recording_id, "indexed")
        with ledger.engine.begin() as db:
            db.execute(update(recordings).where(recordings.c.recording_id == r.recording_id).values(updated_at=at))
    ledger.advance(october[4].recording_id, "quarantined", reason="not a decodable media file")
    for r in november[:2]:
        ledger.advance(r.recording_id, "preprocessed", audio_seconds=1800.0)
    return ledger


def test_states_audio_throughput_and_eta(ledger: Ledger) -> None:
    report = progress(ledger, "2026-10-01", "2026-11-30", "month", now=NOW)
    october, november = report.periods
    assert (october.period, october.recordings, october.states) == ("2026-10", 5, {"indexed": 4, "quarantined": 1})
    assert october.audio_hours_done == 4.0 and october.audio_hours_left == 0.0 and october.share_done == 1.0
    assert (november.recordings, november.states) == (4, {"preprocessed": 2, "sensed": 2})
    # left: 2 x 0.5 h decoded, and 2 x 2 MB at the decoded ones' rate (5 h in 8 MB): 1 + 2.5 = 3.5 audio hours
    assert november.audio_hours_done == 0.0 and november.audio_hours_left == 3.5
    hour, day = report.throughput
    assert (hour.recordings, hour.audio_hours, hour.audio_hours_per_hour) == (1, 1.0, 1.0)
    assert (day.recordings, day.audio_hours, day.recordings_per_hour) == (3, 3.0, 0.12)
    assert report.eta_hours == 28.0  # 3.5 audio hours left at the last day's 0.125 audio hours per hour
    assert report.eta_at == "2026-12-02T16:00+00:00"
    assert [(f.state, f.reason, f.count, f.example_key) for f in report.failures] == [
        ("quarantined", "not a decodable media file", 1, "calls/2026/10/05/c4.wav")]
    assert len(report.days_without_recordings) == 61 - 2 and "2026-10-05" not in report.days_without_recordings
    assert report.message is None
    by_day = progress(ledger, "2026-11-02", "2026-11-02", "day", now=NOW)
    assert [p.period for p in by_day.periods] == ["2026-11-02"] and by_day.days_without_recordings == []


def test_an_empty_range_a_range_of_failures_and_a_future_range_say_so(ledger: Ledger) -> None:
    empty = progress(ledger, "2026-09-01", "2026-09-30", now=NOW)
    assert empty.periods == [] and empty.message == "no recordings sensed for 2026-09-01 to 2026-09-30"
    assert empty.eta_hours is None and len(empty.days_without_recordings) == 30
    with ledger.engine.begin() as db:
        db.execute(update(recordings).where(recordings.c.call_date == "2026-10-05")
                   .values(state="quarantined", reason="not a decodable media file"))
    failed = progress(ledger, "2026-10-05", "2026-10-05", now=NOW)
    assert failed.failures[0].count == 5 and "every finished recording failed" in str(failed.message)
    future = progress(ledger, "2027-01-01", "2027-01-31", now=NOW)
    assert "after today" in str(future.message) and future.days_without_recordings == []


def test_asr_progress_prints_a_table_and_json(ledger: Ledger) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASR_")}
    env["ASR_LEDGER_URL"] = ledger.url
    asr = str(Path(sys.executable).parent / "asr")
    table = subprocess.run([asr, "progress", "--from", "2026-10-01", "--to", "2026-11-30"], env=env,
                           capture_output=True, text=True, timeout=120)
    assert table.returncode == 0, table.stderr
    assert "2026-10" in table.stdout and "100 %" in table.stdout and "not a decodable media file" in table.stdout
    data = json.loads(subprocess.run([asr, "progress", "--by", "day", "--json"], env=env, capture_output=True,
                                     text=True, timeout=120, check=True).stdout)
    assert [p["period"] for p in data["periods"]] == ["2026-10-05", "2026-11-02"] and data["recordings"] == 9
    bad = subprocess.run([asr, "progress", "--from", "tomorrow"], env=env, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "YYYY-MM-DD" in bad.stderr


def test_the_progress_page_shows_years_months_the_hourly_chart_and_failures(ledger: Ledger, tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from asr_tasks.config import Settings
    from asr_tasks.web.app import create_app

    settings = Settings().override(ledger_url=ledger.url, index_path=str(tmp_path / "index.sqlite"),
                                   store_root=str(tmp_path / "store"))
    client = TestClient(create_app(settings))
    page = client.get("/progress", params={"date_from": "2026-10-01", "date_to": "2026-11-30"})
    assert page.status_code == 200
    html = page.text
    assert '<tr class="year"><td>2026</td>' in html and "<td>2026-10</td><td>100 %</td>" in html
    assert html.count('class="col"') == 48  # one column per hour of the last two days
    assert 'href="progress/day/2026-10-05">calls/2026/10/05/c4.wav</a>' in html
    day = client.get("/progress/day/2026-10-05").text
    assert "quarantined" in day and day.count("calls/2026/10/05/") == 5
    assert client.get("/progress/day/not-a-day").status_code == 422
    for params in ({"date_from": "2026-13-45"}, {"date_to": "2026-02-30"}):  # the right shape, no such day
        answer = client.get("/progress", params=params)
        assert answer.status_code == 400 and "not a date of the calendar" in answer.json()["detail"], params
    assert client.get("/progress/day/2026-02-30").status_code == 400
    endless = client.get("/progress", params={"date_from": "0001-01-01", "date_to": "9999-12-31"})
    assert endless.status_code == 400 and "at most 100 years" in endless.json()["detail"]
