"""The quality gate: each expectation on crafted transcripts, the outcome per recording, and real audio end to end."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
import sqlite3
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest

from asr_tasks.config import Settings
from asr_tasks.gate.checks import QualityError, apply_report, gate, repeat_share, text_units, validate
from asr_tasks.index.sqlite import SqliteIndex
from asr_tasks.intake.artefacts import Artefacts
from asr_tasks.intake.stores import LocalStore
from asr_tasks.models import Recording, Segment, Transcript, recording_id_for
from asr_tasks.pipeline.gate import gate_shard
from asr_tasks.pipeline.index import index_results
from asr_tasks.pipeline.preprocess import preprocess
from asr_tasks.pipeline.results import preprocessed
from asr_tasks.pipeline.sense import sense
from asr_tasks.pipeline.transcribe import load_engine, transcribe_shard
from asr_tasks.states import GateOutcome, RecordingState
from asr_tasks.text.postprocess import hotword_terms, hotwords
from asr_tasks.version import DayReports, model_tag

pytestmark = pytest.mark.quality

DAY = date(2026, 11, 27)
PREFIX = "calls/2026/11/27/"


def transcript(
    name: str,
    lines: list[tuple[str, float, float, str]],
    duration: float = 60.0,
    speech: float | None = None,
    language: str = "zh",
    logprob: float = -0.3,
    no_speech: float = 0.05,
) -> Transcript:
    """A transcript as the engine would leave it: (speaker, start, end, text) per segment."""
    rid = recording_id_for("recordings", PREFIX + name, "e1")
    rec = Recording(rid, "recordings", PREFIX + name, "e1", 1, name, "2026-11-27")
    segments = [Segment(rid, 0 if who == "agent" else 1, who, start, end, text, logprob, no_speech, language)
                for who, start, end, text in lines]
    spoken = speech if speech is not None else sum(end - start for _, start, end, _ in lines)
    return Transcript(rec, duration, segments, language if segments else None, "m", "1", speech_seconds=spoken)


CLEAN_ZH = [("agent", 1.0, 4.5, "您好，这款理财产品年化收益12%。"), ("customer", 5.0, 7.0, "那风险大吗？"),
            ("agent", 7.5, 12.0, "有一定风险，我们不承诺保本保收益。")]
CLEAN_EN = [("agent", 0.5, 6.0, "I can't promise a return, the fund can lose money."),
            ("customer", 6.5, 8.0, "What returns did it make?")]

# name -> (transcript, the expectations it must fail, exactly)
CASES = {
    "clean_zh": (transcript("clean_zh", CLEAN_ZH), []),
    "clean_en": (transcript("clean_en", CLEAN_EN, language="en"), []),
    # Agent and customer talk over each other on their own channels: that is not an overlap.
    "crosstalk": (transcript("crosstalk", [("agent", 1.0, 5.0, "您好，请问您是张先生吗？"),
                                           ("customer", 4.0, 6.0, "对，我是。")]), []),
    "thanks_loop": (transcript("thanks_loop", [("agent", 0.0, 6.0, "谢谢" * 12)]), ["repetition_loop"]),
    "loop_across_segments": (
        transcript("loop_across_segments", [("agent", 2.0 * i, 2.0 * i + 1.5, "Thank you.") for i in range(12)],
                   language="en", speech=20.0),
        ["repetition_loop"],
    ),
    "empty_segment": (transcript("empty_segment", [*CLEAN_ZH, ("agent", 12.5, 13.0, "")]),
                      ["segment_text_not_empty"]),
    "overlap": (transcript("overlap", [("agent", 1.0, 4.5, "您好，这款理财产品收益稳定。"),
                                       ("agent", 3.0, 6.0, "那风险大吗？没有风险。")]),
                ["no_overlap_within_speaker"]),
    "out_of_order": (transcript("out_of_order", [CLEAN_ZH[2], CLEAN_ZH[0]]), ["timestamps_increasing"]),
    "past_the_end": (transcript("past_the_end", [("agent", 1.0, 9.0, "您好，这款理财产品的收益稳定，风险很低。")],
                                duration=5.0, speech=4.0),
                     ["timestamps_inside_recording"]),
    "two_hours_ten_words": (
        transcript("two_hours_ten_words", [("agent", 10.0, 14.0, "one two three four five six seven eight nine ten")],
                   duration=7200.0, speech=7000.0, language="en"),
        ["speech_rate", "speech_coverage"],
    ),
    "crammed": (transcript("crammed", [("agent", 1.0, 1.5, "您好这款理财产品年化收益很高风险很低欢迎购买谢谢")],
                           speech=0.9),
                ["speech_rate"]),
    "whoa": (transcript("whoa", [("agent", 0.0, 1.3, "Whoa, whoa, whoa, whoa.")], language="en", speech=2.0),
             ["repetition_loop"]),
    "unsure": (transcript("unsure", CLEAN_EN, language="en", logprob=-1.4), ["confidence_logprob"]),
    "no_speech_prob": (transcript("no_speech_prob", CLEAN_EN, language="en", no_speech=0.9),
                       ["confidence_no_speech"]),
    "prompt_echo": (transcript("prompt_echo", [("agent", 0.9, 3.1, "海港银行, 安心一百, 余额宝")]), ["prompt_echo"]),
    "silent": (transcript("silent", [], duration=20.0, speech=0.0), ["speech_detected"]),
    "speech_without_text": (transcript("speech_without_text", [], speech=12.0), ["text_where_speech"]),
}


@pytest.fixture(scope="module")
def reports() -> dict[str, list[str]]:
    """Every case validated in one batch, as a day is: one dataframe per table, results per recording."""
    settings = Settings()
    cases = list(CASES.values())
    results = validate([t for t, _ in cases], settings.quality, tuple(hotword_terms(settings.postprocess)))
    assert [r.recording_id for r in results] == [t.recording.recording_id for t, _ in cases]
    return {name: r.failures for name, r in zip(CASES, results)}


@pytest.mark.parametrize("name", list(CASES))
def test_each_rule_flags_exactly_what_it_should(reports: dict[str, list[str]], name: str) -> None:
    assert reports[name] == CASES[name][1]


def test_repeat_share() -> None:
    assert repeat_share(text_units("谢谢")) == 0.0
    assert repeat_share(text_units("谢谢谢谢谢谢谢谢")) == 1.0
    assert repeat_share(text_units("No, no, no, I said no.")) == 0.0
    assert repeat_share(text_units("您好，请问您是张先生吗？对，我是。")) == 0.0
    loop = "I am going to the bank. " * 4
    assert repeat_share(text_units("Hello there, " + loop)) == pytest.approx(24 / 26, abs=1e-3)
    assert repeat_share(text_units("Whoa, whoa, whoa, whoa.")) == 1.0  # one word over and over: music
    assert repeat_share(text_units("谢谢谢谢")) == 0.0  # "thanks, thanks" is only polite


def test_language_is_checked_only_when_configured() -> None:
    en = transcript("en", CLEAN_EN, language="en")
    assert validate([en], Settings().quality)[0].failures == []
    assert validate([en], Settings().quality, language="zh")[0].failures == ["language_as_configured"]
    assert validate([en], Settings().quality, language="en")[0].failures == []


def test_outcome_sets_state_and_names_failures() -> None:
    clean, loop, silent = (CASES[n][0] for n in ("clean_zh", "thanks_loop", "silent"))
    silent = dataclasses.replace(silent, state=RecordingState.NEEDS_REVIEW, reason="no speech detected")
    passed, flagged, quiet = gate([clean, loop, silent], Settings().quality)
    assert (passed.quality, passed.state, passed.reason, passed.quality_failures) == (GateOutcome.PASS, RecordingState.INDEXED, None, [])
    assert (flagged.quality, flagged.state) == (GateOutcome.FLAGGED, RecordingState.NEEDS_REVIEW)
    assert flagged.reason == "quality gate failed: repetition_loop" and flagged.quality_failures == ["repetition_loop"]
    assert quiet.reason == "no speech detected (quality gate failed: speech_detected)"
    assert Transcript.from_dict(json.loads(json.dumps(flagged.to_dict()))) == flagged
    with pytest.raises(ValueError, match="applied to"):
        apply_report(clean, validate([loop], Settings().quality)[0])


def test_bad_suites_are_named(tmp_path: Path) -> None:
    settings = Settings().override(expectations_dir=str(tmp_path))
    shipped = Settings().quality.path("expectations_dir")
    (tmp_path / "recordings.json").write_text((shipped / "recordings.json").read_text(encoding="utf-8"))
    one = [CASES["clean_zh"][0]]
    (tmp_path / "segments.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(QualityError, match=r"segments\.json: not valid JSON"):
        validate(one, settings.quality)
    (tmp_path / "segments.json").write_text(json.dumps({"name": "s", "expectations": [
        {"type": "expect_column_values_to_be_between", "kwargs": {"column": "units", "min_value": 1}}]}))
    with pytest.raises(QualityError, match=r"segments\.json: expectation 0 has no meta\.name"):
        validate(one, settings.quality)
    (tmp_path / "segments.json").write_text(json.dumps({"name": "s2", "expectations": [
        {"type": "expect_column_values_to_be_between", "kwargs": {"column": "no_such_column", "min_value": 1},
         "meta": {"name": "typo"}}]}))
    with pytest.raises(QualityError, match=r"segments\.json: expectation 'typo' could not run"):
        validate(one, settings.quality)


def test_index_stores_quality_and_filters_on_it(tmp_path: Path) -> None:
    path = tmp_path / "index.sqlite"
    with sqlite3.connect(path) as db:  # an index file from before the quality columns
        db.execute("CREATE TABLE recordings (recording_id TEXT PRIMARY KEY, bucket TEXT NOT NULL, key TEXT NOT NULL,"
                   " etag TEXT NOT NULL, call_id TEXT, call_date TEXT, agent_id TEXT, customer_id TEXT,"
                   " direction TEXT, started_at TEXT, duration REAL, speech_seconds REAL, language TEXT, model TEXT,"
                   " pipeline_version TEXT, state TEXT NOT NULL, reason TEXT, segments INTEGER NOT NULL DEFAULT 0,"
                   " updated_at TEXT NOT NULL)")
    db.close()
    index = SqliteIndex(path)
    for t in gate([CASES["clean_en"][0], CASES["loop_across_segments"][0]], Settings().quality):
        index.replace_recording(t)
    states = {r["key"].rsplit("/", 1)[-1]: (r["quality"], r["quality_failures"]) for r in index.recordings()}
    assert states == {"clean_en": (GateOutcome.PASS, None), "loop_across_segments": (GateOutcome.FLAGGED, "repetition_loop")}
    assert {h.key for h in index.search("thank", quality=GateOutcome.FLAGGED)} == {PREFIX + "loop_across_segments"}
    assert index.search("thank", quality=GateOutcome.PASS) == []
    assert {h.key for h in index.search("returns", quality=GateOutcome.PASS)} == {PREFIX + "clean_en"}


def _synthesise(path: Path, source: str, seconds: float) -> None:
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-f", "lavfi", "-i", f"{source}:d={seconds}", "-ar", "16000",
                    str(path)], check=True)


def test_silence_and_music_are_never_indexed_as_pass_with_text(
    settings: Settings, model_dir: Path, tmp_path: Path
) -> None:
    """Whisper writes text over music and tones; the gate must keep it from passing.

    The VAD takes both tones below for speech: an aria (harmonics at voice pitch,
    vibrato, syllable-rate swells) and a gliding tone. Over them the model writes
    "RIP RIP RIP", reads back its hotword prompt, or worse.
    """
    def voice(f0: str) -> str:
        return "+".join(f"{w}*sin(2*PI*{k}*({f0})*t)" for k, w in enumerate((1, .8, .6, .4, .3, .2), 1))

    glide = "(150+100*sin(2*PI*0.7*t))"
    sources = {
        "silent.wav": "anullsrc=r=16000:cl=mono",
        "aria.wav": f"aevalsrc='0.12*({voice('(220+20*sin(2*PI*6*t))*(1+0.5*floor(mod(t,3)))')})"
                    "*(0.55+0.45*sin(2*PI*2.5*t))':s=16000",
        "glide.wav": f"aevalsrc='0.3*sin(2*PI*{glide}*t)+0.1*sin(2*PI*2*{glide}*t)':s=16000",
    }
    store = LocalStore(settings.storage.path("store_root"))
    for name, source in sources.items():
        _synthesise(tmp_path / name, source, 10.0)
        store.put_file(settings.storage.recordings_bucket, PREFIX + name, tmp_path / name)

    results = [preprocess(r, store, settings) for r in sense(store, settings, DAY)]
    transcribe_shard(preprocessed(results), store, settings)
    assert gate_shard(results, store, settings) == 3
    index = SqliteIndex(settings.index.path("index_path"))
    assert index_results(results, store, index, settings) == {RecordingState.NEEDS_REVIEW: 3}
    assert load_engine(settings).hotwords == hotwords(settings.postprocess)  # the dictionary reached the engine

    rows = {r["key"].rsplit("/", 1)[-1]: r for r in index.recordings("2026-11-27")}
    for name in sources:
        row = rows[name]
        assert not (row["quality"] == GateOutcome.PASS and row["segments"] > 0), row
        assert row["quality"] == GateOutcome.FLAGGED and row["state"] == RecordingState.NEEDS_REVIEW and row["quality_failures"], row
    # The gate is what stopped them: the model did write text over the music.
    assert sum(rows[name]["segments"] for name in sources) > 0

    # The day's report: one CSV line and one HTML row per recording that reached the gate.
    csv_key, html_key = (DayReports("2026-11-27").quality(model_tag(settings.asr), suffix) for suffix in ("csv", "html"))
    table = list(csv.DictReader(io.StringIO(store.get_bytes(settings.storage.artefacts_bucket, csv_key).decode())))
    assert {r["key"].rsplit("/", 1)[-1]: r["quality"] for r in table} == {name: GateOutcome.FLAGGED for name in sources}
    page = store.get_bytes(settings.storage.artefacts_bucket, html_key).decode()
    assert "3 of 3 recordings flagged for review" in page and "speech_detected" in page

    # A re-run gates nothing again and leaves the index as it is.
    assert gate_shard(results, store, settings) == 0
    assert index_results(results, store, index, settings) == {"unchanged": 3}


def test_search_command_filters_on_quality(tmp_path: Path) -> None:
    index = SqliteIndex(tmp_path / "index.sqlite")
    for t in gate([CASES["clean_en"][0], CASES["loop_across_segments"][0]], Settings().quality):
        index.replace_recording(t)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASR_")}
    env["ASR_INDEX_PATH"] = str(tmp_path / "index.sqlite")

    def keys(*args: str) -> set[str]:
        proc = subprocess.run([str(Path(sys.executable).parent / "asr"), "search", *args, "--json"], env=env,
                              capture_output=True, text=True, timeout=120, check=True)
        return {hit["key"].rsplit("/", 1)[-1] for hit in json.loads(proc.stdout)}

    assert keys("thank you") == {"loop_across_segments"}
    assert keys("thank you", "--quality", "pass") == set()
    assert keys("returns", "--quality", "pass") == {"clean_en"}


def test_a_late_recording_joins_its_days_report(tmp_path: Path) -> None:
    """The next night's run indexes a late upload of the day before: that day's report keeps its other rows."""
    from asr_tasks.gate.reports import report_row, write_reports
    from asr_tasks.intake.stores import LocalStore

    store, settings = LocalStore(tmp_path / "store"), Settings()
    clean, loop = (gate([CASES[n][0]], settings.quality)[0] for n in ("clean_en", "loop_across_segments"))
    artefacts = Artefacts(store, "artefacts", "m")
    write_reports([report_row(clean)], artefacts, settings.quality)
    write_reports([report_row(loop)], artefacts, settings.quality)
    write_reports([report_row(loop)], artefacts, settings.quality)  # a re-run adds nothing
    csv_key = DayReports(clean.recording.call_date).quality("m", "csv")
    table = list(csv.DictReader(io.StringIO(store.get_bytes("artefacts", csv_key).decode())))
    assert sorted(r["recording_id"] for r in table) == sorted([clean.recording.recording_id,
                                                               loop.recording.recording_id])
