"""The day's stages without Airflow: every recording ends in one state, and re-runs redo nothing."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from datetime import date, timedelta
from pathlib import Path

import pytest

from asr_tasks.audit.reports import day_transcripts
from asr_tasks.config import Settings
from asr_tasks.index.sqlite import SqliteIndex
from asr_tasks.intake.artefacts import Artefacts
from asr_tasks.intake.stores import LocalStore
from asr_tasks.models import Recording
from asr_tasks.pipeline.gate import gate_shard
from asr_tasks.pipeline.index import index_results
from asr_tasks.pipeline.preprocess import preprocess, preprocess_shard
from asr_tasks.pipeline.results import StageResult, from_xcom, preprocessed, to_xcom
from asr_tasks.pipeline.sense import plan_ids, plan_shards, recordings_of, sense
from asr_tasks.pipeline.transcribe import transcribe_shard
from asr_tasks.records.access_log import AccessLog
from asr_tasks.records.holds import Holds
from asr_tasks.records.ledger import open_ledger
from asr_tasks.version import model_tag

DAY = date(2026, 11, 27)
PREFIX = "calls/2026/11/27/"


def test_shards_are_planned_from_the_listing_by_count_and_bytes() -> None:
    settings = Settings().override(shard_max_recordings=3, shard_max_bytes=1000)
    sizes = {"a": 100, "b": 100, "c": 100, "d": 100, "e": 5000, "f": 600, "g": 500, "h": 10}
    recordings = [Recording(f"id-{name}", "recordings", f"{PREFIX}{name}.wav", "etag", size, name, "2026-11-27")
                  for name, size in reversed(sizes.items())]
    shards = plan_shards(recordings, settings.airflow)
    assert [[r.call_id for r in shard] for shard in shards] == [
        ["a", "b", "c"],  # three at most
        ["d"], ["e"],  # a file over the byte limit gets a shard of its own
        ["f"], ["g", "h"],  # 600 + 500 would pass 1000 bytes
    ]
    assert plan_shards([], settings.airflow) == []


def test_tasks_hand_each_other_ids_and_read_the_recording_again(settings: Settings, jfk: Path,
                                                                 tmp_path: Path) -> None:
    """What XCom carries between the DAG's tasks is ids; the recording (its sidecar too) is found again by id."""
    store = LocalStore(settings.storage.path("store_root"))
    _seed(store, settings, jfk, tmp_path)
    sensed = sense(store, settings, DAY)
    ids = [r.recording_id for r in sensed]
    assert recordings_of(list(reversed(ids)) + ["0" * 24], store, settings) == list(reversed(sensed))
    assert [r.agent_id for r in recordings_of(ids, store, settings) if r.key.endswith("c1.flac")] == ["AG-7"]
    planned = plan_shards(sensed, settings.airflow)
    assert plan_ids(ids, settings) == [[r.recording_id for r in shard] for shard in planned]
    results = to_xcom([preprocess(r, store, settings) for r in recordings_of(ids[:2], store, settings)])
    assert {name for row in results for name in row} == {"recording_id", "state", "artefact_prefix", "speech_seconds"}
    assert [r.recording_id for r in from_xcom(results)] == ids[:2]


def _seed(store: LocalStore, settings: Settings, jfk: Path, tmp_path: Path) -> None:
    bucket = settings.storage.recordings_bucket
    store.put_file(bucket, PREFIX + "c1.flac", jfk)
    store.put_bytes(bucket, PREFIX + "c1.json", json.dumps({"agent_id": "AG-7", "direction": "inbound"}).encode())
    store.put_bytes(bucket, PREFIX + "empty.wav", b"")
    store.put_bytes(bucket, PREFIX + "notes.mp3", b"meeting notes, not audio\n" * 10)
    silence = tmp_path / "silence.wav"
    subprocess.run(["ffmpeg", "-v", "error", "-f", "lavfi", "-i", "anullsrc=r=8000:cl=mono", "-t", "5", str(silence)],
                   check=True)
    store.put_file(bucket, PREFIX + "silent.wav", silence)
    store.put_bytes(bucket, PREFIX + "_READY", b"")


