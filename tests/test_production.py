"""A production for e-discovery: a day's calls as natives, texts, a Concordance load file, their access log and a
manifest of hashes, made through the page's door (its refusals, its redactions, a Team Lead's scope), from the
command line and from the page, and checked afterwards file by file."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import subprocess
import zipfile
from dataclasses import dataclass, fields
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from test_cli import asr, stores_in
from test_pages_walk import granting
from test_records import recording
from test_webui import gated

from asr_tasks import PIPELINE_VERSION
from asr_tasks.config import Settings
from asr_tasks.index.query import Filters
from asr_tasks.index.sqlite import SqliteIndex
from asr_tasks.inputs import InputError
from asr_tasks.intake.demo_corpus import JFK
from asr_tasks.intake.stores import LocalStore, put_json
from asr_tasks.models import Recording, Segment, Transcript
from asr_tasks.records import production
from asr_tasks.records.access_log import AccessEntry, open_access_log
from asr_tasks.records.ledger import open_ledger
from asr_tasks.records.production import COLUMNS, Production, produce, searched, verify
from asr_tasks.version import RecordingVersion
from asr_tasks.web.app import create_app
from asr_tasks.web.door import EXTENSIONS, MAGIC, Door

DAY, NEXT = "2026-11-27", "2026-11-28"
CARD = "4111 1111 1111 1111"


@dataclass
class Day:
    """Two days of calls: ``plain`` (the wealth team's, nothing personal said), ``card`` (retail: a card number
    read out, masked, its audio silenced in a rendition, its words before masking kept), ``later`` (retail, the
    next day), ``erased`` (its erasure begun) and ``unrendered`` (a card number said, no rendition made)."""

    settings: Settings
    index: SqliteIndex
    store: LocalStore
    calls: dict[str, Recording]
    rendition: bytes

    def door(self, user: str = "auditor") -> Door:
        """The door ``asr produce`` goes through: every call, no request."""
        return Door(None, user, self.settings, lambda: self.index, lambda: self.store,
                    open_ledger(self.settings.ledger), open_access_log(self.settings))

    def id(self, name: str) -> str:
        return self.calls[name].recording_id


def _index(day: Day, rec: Recording, text: str, pii: bool = False) -> None:
    """The call's audio as uploaded, its gated transcript (what says whether personal data was said) and index
    documents."""
    day.store.put_file("recordings", rec.key, JFK)
    transcript = Transcript(rec, 11.0, [Segment(rec.recording_id, 0, "agent", 1.0, 3.0, text),
                                        Segment(rec.recording_id, 1, "customer", 3.5, 5.0, "thank you")],
                            "en", "m", PIPELINE_VERSION,
                            pii=[{"kind": "card", "start": 1.0, "end": 3.0}] if pii else [])
    gated(day.store, day.settings, transcript)
    day.index.replace_recording(transcript)


@pytest.fixture(scope="module")
def day(tmp_path_factory: pytest.TempPathFactory) -> Day:
    root = tmp_path_factory.mktemp("production")
    settings = Settings().override(store_root=str(root / "store"), index_path=str(root / "index.sqlite"),
                                   work_dir=str(root / "work"), ledger_url=f"sqlite:///{root / 'ledger.sqlite'}")
    rendition = root / "redacted.flac"
    subprocess.run(["ffmpeg", "-v", "error", "-i", str(JFK), "-af", "volume=0:enable='between(t,1,3)'",
                    str(rendition)], check=True)
    calls = {"plain": recording("a.flac", "CU-1", "AG-1004"), "card": recording("b.flac", "CU-2", "AG-1001"),
             "later": recording("c.flac", "CU-2", "AG-1002", day=NEXT), "erased": recording("d.flac", "CU-3", "AG-1001"),
             "unrendered": recording("e.flac", "CU-3", "AG-1001")}
    built = Day(settings, SqliteIndex(settings.index.path("index_path")), LocalStore(settings.storage.path("store_root")),
                calls, rendition.read_bytes())
    for name, text in (("plain", "secret words"), ("later", "secret words later"), ("erased", "other words")):
        _index(built, calls[name], text)
    for name in ("card", "unrendered"):
        _index(built, calls[name], "secret card [CARD ****]", pii=True)
    card = RecordingVersion.of(calls["card"])
    bucket = settings.storage.artefacts_bucket
    built.store.put_file(bucket, card.redacted_audio, rendition)
    put_json(built.store, bucket, card.unredacted("m"), Transcript(
        calls["card"], 11.0, [Segment(calls["card"].recording_id, 0, "agent", 1.0, 3.0, f"secret card {CARD}")],
        "en", "m", PIPELINE_VERSION).to_dict())
    ledger = open_ledger(settings.ledger)
    ledger.sensed([calls["erased"]], "m", PIPELINE_VERSION)
    ledger.erasing([built.id("erased")], "officer", "customer-request")
    return built


@pytest.fixture(scope="module")
def package(day: Day, tmp_path_factory: pytest.TempPathFactory) -> Production:
    """Every call of the two days and one no one knows, one of them asked for twice, produced redacted."""
    ids = [day.id(n) for n in ("later", "plain", "card", "erased", "unrendered", "plain")] + ["f" * 24]
    return produce(day.door(), ids, tmp_path_factory.mktemp("packages") / "case-17")


def load_file(folder: Path) -> list[dict[str, str]]:
    """The load file read back as a review tool reads it: BOM, CRLF, ASCII 20 between þ-qualified values."""
    data = (folder / "DATA" / "loadfile.dat").read_bytes()
    assert data.startswith(b"\xef\xbb\xbf") and data.endswith(b"\r\n") and b"\n" not in data.replace(b"\r\n", b"")
    lines = [[v.strip("þ") for v in line.split("\x14")] for line in data.decode("utf-8-sig").split("\r\n")[:-1]]
    assert lines[0] == list(COLUMNS)
    return [dict(zip(lines[0], line)) for line in lines[1:]]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_production_holds_each_call_s_audio_text_load_file_access_log_and_manifest(day: Day,
                                                                                    package: Production) -> None:
    folder = package.directory
    order = sorted(("plain", "card"), key=day.id) + ["later"]  # by day, then by id
    assert [p.recording_id for p in package.produced] == [day.id(n) for n in order]
    bates = ["CALL000001", "CALL000002", "CALL000003"]
    assert [p.bates for p in package.produced] == bates
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    assert files == sorted(["MANIFEST.sha256", "DATA/loadfile.dat", "DATA/access_log.jsonl",
                            *(f"NATIVES/{b}.flac" for b in bates), *(f"TEXT/{b}.{f}" for b in bates for f in ("txt", "json"))])
    rows = load_file(folder)
    assert [(r["BEGBATES"], r["ENDBATES"], r["RECORDING_ID"], r["CALL_DATE"]) for r in rows] == [
        (b, b, day.id(n), day.calls[n].call_date) for b, n in zip(bates, order)]
    for row in rows:
        assert row["SHA256"] == sha256(folder / row["NATIVE_PATH"].replace("\\", "/"))
        assert json.loads((folder / row["JSON_PATH"].replace("\\", "/")).read_text())["recording_id"] == row["RECORDING_ID"]
    by_name = {n: r for n, r in zip(order, rows)}
    assert (by_name["card"]["AGENT"], by_name["card"]["CUSTOMER"], by_name["card"]["DURATION_SECONDS"]) == (
        "AG-1001", "CU-2", "11.00")
    assert {n: (r["AUDIO_REDACTED"], r["TEXT_REDACTED"]) for n, r in by_name.items()} == {
        "plain": ("N", "N"), "card": ("Y", "Y"), "later": ("N", "N")}
    text = (folder / by_name["card"]["TEXT_PATH"].replace("\\", "/")).read_text()
    assert "[00:00:01.000] agent: secret card [CARD ****]" in text and "[00:00:03.500] customer: thank you" in text
    # The refused calls, each with the page's answer, and none of their files.
    assert dict(package.refused) == {day.id("erased"): f"410 recording {day.id('erased')} was erased",
                                     day.id("unrendered"): f"409 recording {day.id('unrendered')}: the original is "
                                                           "not served: its redacted audio is not ready",
                                     "f" * 24: f"404 no recording {'f' * 24}"}
    assert day.calls["erased"].key not in str(package.to_dict())


def test_a_call_whose_personal_data_was_found_is_produced_silenced_and_masked(day: Day, package: Production) -> None:
    card = next(p for p in package.produced if p.recording_id == day.id("card"))
    plain = next(p for p in package.produced if p.recording_id == day.id("plain"))
    folder = package.directory
    assert (folder / card.files[0]).read_bytes() == day.rendition != JFK.read_bytes()
    assert (folder / plain.files[0]).read_bytes() == JFK.read_bytes()  # nothing said to silence: as uploaded
    assert CARD not in "".join((folder / f).read_text() for f in card.files[1:])


def test_the_access_log_holds_every_row_of_the_calls_the_production_s_own_included(day: Day,
                                                                                 package: Production) -> None:
    rows = [json.loads(line) for line in (package.directory / "DATA" / "access_log.jsonl").read_text().splitlines()]
    assert all(set(r) == {f.name for f in fields(AccessEntry)} for r in rows)  # AccessEntry.to_dict, whole
    exports = [(r["recording_id"], r["detail"]) for r in rows if r["action"] == "export"]
    assert exports == [(p.recording_id, f"production case-17: {p.bates}, "
                                        f"audio {'redacted' if p.row['AUDIO_REDACTED'] == 'Y' else 'as uploaded'}")
                       for p in package.produced]
    assert {r["recording_id"] for r in rows} == {p.recording_id for p in package.produced}


def test_verify_names_each_file_changed_removed_or_added(package: Production, tmp_path: Path) -> None:
    copy = Path(shutil.copytree(package.directory, tmp_path / "copy"))
    assert verify(copy).intact
    checked = subprocess.run(["sha256sum", "--strict", "-c", "MANIFEST.sha256"], cwd=copy, capture_output=True,
                             text=True)
    assert checked.returncode == 0 and checked.stdout.count(": OK") == 11, checked.stdout + checked.stderr
    native = copy / package.produced[1].files[0]
    data = bytearray(native.read_bytes())
    data[len(data) // 2] ^= 1
    native.write_bytes(bytes(data))
    (copy / package.produced[0].files[1]).unlink()
    (copy / "NATIVES" / "CALL000009.flac").write_bytes(b"fLaC")
    found = verify(copy)
    assert not found.intact
    assert (found.altered, found.missing, found.unlisted) == (
        [package.produced[1].files[0]], [package.produced[0].files[1]], ["NATIVES/CALL000009.flac"])
    assert found.problems() == [f"missing: {package.produced[0].files[1]}", f"altered: {package.produced[1].files[0]}",
                                "not in the manifest: NATIVES/CALL000009.flac",
                                f"load file: CALL000002: {package.produced[1].files[0]} is not the native whose "
                                "SHA256 the row gives", "not in the load file: NATIVES/CALL000009.flac"]


def sha256sum_check(folder: Path) -> int:
    """What ``sha256sum -c`` says of the package: 0 when every line of its manifest holds."""
    return subprocess.run(["sha256sum", "--strict", "--quiet", "-c", "MANIFEST.sha256"], cwd=folder,
                          capture_output=True).returncode


def test_verify_fails_an_altered_native_whatever_line_the_manifest_gains(package: Production, tmp_path: Path) -> None:
    """A line appended with the changed file's hash leaves the first line failing, as for ``sha256sum -c``; a line
    changed instead passes ``sha256sum -c``, and the load file's hash of the native still tells."""
    copy = Path(shutil.copytree(package.directory, tmp_path / "appended"))
    native = package.produced[1].files[0]
    data = bytearray((copy / native).read_bytes())
    data[len(data) // 2] ^= 1
    (copy / native).write_bytes(bytes(data))
    with (copy / "MANIFEST.sha256").open("a") as manifest:
        manifest.write(f"{sha256(copy / native)}  {native}\n")
    assert sha256sum_check(copy) == 1
    row = f"load file: CALL000002: {native} is not the native whose SHA256 the row gives"
    assert verify(copy).problems() == [f"altered: {native}", f"listed twice with different hashes: {native}", row]
    shown = asr("produce", "--verify", str(copy))
    assert (shown.returncode, shown.stdout.splitlines()) == (1, [f"altered: {native}",
                                                                 f"listed twice with different hashes: {native}", row])

    lines = (package.directory / "MANIFEST.sha256").read_text().splitlines()
    rewritten = [f"{sha256(copy / native)}  {native}" if line.endswith(f"  {native}") else line for line in lines]
    (copy / "MANIFEST.sha256").write_text("".join(f"{line}\n" for line in rewritten))
    assert sha256sum_check(copy) == 0  # the manifest alone no longer tells
    assert verify(copy).problems() == [row]


def test_verify_fails_a_load_file_row_whose_files_are_gone(package: Production, tmp_path: Path) -> None:
    """A call's files removed with their manifest lines pass ``sha256sum -c``; its row in the load file still names
    them. A native put in with a manifest line of its own is in no row."""
    copy = Path(shutil.copytree(package.directory, tmp_path / "removed"))
    gone = package.produced[0].files
    for path in gone:
        (copy / path).unlink()
    (copy / "NATIVES" / "CALL000009.flac").write_bytes(b"fLaC")
    kept = [line for line in (copy / "MANIFEST.sha256").read_text().splitlines() if line.split("  ", 1)[1] not in gone]
    (copy / "MANIFEST.sha256").write_text("".join(f"{line}\n" for line in kept)
                                          + f"{sha256(copy / 'NATIVES' / 'CALL000009.flac')}  NATIVES/CALL000009.flac\n")
    assert sha256sum_check(copy) == 0
    found = verify(copy)
    assert not found.intact and found.problems() == [
        *(f"load file: CALL000001: {path} is not in the package nor in its manifest" for path in gone),
        "not in the load file: NATIVES/CALL000009.flac"]


def test_the_original_is_the_upload_and_the_words_before_masking(day: Day, tmp_path: Path) -> None:
    made = produce(day.door(), [day.id("card")], tmp_path / "original", original=True, prefix="ACME", start=41)
    [card] = made.produced
    assert card.bates == "ACME000041" and (card.row["AUDIO_REDACTED"], card.row["TEXT_REDACTED"]) == ("N", "N")
    assert (made.directory / card.files[0]).read_bytes() == JFK.read_bytes()
    assert f"agent: secret card {CARD}" in (made.directory / card.files[1]).read_text()
    with pytest.raises(InputError, match="original: not an empty folder"):
        produce(day.door(), [day.id("card")], tmp_path / "original")


def test_a_search_chooses_every_call_it_matches_on_every_page(day: Day, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(production, "SEARCH_PAGE", 1)
    assert sorted(searched(day.index, "secret", Filters())) == sorted(
        day.id(n) for n in ("plain", "card", "later", "unrendered"))
    assert searched(day.index, "secret", Filters(date_from=NEXT)) == [day.id("later")]
    assert {m for _, _, m in MAGIC} <= set(EXTENSIONS)  # every audio the door serves has a file name's extension


def unzipped(answer: bytes, into: Path) -> Path:
    """The zip the page sent, unpacked; the package's folder in it."""
    with zipfile.ZipFile(io.BytesIO(answer)) as archive:
        archive.extractall(into)
    [folder] = [p for p in into.iterdir() if p.is_dir()]
    return folder


def test_the_page_produces_through_the_door(day: Day, tmp_path: Path) -> None:
    """The export permission gets the package; the original needs the unredacted one too (403); a Team Lead's
    production holds their teams' calls only, another team's call being unknown to it."""
    grants = {"eve": {"read", "export"}, "lee": {"read_team", "export", "read_unredacted"},
              "ann": {"read", "export", "access_log"}}
    client = TestClient(create_app(day.settings, index=day.index, store=day.store, authorize=granting(grants, [])))
    refused = client.post("/api/produce.zip", json={"q": "secret", "original": True}, headers={"X-User": "eve"})
    assert refused.status_code == 403 and "Call Unredacted Reader" in refused.json()["detail"]
    assert client.post("/api/produce.zip", json={}, headers={"X-User": "eve"}).status_code == 422
    nothing = client.post("/api/produce.zip", json={"q": "zzzznothing"}, headers={"X-User": "eve"})
    assert nothing.status_code == 422 and "nothing to produce" in nothing.json()["detail"]
    some_refused = client.post("/api/produce.zip", data={"q": "secret"}, headers={"X-User": "eve"})
    assert some_refused.headers["x-refused-calls"] == "1" and some_refused.headers["x-produced-calls"] == "3"
    assert '-1-refused.zip"' in some_refused.headers["content-disposition"]
    answer = client.post("/api/produce.zip", json={"q": "secret", "date_from": DAY, "date_to": DAY},
                         headers={"X-User": "eve"})
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/zip"
    folder = unzipped(answer.content, tmp_path / "eve")
    assert verify(folder).intact
    assert {r["RECORDING_ID"] for r in load_file(folder)} == {day.id("plain"), day.id("card")}
    # who else read these calls is the access log's: an exporter without it gets the production's own rows only
    own = [json.loads(line) for line in (folder / "DATA" / "access_log.jsonl").read_text().splitlines()]
    assert len(own) == 2 and all(r["user"] == "eve" and r["detail"].startswith(f"production {folder.name}: ")
                                 for r in own)
    audited = client.post("/api/produce.zip", json={"ids": [day.id("plain")]}, headers={"X-User": "ann"})
    history = (unzipped(audited.content, tmp_path / "ann") / "DATA" / "access_log.jsonl").read_text()
    assert '"user": "eve"' in history and '"user": "ann"' in history
    lead = client.post("/api/produce.zip", data={"q": "secret", "ids": [day.id("plain")], "original": "true"},
                       headers={"X-User": "lee"})
    assert lead.status_code == 200
    folder = unzipped(lead.content, tmp_path / "lee")
    assert verify(folder).intact
    # his teams' calls, as uploaded; the words before masking where they were kept, else masked (REDACTED)
    assert {r["RECORDING_ID"]: (r["AGENT"], r["AUDIO_REDACTED"], r["TEXT_REDACTED"]) for r in load_file(folder)} == {
        day.id("card"): ("AG-1001", "N", "N"), day.id("later"): ("AG-1002", "N", "N"),
        day.id("unrendered"): ("AG-1001", "N", "Y")}
    everything = b"".join(p.read_bytes() for p in (tmp_path / "lee").rglob("*") if p.is_file())
    assert b"AG-1004" not in everything and day.calls["plain"].key.encode() not in everything
    assert f"{day.id('plain')}: 404 no recording {day.id('plain')}".encode() in everything  # unknown to him


def test_asr_produce_writes_a_package_and_verify_says_whether_it_is_intact(day: Day, tmp_path: Path) -> None:
    env = stores_in(day.settings)
    target = tmp_path / "case-18"
    made = asr("produce", "--recordings", day.id("later"), day.id("card"), "--to", str(target), "--prefix", "BANK",
               env=env)
    assert made.returncode == 0, made.stderr
    lines = made.stdout.splitlines()
    assert lines[0].split() == ["BATES", "RECORDING", "DATE", "FILES"]
    assert lines[1].split()[:3] == ["BANK000001", day.id("card"), DAY]
    assert lines[-1].startswith(f"2 calls produced into {target} (BANK000001-BANK000002), 0 refused")
    assert asr("produce", "--verify", str(target), env=env).returncode == 0
    again = asr("produce", "--recordings", day.id("card"), "--to", str(target), env=env)
    assert again.returncode == 2 and f"{target}: not an empty folder" in again.stderr
    one = asr("produce", "--recordings", day.id("card"), "--to", str(tmp_path / "case-19"), env=env)
    assert one.returncode == 0 and one.stdout.splitlines()[-1].startswith("1 call produced into"), one.stderr
    nothing = asr("produce", "--query", "zzzqqq", "--to", str(tmp_path / "case-20"), env=env)
    assert nothing.returncode == 2 and "no call matches: there is nothing to produce" in nothing.stderr
    assert not (tmp_path / "case-20").exists()  # as the page refuses it: no empty package
    (target / "TEXT" / "BANK000002.txt").write_text("nothing was said")
    broken = asr("produce", "--verify", str(target), env=env)
    assert broken.returncode == 1 and broken.stdout == "altered: TEXT/BANK000002.txt\n"
