"""The QA audit: planted violations are found exactly, broken rule files are refused whole."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from asr_tasks import PIPELINE_VERSION
from asr_tasks.audit.redaction import KindCount, RedactionReport
from asr_tasks.audit.reports import report_csv, run_audit, stored_audit
from asr_tasks.audit.phrases import Phrase
from asr_tasks.audit.rules import AuditResult, RuleError, audit, load_rule_set, load_rules
from asr_tasks.config import PROJECT_ROOT, Settings
from asr_tasks.index.sqlite import SqliteIndex
from asr_tasks.intake.stores import LocalStore, put_json
from asr_tasks.models import Recording, Segment, Transcript, recording_id_for
from asr_tasks.records.access_log import AccessLog
from asr_tasks.records.anchors import stored_anchors
from asr_tasks.records.ledger import open_ledger
from asr_tasks.text.pii_policy import load_policy
from asr_tasks.version import DayReports, RecordingVersion, model_tag

RULES = PROJECT_ROOT / "include" / "qa_rules"
POLICY = load_policy(PROJECT_ROOT / "include" / "pii")
DAY = "2026-11-27"


def call(name: str, lines: list[tuple[str, float, float, str]], agent: str = "AG-1", duration: float = 120.0) -> Transcript:
    key = f"calls/2026/11/27/{name}.wav"
    rec = Recording(recording_id=recording_id_for("recordings", key, "e"), bucket="recordings", key=key, etag="e",
                    size=1, call_id=name, call_date=DAY, agent_id=agent)
    segs = [Segment(rec.recording_id, 0 if who == "agent" else 1, who, a, b, text) for who, a, b, text in lines]
    return Transcript(recording=rec, duration=duration, segments=segs, language="zh", model="m", pipeline_version="1")


DISCLOSED = ("agent", 1.0, 4.0, "您好，本次通话将被录音。")

CALLS = [
    # clean: disclosure in time, balanced talk, nothing forbidden
    call("clean", [DISCLOSED, ("customer", 5.0, 9.0, "我想问一下理财产品的风险。"),
                   ("agent", 10.0, 14.0, "产品有风险，收益不确定。"), ("customer", 15.0, 18.0, "好的，谢谢。")]),
    # promise of returns by the agent (traditional script), the same words from the customer are not a finding
    call("promise", [DISCLOSED, ("customer", 5.0, 8.0, "你们能保证收益吗？"),
                     ("agent", 9.0, 13.5, "可以，這款產品保證收益，穩賺不賠。"), ("customer", 14.0, 16.0, "好。")]),
    # disclosure said, but only after 15 s
    call("late_disclosure", [("agent", 1.0, 4.0, "您好，请问是王先生吗？"), ("customer", 5.0, 7.0, "是的。"),
                             ("agent", 20.0, 23.0, "本次通话将被录音。"), ("customer", 24.0, 26.0, "好的。")]),
    # card number read out by the agent, an ID number by the customer; a 70 s hold between
    call("pii", [DISCLOSED, ("agent", 5.0, 10.0, "您的卡号是4111 1111 1111 1111，对吗？"),
                 ("customer", 80.0, 85.0, "对，身份证号11010519491231002X。"), ("agent", 86.0, 88.0, "好的。")]),
    # the agent takes over 85 % of the talk time
    call("monologue", [DISCLOSED, ("agent", 5.0, 60.0, "我给您详细介绍一下这款产品的特点和历史表现。"),
                       ("customer", 61.0, 62.0, "嗯。")]),
]

PLANTED = {
    ("promise", "promise-of-return", "agent", 9.0),
    ("late_disclosure", "recording-disclosure", "agent", 0.0),
    ("pii", "card-number-read-out", "agent", 5.0),
    ("pii", "id-number-read-out", "customer", 80.0),
    ("pii", "long-hold", "any", 10.0),
    ("monologue", "agent-dominates", "agent", 0.0),
}


def found(findings: list) -> set[tuple[str, str, str, float]]:
    return {(f.key.rsplit("/", 1)[-1][:-4], f.rule_id, f.speaker, f.start) for f in findings}


def test_planted_violations_are_found_exactly() -> None:
    result = audit(CALLS, load_rules(RULES), DAY, POLICY)
    assert found(result.findings) == PLANTED
    promise = next(f for f in result.findings if f.rule_id == "promise-of-return")
    assert (promise.end, promise.matched_text, promise.severity) == (13.5, "保證收益", "high")  # as written
    assert result.summary()["by_severity"] == {"high": 3, "low": 2, "medium": 1}


def test_english_phrases_match_on_word_boundaries_after_normalisation() -> None:
    rules = load_rules(RULES)
    english = call("en", [("agent", 1.0, 5.0, "This call is recorded for quality purposes."),
                          ("agent", 6.0, 9.0, "Our fund is completely RISK-FREE!"),
                          ("customer", 10.0, 12.0, "Is it risk freely available?"),
                          ("agent", 13.0, 15.0, "We never say unguaranteed returns.")], agent="AG-9")
    assert found(audit([english], rules, DAY).findings) == {("en", "promise-of-return", "agent", 6.0)}
    assert Phrase.of("Ｇｕａｒａｎｔｅｅｄ  Return!").words == ("guaranteed", "return")  # what phrases compare
    assert Phrase.of("保證 收益").words == ("保", "证", "收", "益")


def test_luhn_option_keeps_only_valid_card_numbers(tmp_path: Path) -> None:
    (tmp_path / "cards.yaml").write_text(
        "rules:\n  - id: card\n    kind: regex\n    severity: high\n"
        "    pattern: '(?<!\\d)(?:\\d[ -]?){12,18}\\d(?!\\d)'\n    luhn: true\n"
    )
    t = call("cards", [("agent", 1.0, 3.0, "卡号4111 1111 1111 1111"), ("agent", 4.0, 6.0, "卡号4111 1111 1111 1112")])
    assert [f.start for f in audit([t], load_rules(tmp_path), DAY).findings] == [1.0]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("rules:\n  - id: a\n    kind: regex\n   severity: high\n", r"bad\.yaml:\d+: invalid YAML"),
        ("rules:\n  - id: a\n    kind: regex\n    severity: high\n    pattern: 'x'\n    phrase: y\n",
         r"bad\.yaml:6: rule 'a': unknown field 'phrase'"),
        ("rules:\n  - id: a\n    kind: regex\n    severity: high\n    pattern: '(unclosed'\n",
         r"bad\.yaml:5: rule 'a': invalid regular expression"),
        ("rules:\n  - id: a\n    kind: shout\n    severity: high\n", r"bad\.yaml:3: rule 'a': unknown kind 'shout'"),
        ("rules:\n  - id: a\n    kind: silence\n    severity: high\n", r"bad\.yaml:2: rule 'a': missing field 'max_seconds'"),
        ("rules:\n  - id: a\n    kind: silence\n    severity: urgent\n    max_seconds: 5\n",
         r"bad\.yaml:4: rule 'a': severity must be one of"),
        ("rulez: []\n", r"bad\.yaml:1: expected a mapping with one key, 'rules'"),
    ],
)
def test_broken_rule_files_are_rejected_with_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "good.yaml").write_text((RULES / "default.yaml").read_text())
    (tmp_path / "bad.yaml").write_text(text)
    with pytest.raises(RuleError, match=message):
        load_rules(tmp_path)


def _record_day(settings: Settings, calls: list[Transcript] = CALLS) -> SqliteIndex:
    """The day as the pipeline leaves it: gated transcripts in storage, final states in the ledger, the index."""
    store, ledger = LocalStore(settings.storage.path("store_root")), open_ledger(settings.ledger)
    index = SqliteIndex(settings.index.path("index_path"))
    ledger.sensed([t.recording for t in calls], model_tag(settings.asr), PIPELINE_VERSION)
    for t in calls:
        put_json(store, settings.storage.artefacts_bucket, RecordingVersion.of(t.recording).gated(model_tag(settings.asr)), t.to_dict())
        index.replace_recording(t)
        ledger.advance(t.recording.recording_id, t.state, stage="index", seconds=0.1)
    return index


def test_audit_stores_findings_and_writes_reports(settings: Settings, tmp_path: Path) -> None:
    index = _record_day(settings)
    store = LocalStore(settings.storage.path("store_root"))
    result = run_audit(DAY, load_rule_set(RULES), index, store, settings)
    assert found(result.findings) == PLANTED
    assert len(index.findings(DAY)) == len(PLANTED)
    run_audit(DAY, load_rule_set(RULES), index, store, settings)  # a re-run replaces, never adds
    assert len(index.findings(DAY)) == len(PLANTED)
    bucket = settings.storage.artefacts_bucket
    report = store.get_bytes(bucket, f"reports/qa/{DAY}/qa-audit.html").decode()
    assert "promise-of-return" in report and "AG-1" in report and "pii.wav @ 80.0 s" in report
    csv_rows = store.get_bytes(bucket, f"reports/qa/{DAY}/qa-audit.csv").decode().splitlines()
    assert len(csv_rows) == 1 + len(PLANTED) and "http://localhost:8091/call/" in csv_rows[1]  # each finding opens its call page


def test_the_audit_anchors_the_access_log_in_its_report_and_an_object(settings: Settings) -> None:
    index = _record_day(settings)
    store = LocalStore(settings.storage.path("store_root"))
    log = AccessLog(open_ledger(settings.ledger))
    log.append("auditor", "search", query="收益", hits=1)
    run_audit(DAY, load_rule_set(RULES), index, store, settings)
    bucket = settings.storage.artefacts_bucket
    anchor = json.loads(store.get_bytes(bucket, f"reports/qa/{DAY}/qa-audit.json"))["access_log_anchor"]
    last = log.verify()
    assert (anchor["id"], anchor["hash"]) == (last.last_id, last.last_hash)
    assert [(a.id, a.hash) for a in stored_anchors(store, bucket).anchors] == [(anchor["id"], anchor["hash"])]
    assert anchor["hash"] in store.get_bytes(bucket, f"reports/qa/{DAY}/qa-audit.html").decode()


def test_cli_refuses_a_broken_rule_set_and_audits_nothing(settings: Settings, tmp_path: Path) -> None:
    index = _record_day(settings)
    bad = tmp_path / "rules"
    bad.mkdir()
    (bad / "a.yaml").write_text((RULES / "default.yaml").read_text())
    (bad / "b.yaml").write_text("rules:\n  - id: x\n    kind: regex\n    severity: high\n    pattern: '['\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASR_")}
    env.update(ASR_INDEX_PATH=str(settings.index.path("index_path")), ASR_STORE_ROOT=str(settings.storage.path("store_root")),
               ASR_LEDGER_URL=settings.ledger.ledger_url, ASR_MODEL_DIR=settings.asr.model_dir)
    asr = str(Path(sys.executable).parent / "asr")
    proc = subprocess.run([asr, "audit", "--date", DAY, "--rerun", "--rules", str(bad)], env=env, capture_output=True,
                          text=True)
    assert proc.returncode == 2 and "b.yaml:5: rule 'x': invalid regular expression" in proc.stderr
    assert index.findings(DAY) == []
    proc = subprocess.run([asr, "audit", "--date", DAY, "--rerun", "--json"], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["summary"]["findings"] == len(PLANTED)


def test_the_csv_report_never_hands_a_spreadsheet_a_formula() -> None:
    """An agent id from an uploader's sidecar that a spreadsheet would run stays text in the CSV."""
    import csv
    import io

    hostile = call("promise", [DISCLOSED, ("agent", 9.0, 13.5, "这款产品保证收益。")], agent='=HYPERLINK("http://x","y")')
    result = audit([hostile], load_rules(RULES), DAY)
    rows = list(csv.DictReader(io.StringIO(report_csv(result, "http://search/"))))
    assert rows and all(row["agent_id"] == '\'=HYPERLINK("http://x","y")' for row in rows)
    assert all(not value.startswith(("=", "+", "-", "@")) for row in rows for value in row.values())