def test_day_end_to_end_without_airflow(settings: Settings, model_dir: Path, jfk: Path, tmp_path: Path) -> None:
    store = LocalStore(settings.storage.path("store_root"))
    index = SqliteIndex(settings.index.path("index_path"))
    _seed(store, settings, jfk, tmp_path)

    recordings = sense(store, settings, DAY)
    assert sorted(r.key for r in recordings) == [PREFIX + n for n in ("c1.flac", "empty.wav", "notes.mp3", "silent.wav")]
    [shard] = plan_shards(recordings, settings.airflow)
    results = preprocess_shard(shard, store, settings)
    assert [r.key for r in results] == [r.key for r in shard]  # in the shard's order, whatever finished first
    reasons = {r.key.rsplit("/", 1)[-1]: r.reason for r in results if r.state == "quarantined"}
    assert reasons["empty.wav"] == "empty file (0 bytes)"
    assert reasons["notes.mp3"].startswith("not a decodable media file")
    prefixes = preprocessed(results)
    assert len(prefixes) == 2  # jfk and the silent call; quarantined ones never reach ASR
    transcribe_shard(prefixes, store, settings)
    assert gate_shard(results, store, settings) == 2
    assert index_results(results, store, index, settings) == {"indexed": 1, "needs_review": 1, "quarantined": 2}

    states = {row["key"].rsplit("/", 1)[-1]: row["state"] for row in index.recordings("2026-11-27")}
    assert states == {"c1.flac": "indexed", "silent.wav": "needs_review", "empty.wav": "quarantined",
                      "notes.mp3": "quarantined"}
    hits = index.search("ask not what your country", agent="AG-7")
    assert hits and hits[0].key == PREFIX + "c1.flac" and 0 <= hits[0].start < hits[0].end <= 11.1

    # A re-run of the day: every stage finds its artefact, the index is left as it is.
    jfk_result = next(r for r in results if r.key.endswith("c1.flac"))
    transcript = settings.storage.path("store_root") / settings.storage.artefacts_bucket / jfk_result.version.transcript(model_tag(settings.asr))
    stamp = transcript.stat().st_mtime_ns
    segments = index.segment_count()
    again = [preprocess(r, store, settings) for r in sense(store, settings, DAY)]
    assert again == results
    assert transcribe_shard(preprocessed(again), store, settings)["recordings"] == 0
    assert gate_shard(again, store, settings) == 0
    assert index_results(again, store, index, settings) == {"unchanged": 4}
    assert transcript.stat().st_mtime_ns == stamp and index.segment_count() == segments

    # The audit reads the gated transcripts from storage, whole: quality, failures and the model's own words.
    audited = {t.recording.key.rsplit("/", 1)[-1]: t for t in day_transcripts("2026-11-27", Artefacts.of(store, settings), settings)}
    assert sorted(audited) == ["c1.flac", "silent.wav"]
    assert audited["c1.flac"].quality == "pass" and audited["silent.wav"].quality_failures
    assert all(s.text_raw for s in audited["c1.flac"].segments)

    # The index is a view: rebuilt from the gated transcripts, without the model, it answers as before.
    hits = [(h.recording_id, h.start, h.text) for h in index.search("ask not what your country")]
    states = index.recordings("2026-11-27")
    code = ("import sys; from asr_tasks.cli.main import main; rc = main(['reindex', '--date', '2026-11-27']); "
            "print(sorted(m for m in ('faster_whisper', 'ctranslate2', 'onnxruntime') if m in sys.modules)); "
            "sys.exit(rc)")
    fresh = tmp_path / "rebuilt.sqlite"
    env = {"ASR_STORE_ROOT": settings.storage.store_root, "ASR_INDEX_PATH": str(fresh), "ASR_LEDGER_URL": settings.ledger.ledger_url,
           "ASR_MODEL_DIR": settings.asr.model_dir, "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines() == ["2026-11-27: indexed 1, needs_review 1, quarantined 2", "[]"]
    rebuilt = SqliteIndex(fresh)
    assert [(h.recording_id, h.start, h.text) for h in rebuilt.search("ask not what your country")] == hits
    assert rebuilt.recordings("2026-11-27") == states


def test_replaced_object_is_reprocessed_and_replaces_old_documents(
    settings: Settings, model_dir: Path, jfk: Path, tmp_path: Path
) -> None:
    store = LocalStore(settings.storage.path("store_root"))
    index = SqliteIndex(settings.index.path("index_path"))
    store.put_bytes(settings.storage.recordings_bucket, PREFIX + "c1.wav", b"")  # a failed upload...
    first = [preprocess(r, store, settings) for r in sense(store, settings, DAY)]
    gate_shard(first, store, settings)
    index_results(first, store, index, settings)
    assert [r["state"] for r in index.recordings()] == ["quarantined"]

    copy = tmp_path / "c1.wav"
    shutil.copyfile(jfk, copy)
    store.put_file(settings.storage.recordings_bucket, PREFIX + "c1.wav", copy)  # ...re-uploaded under the same key
    second = [preprocess(r, store, settings) for r in sense(store, settings, DAY)]
    assert second[0].recording_id != first[0].recording_id
    transcribe_shard(preprocessed(second), store, settings)
    gate_shard(second, store, settings)
    index_results(second, store, index, settings)
    assert [(r["recording_id"], r["state"]) for r in index.recordings()] == [(second[0].recording_id, "indexed")]


def test_a_stale_version_that_finishes_late_is_not_indexed_over_the_newer_one(
    settings: Settings, model_dir: Path, jfk: Path, tmp_path: Path
) -> None:
    store = LocalStore(settings.storage.path("store_root"))
    index = SqliteIndex(settings.index.path("index_path"))
    bucket = settings.storage.recordings_bucket
    store.put_file(bucket, PREFIX + "c1.flac", jfk)
    old = [preprocess(r, store, settings) for r in sense(store, settings, DAY)]  # yesterday's run, still going
    clip = tmp_path / "clip.flac"
    subprocess.run(["ffmpeg", "-v", "error", "-i", str(jfk), "-t", "3.5", str(clip)], check=True)
    store.put_file(bucket, PREFIX + "c1.flac", clip)  # the object is replaced; today's run takes the new version
    new = [preprocess(r, store, settings) for r in sense(store, settings, DAY)]
    for results in (new, old):  # the newer version finishes first
        transcribe_shard(preprocessed(results), store, settings)
        gate_shard(results, store, settings)
    assert index_results(new, store, index, settings).get("indexed") == 1
    assert index_results(old, store, index, settings) == {"superseded": 1}
    assert [r["recording_id"] for r in index.recordings(DAY)] == [new[0].recording_id]


def _run_day(store: LocalStore, index: SqliteIndex, settings: Settings) -> tuple[list[StageResult], dict[str, int]]:
    """Every stage over what sensing the day hands them, as the DAG runs them."""
    results = preprocess_shard(sense(store, settings, DAY), store, settings)
    transcribe_shard(preprocessed(results), store, settings)
    gate_shard(results, store, settings)
    return results, index_results(results, store, index, settings)


def test_a_new_version_of_a_held_call_waits_and_the_held_one_stays_searchable(
    settings: Settings, model_dir: Path, jfk: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index keys documents by bucket and key: a version indexed over a held one would replace its evidence."""
    store = LocalStore(settings.storage.path("store_root"))
    index = SqliteIndex(settings.index.path("index_path"))
    bucket, key = settings.storage.recordings_bucket, PREFIX + "c1.flac"
    store.put_file(bucket, key, jfk)
    [held], _ = _run_day(store, index, settings)
    ledger = open_ledger(settings.ledger)
    access = AccessLog(ledger)
    hold = Holds(ledger, access).place("key", "litigation 17", "officer", value=key)
    with monkeypatch.context() as patch:
        patch.setattr("asr_tasks.pipeline.sense.PIPELINE_VERSION", "99")  # a new pipeline version: not redone
        assert sense(store, settings, DAY) == []
    assert next(r for r in ledger.rows() if r["recording_id"] == held.recording_id)["pipeline_version"] != "99"

    clip = tmp_path / "clip.flac"
    subprocess.run(["ffmpeg", "-v", "error", "-i", str(jfk), "-t", "3.5", str(clip)], check=True)
    store.put_file(bucket, key, clip)  # new content under the held key
    assert _run_day(store, index, settings) == ([], {})  # the new version waits: no stage takes it
    [waiting] = [r for r in ledger.rows() if r["state"] == "held"]
    assert waiting["reason"].startswith(f"waits behind legal hold {hold.id}:") and key not in waiting["reason"]
    assert ledger.state(held.recording_id) == "indexed"
    assert [h.recording_id for h in index.search("ask not what your country")] == [held.recording_id]
    assert [(e.user, e.action, e.recording_id) for e in access.entries(user="pipeline")] == [
        ("pipeline", "hold", waiting["recording_id"]), ("pipeline", "hold", held.recording_id)]

    # A run that had taken the new version before the hold (stages still going) does not index it either.
    stray = preprocess_shard(recordings_of([waiting["recording_id"]], store, settings), store, settings)
    transcribe_shard(preprocessed(stray), store, settings)
    gate_shard(stray, store, settings)
    assert index_results(stray, store, index, settings) == {"held": 1}
    assert [r["recording_id"] for r in index.recordings()] == [held.recording_id]

    Holds(ledger, access).release(hold.id, "settled", "officer")
    [new], counts = _run_day(store, index, settings)  # the next sensing of the day takes it, as any new version
    assert new.recording_id == waiting["recording_id"] and counts == {"indexed": 1}
    assert ledger.state(held.recording_id) == "superseded"
    assert [r["recording_id"] for r in index.recordings()] == [new.recording_id]
    assert not index.search("ask not what your country")


def test_reindex_leaves_a_held_call_as_it_is(
    settings: Settings, model_dir: Path, jfk: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str]
) -> None:
    """A changed PII policy would mask a held call's stored transcripts and documents again: they are evidence."""
    from asr_tasks.cli.main import main
    from asr_tasks.pipeline.index import reindex_day

    store = card_call(settings, tmp_path)
    store.put_file(settings.storage.recordings_bucket, PREFIX + "c1.flac", jfk)
    clear = settings.override(redact_pii=False)
    index = SqliteIndex(settings.index.path("index_path"))
    results, _ = _run_day(store, index, clear)
    card = next(r for r in results if r.key.endswith("card.wav"))
    ledger = open_ledger(settings.ledger)
    Holds(ledger, AccessLog(ledger)).place("key", "fraud case 3", "officer", value=card.key)
    bucket, gated = settings.storage.artefacts_bucket, card.version.gated(model_tag(settings.asr))
    stored = store.get_bytes(bucket, gated)
    assert CARD.search(said(stored))  # in clear: a reindex with redaction on would mask it
    documents = [(s.start, s.text) for s in index.segments(card.recording_id)]

    monkeypatch.setattr("asr_tasks.cli.main.get_settings", lambda: settings)
    monkeypatch.setattr("asr_tasks.index.backends.open_index", lambda _settings: index)
    assert main(["reindex", "--date", DAY.isoformat()]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "2026-11-27: held 1, indexed 1, masked again 1",
        "  held 1: under a legal hold, left as they are (asr hold --list)"]
    assert store.get_bytes(bucket, gated) == stored
    assert [(s.start, s.text) for s in index.segments(card.recording_id)] == documents

    # An index rebuilt from nothing gets the held call's documents again, from its transcript as stored.
    rebuilt = SqliteIndex(tmp_path / "rebuilt.sqlite")
    assert reindex_day(DAY.isoformat(), store, rebuilt, settings) == {"held": 1, "indexed": 1}
    assert [(s.start, s.text) for s in rebuilt.segments(card.recording_id)] == documents
    assert store.get_bytes(bucket, gated) == stored


def test_a_late_upload_for_yesterday_is_taken_by_todays_run_once(settings: Settings, jfk: Path) -> None:
    store = LocalStore(settings.storage.path("store_root"))
    bucket = settings.storage.recordings_bucket
    yesterday, today = "calls/2026/11/26/", PREFIX
    store.put_file(bucket, yesterday + "early.flac", jfk)
    assert [r.key for r in sense(store, settings, DAY - timedelta(days=1))] == [yesterday + "early.flac"]
    store.put_file(bucket, yesterday + "late.flac", jfk)  # after yesterday's run had sensed its day
    store.put_file(bucket, today + "c1.flac", jfk)
    assert sorted(r.key for r in sense(store, settings, DAY)) == [yesterday + "late.flac", today + "c1.flac"]
    assert [r.key for r in sense(store, settings, DAY)] == [today + "c1.flac"]  # taken once: now in the ledger
    store.put_file(bucket, "calls/2026/11/25/never_run.flac", jfk)  # a day whose own run has not happened
    assert [r.key for r in sense(store, settings, DAY - timedelta(days=1))] == [yesterday + "early.flac",
                                                                              yesterday + "late.flac"]


CARD = re.compile(r"\d(?:(?:, ?|[ .-])?\d){12,}")


def card_call(settings: Settings, tmp_path: Path) -> LocalStore:
    """A store holding one call in which a card number is read out."""
    raw = tmp_path / "card.wav"
    subprocess.run(["espeak-ng", "-v", "en-us", "-s", "140", "-w", str(raw), "Thank you. My card number is four one "
                    "one one, one one one one, one one one one, one one one one. Goodbye."], check=True)
    store = LocalStore(settings.storage.path("store_root"))
    store.put_file(settings.storage.recordings_bucket, PREFIX + "card.wav", raw)
    return store


def said(artefact: bytes) -> str:
    """A stored transcript's text and, segment by segment, its words joined as the model said them."""
    segments = json.loads(artefact)["segments"]
    return " | ".join([s["text"] for s in segments] + ["".join(w["text"] for w in s["words"]) for s in segments])


def test_turning_redaction_on_masks_what_is_stored_without_the_model(
    settings: Settings, model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from asr_tasks.pipeline.index import reindex_day

    store = card_call(settings, tmp_path)
    clear = settings.override(redact_pii=False)  # a day processed before redaction was turned on
    results = [preprocess(r, store, clear) for r in sense(store, clear, DAY)]
    transcribe_shard(preprocessed(results), store, clear)
    gate_shard(results, store, clear)
    index = SqliteIndex(settings.index.path("index_path"))
    index_results(results, store, index, clear)
    bucket, version, model = settings.storage.artefacts_bucket, results[0].version, model_tag(settings.asr)
    assert CARD.search(said(store.get_bytes(bucket, version.gated(model))))  # stored in clear

    for loader in ("asr_tasks.pipeline.transcribe.load_engine", "asr_tasks.transcription.engines.get_engine"):
        monkeypatch.setattr(loader, lambda *a, **k: pytest.fail("reindex loaded the model"))
    assert reindex_day(DAY.isoformat(), store, index, settings)["masked again"] == 1
    for key in (version.gated(model), version.transcript(model)):
        text = said(store.get_bytes(bucket, key))
        assert not CARD.search(text) and "[CARD ****" in text, key
    assert not store.exists(bucket, version.unredacted(model))  # not kept unless asked for
    assert "[CARD ****" in " ".join(s.text for s in index.segments(results[0].recording_id))
    assert store.exists(bucket, version.redacted_audio)
    assert reindex_day(DAY.isoformat(), store, index, settings).get("masked again") is None  # once is enough


def test_a_kept_unredacted_transcript_stays_apart_and_is_what_a_new_policy_masks(
    settings: Settings, model_dir: Path, tmp_path: Path
) -> None:
    from asr_tasks.pipeline.index import reindex_day

    store = card_call(settings, tmp_path)
    kept = settings.override(keep_unredacted=True)
    results = [preprocess(r, store, kept) for r in sense(store, kept, DAY)]
    transcribe_shard(preprocessed(results), store, kept)
    gate_shard(results, store, kept)
    index = SqliteIndex(settings.index.path("index_path"))
    index_results(results, store, index, kept)
    bucket, version, rid = settings.storage.artefacts_bucket, results[0].version, results[0].recording_id
    model = model_tag(kept.asr)
    assert CARD.search(said(store.get_bytes(bucket, version.unredacted(model))))  # the one artefact in clear
    for key in (version.gated(model), version.transcript(model)):
        assert not CARD.search(said(store.get_bytes(bucket, key))), key
    assert "[CARD ****" in " ".join(s.text for s in index.segments(rid))
    from fastapi.testclient import TestClient

    from asr_tasks.web.app import create_app

    page = TestClient(create_app(kept, index=index, store=store))  # a privileged path reads it, and is logged
    answer = page.get(f"/api/recordings/{rid}/unredacted")
    assert answer.status_code == 200 and CARD.search(said(answer.content))
    assert not CARD.search(page.post("/api/search", json={"q": "card"}).text)

    # A policy without cards (a bank's choice) masks anew from the kept transcript: it can mask less, too.
    (tmp_path / "pii").mkdir()
    (tmp_path / "pii" / "phones.yaml").write_text("kinds:\n  phone:\n    pattern: '\\+\\d{6,}'\n    mask: '[PHONE]'\n")
    phones_only = kept.override(pii_dir=str(tmp_path / "pii"))
    assert reindex_day(DAY.isoformat(), store, index, phones_only)["masked again"] == 1
    gated = json.loads(store.get_bytes(bucket, version.gated(model)))
    assert gated["pii"] == [] and CARD.search(said(store.get_bytes(bucket, version.gated(model))))
    assert gated["quality"] == "pass"