def test_personal_data_findings_keep_rule_speaker_and_seconds_but_only_the_mask() -> None:
    result = audit(CALLS, load_rules(RULES), DAY, POLICY)
    shown = {f.rule_id: (f.speaker, f.start, f.matched_text) for f in result.findings if f.key.endswith("pii.wav")}
    assert shown["card-number-read-out"] == ("agent", 5.0, "[CARD ****1111]")
    assert shown["id-number-read-out"] == ("customer", 80.0, "[ID]")
    assert "4111" not in report_csv(result, "http://search/").replace("****1111", "")


def masked(t: Transcript, *values: dict) -> Transcript:
    """The call as the gate stores it after masking: its personal data recorded (masked by the policy already)."""
    return dataclasses.replace(t, pii=list(values), pii_policy=POLICY.identity)


def value(kind: str, start: float, end: float, **more: object) -> dict:
    return {"kind": kind, "channel": 0, "speaker": "agent", "start": start, "end": end,
            "masked": f"[{kind.upper()}]", **more}


# A card read out in two goes (two parts), its security code found by context and overlapping the second part, a
# phone inside the first part's margin; an older entry (no ``by``, no ``parts``) at the very start of a 12 s call
# and an e-mail address at its very end; and a call with no personal data, which needs no rendition.
CARD = masked(call("card", [DISCLOSED, ("agent", 5.0, 11.0, "您的卡号是[CARD ****1111]，安全码[CARD_SECURITY]。")],
                   duration=30.0),
              value("card", 5.0, 10.0, by="pattern", parts=[[5.0, 7.0], [8.5, 10.0]]),
              value("card_security", 9.8, 11.0, by="context"),
              value("phone", 6.0, 6.5, by="pattern", parts=[[6.0, 6.5]]))
EDGE = masked(call("edge", [("agent", 0.1, 2.0, "[PHONE]"), ("agent", 11.0, 11.9, "[EMAIL]")], duration=12.0),
              value("phone", 0.1, 2.0),
              value("email", 11.0, 11.9, by="context", parts=[[11.2, 11.9]]))
REDACTION_DAY = [CARD, EDGE, CALLS[0]]
KINDS = (KindCount("card", 1, 0), KindCount("card_security", 0, 1), KindCount("email", 0, 1),
         KindCount("phone", 2, 0))


def _record_redaction_day(settings: Settings) -> tuple[SqliteIndex, LocalStore]:
    """The day with a redacted rendition stored for the card call only: the edge call's is missing."""
    index, store = _record_day(settings, REDACTION_DAY), LocalStore(settings.storage.path("store_root"))
    store.put_bytes(settings.storage.artefacts_bucket, RecordingVersion.of(CARD.recording).redacted_audio, b"fLaC")
    return index, store


def test_the_redaction_report_counts_kinds_seconds_and_missing_renditions(settings: Settings) -> None:
    settings = settings.override(pii_audio_margin_seconds=0.5)
    index, store = _record_redaction_day(settings)
    result = run_audit(DAY, load_rule_set(RULES), index, store, settings)
    report = result.redaction
    assert report is not None and report.kinds == KINDS
    assert (report.values, report.by_pattern, report.by_context, report.recordings_with_pii) == (5, 3, 2, 2)
    # card: [4.5, 7.5] (the phone inside it) + [8.0, 10.5] joined with the code's [9.3, 11.5] = 3.0 + 3.5;
    # edge: [-0.4, 2.5] clipped to [0, 2.5] + [10.7, 12.4] clipped to [10.7, 12.0] = 2.5 + 1.3
    assert report.seconds_silenced == pytest.approx(10.3)
    assert report.missing_renditions == (EDGE.recording.recording_id,)  # by id, never the key
    assert (report.redact_pii, report.margin_seconds) == (True, 0.5)
    assert stored_audit(DAY, store, settings) == result  # read back as it was stored
    bucket = settings.storage.artefacts_bucket
    stored = json.loads(store.get_bytes(bucket, DayReports(DAY).audit("json")))
    assert stored["redaction"]["kinds"]["card_security"] == {"pattern": 0, "context": 1}
    assert "edge.wav" not in json.dumps(stored["redaction"])
    html = store.get_bytes(bucket, DayReports(DAY).audit("html")).decode()
    assert "<tr><td>card_security</td><td>0</td><td>1</td></tr>" in html and "10.3 s silenced" in html
    edge = EDGE.recording.recording_id
    assert f'<li><a href="http://localhost:8091/call/{edge}">{edge}</a></li>' in html


def test_a_day_whose_renditions_are_all_stored_says_so(settings: Settings) -> None:
    index, store = _record_redaction_day(settings)
    store.put_bytes(settings.storage.artefacts_bucket, RecordingVersion.of(EDGE.recording).redacted_audio, b"fLaC")
    result = run_audit(DAY, load_rule_set(RULES), index, store, settings)
    assert result.redaction is not None and result.redaction.missing_renditions == ()
    html = store.get_bytes(settings.storage.artefacts_bucket, DayReports(DAY).audit("html")).decode()
    assert "Every call with personal data has its redacted audio." in html


def test_the_redaction_report_round_trips_and_an_old_report_without_it_still_reads(settings: Settings) -> None:
    report = RedactionReport(True, 0.25, KINDS, 2, 8.8, ("r1",))
    assert RedactionReport.from_dict(json.loads(json.dumps(report.to_dict()))) == report
    store, bucket = LocalStore(settings.storage.path("store_root")), settings.storage.artefacts_bucket
    finding = audit([CALLS[2]], load_rules(RULES), DAY).findings  # as an older run_audit stored them
    store.put_bytes(bucket, DayReports(DAY).audit("json"), json.dumps(
        {"summary": AuditResult(DAY, 1, finding).summary(), "findings": [f.to_dict() for f in finding],
         "opened": []}).encode())
    assert stored_audit(DAY, store, settings) == AuditResult(DAY, 1, finding, redaction=None)


def test_cli_prints_the_redaction_after_the_counts_per_rule(settings: Settings) -> None:
    _record_redaction_day(settings)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASR_")}
    env.update(ASR_INDEX_PATH=str(settings.index.path("index_path")), ASR_STORE_ROOT=str(settings.storage.path("store_root")),
               ASR_LEDGER_URL=settings.ledger.ledger_url, ASR_MODEL_DIR=settings.asr.model_dir)
    asr = str(Path(sys.executable).parent / "asr")
    proc = subprocess.run([asr, "audit", "--date", DAY, "--rerun"], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    at = lines.index(next(line for line in lines if line.startswith("redaction:")))
    assert lines[1:at] and all(line.startswith("  ") and line[2:6].strip().isdigit() for line in lines[1:at])
    assert lines[at:at + 6] == [  # the default margin, 0.25 s: 2.5 + 3.0 s of the card call, 2.25 + 1.05 s of the edge's
        "redaction: 5 values masked (3 by pattern, 2 by context), 8.8 s silenced, 1 rendition missing",
        "  card           1 by pattern  0 by context",
        "  card_security  0 by pattern  1 by context",
        "  email          0 by pattern  1 by context",
        "  phone          2 by pattern  0 by context",
        f"  rendition missing  {EDGE.recording.recording_id}",
    ]
    assert lines[at + 6].startswith("SEVERITY")
    stored = subprocess.run([asr, "audit", "--date", DAY, "--json"], env=env, capture_output=True, text=True)
    assert json.loads(stored.stdout)["redaction"]["missing_renditions"] == [EDGE.recording.recording_id]
    old = json.loads(LocalStore(settings.storage.path("store_root")).get_bytes(
        settings.storage.artefacts_bucket, DayReports(DAY).audit("json")))
    del old["redaction"]
    LocalStore(settings.storage.path("store_root")).put_bytes(
        settings.storage.artefacts_bucket, DayReports(DAY).audit("json"), json.dumps(old).encode())
    before = subprocess.run([asr, "audit", "--date", DAY], env=env, capture_output=True, text=True)
    assert before.returncode == 0, before.stderr
    assert "redaction: not in this report (audited before reports had it; --rerun adds it)" in before.stdout.splitlines()


def test_the_app_serves_the_redaction_with_links_inside_the_app(settings: Settings) -> None:
    from fastapi.testclient import TestClient

    from asr_tasks.web.app import create_app

    index, store = _record_redaction_day(settings)
    run_audit(DAY, load_rule_set(RULES), index, store, settings)
    html = TestClient(create_app(settings), root_path="/search").get(f"/reports/qa/{DAY}").text
    edge = EDGE.recording.recording_id
    assert "<tr><td>phone</td><td>2</td><td>0</td></tr>" in html
    assert f'<li><a href="call/{edge}">{edge}</a></li>' in html and "localhost" not in html
