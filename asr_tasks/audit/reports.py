"""A day's audit run: the rules over its gated transcripts, the findings into the index, the report into storage.

The report (HTML, CSV, JSON) links every finding to its second on the call page,
says how the day's masking fared (``audit.redaction``) and lists who opened which
call that day; ``stored_audit`` reads its JSON back.
"""

from __future__ import annotations

import csv
import io
import json
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from asr_tasks.audit.redaction import RedactionReport, redaction_report
from asr_tasks.audit.rules import AuditResult, Finding, RuleSet, audit
from asr_tasks.audit.reviews import Reviews, dismissed
from asr_tasks.audit.saved_searches import SavedSearches, watch_findings
from asr_tasks.audit.score_overrides import ScoreOverrides, standing
from asr_tasks.audit.call_score import CallScore
from asr_tasks.audit.scorecards import ScorecardError, answer_calls, configured_scorecard
from asr_tasks.audit.trends import day_calls, write_day_calls
from asr_tasks.config import Settings
from asr_tasks.index.base import TranscriptIndex
from asr_tasks.intake.artefacts import Artefacts
from asr_tasks.intake.stores import ObjectStore
from asr_tasks.models import Transcript
from asr_tasks.records.access_log import AccessLog
from asr_tasks.records.anchors import Anchor, signing_key, write_anchor
from asr_tasks.records.ledger import open_ledger
from asr_tasks.records.locking import record_locks
from asr_tasks.records.teams import configured_teams
from asr_tasks.states import RecordingState
from asr_tasks.templates import render
from asr_tasks.text.pii_policy import load_policy
from asr_tasks.text.spreadsheet import spreadsheet_safe
from asr_tasks.version import DayReports, RecordingVersion

log = logging.getLogger(__name__)
CSV_FIELDS = ["rule_id", "severity", "key", "agent_id", "speaker", "start", "end", "matched_text", "confidence",
              "recording_id", "description", "rule_set", "link"]


def app_link(path: str, search_url: str) -> str:
    """A page of the app: under ``search_url`` (the stored report, read outside the app), or relative to the
    page's ``<base href>`` when it is empty (the report the app serves)."""
    base = f"{search_url.rstrip('/')}/" if search_url else ""
    return f"{base}{path}"


def call_link(recording_id: str, search_url: str) -> str:
    """The recording's call page."""
    return app_link(f"call/{recording_id}", search_url)


@dataclass(frozen=True)
class DayLinks:
    """Where the QA team goes on from a day's report: the trends up to that day, and the day's review queue."""

    trends: str
    reviews: str


def day_links(day: str, search_url: str) -> DayLinks:
    return DayLinks(app_link(f"trends?date_to={day}", search_url), app_link(f"reviews?date={day}", search_url))


def finding_link(f: Finding, search_url: str) -> str:
    """Where the call page opens this recording at this finding's second."""
    return f"{call_link(f.recording_id, search_url)}?t={f.start:.2f}"


def missing_links(redaction: RedactionReport | None, search_url: str) -> list[tuple[str, str]]:
    """Each recording whose redacted rendition is missing, with its call page: where an auditor checks it."""
    return [(rid, call_link(rid, search_url)) for rid in (redaction.missing_renditions if redaction else ())]


def report_csv(result: AuditResult, search_url: str) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_FIELDS, extrasaction="ignore")
    writer.writeheader()
    for f in result.findings:
        row = {**f.to_dict(), "link": finding_link(f, search_url)}
        writer.writerow({name: spreadsheet_safe(value) for name, value in row.items()})
    return buf.getvalue()


def report_html(result: AuditResult, search_url: str, opened: list[dict[str, Any]], anchor: Anchor | None) -> str:
    """The day's audit as a page: counts per rule and agent, each finding linked to its second, who opened what,
    and the access log's anchor."""
    return render("qa_audit.html", day=result.call_date, summary=result.summary(),
                  findings=[(f, finding_link(f, search_url)) for f in result.findings], opened=opened,
                  redaction=result.redaction, missing=missing_links(result.redaction, search_url),
                  links=day_links(result.call_date, search_url), anchor=anchor)


def report_json(result: AuditResult, opened: list[dict[str, Any]], anchor: Anchor | None) -> dict[str, Any]:
    """What ``stored_audit`` and the app read back: the summary, the findings, the calls' tags, the redaction, who
    opened what; and the access log's anchor as the audit found it (``anchors.py``)."""
    return {"summary": result.summary(), "findings": [f.to_dict() for f in result.findings], "tags": result.tags,
            "redaction": result.redaction.to_dict() if result.redaction else None, "opened": opened,
            "access_log_anchor": anchor.to_dict() if anchor else None}


def scores_json(result: AuditResult) -> dict[str, Any]:
    """What ``stored_audit`` reads back of the day's scores: each call's automatic answers."""
    return {"scores": [s.to_dict() for s in result.scores]}


def opened_on(day: str, settings: Settings) -> list[dict[str, Any]]:
    """The recordings opened on the search page that day (UTC): who played or opened which, when, from where."""
    start = datetime.fromisoformat(day).replace(tzinfo=timezone.utc)
    entries = AccessLog(open_ledger(settings.ledger)).entries(since=start, until=start + timedelta(days=1),
                                                              actions=("play", "read"))
    return [{k: v for k, v in e.to_dict().items() if k in ("at", "user", "action", "recording_id", "detail")}
            for e in entries]


def day_transcripts(call_date: str, artefacts: Artefacts, settings: Settings) -> list[Transcript]:
    """The day's gated transcripts of the configured model and pipeline version (the ledger says which)."""
    return [artefacts.gated(RecordingVersion(call_date, row["recording_id"]))
            for row in open_ledger(settings.ledger).final_rows(call_date, artefacts.model)
            if row["state"] != RecordingState.QUARANTINED]


def run_audit(call_date: str, rules: RuleSet, index: TranscriptIndex, store: ObjectStore,
              settings: Settings) -> AuditResult:
    """Audit a day's gated transcripts (from storage) and run the saved searches over the day, store the findings
    and write the day's report (HTML, CSV, JSON).

    The transcripts come from the artefacts the index was built from, not from the
    index, so the rules see the same data (``quality``, ``text_raw``, ...) on every backend; the saved searches
    ask the index, which both backends answer alike.
    """
    artefacts = Artefacts.of(store, settings)
    policy = load_policy(settings.postprocess.path("pii_dir"))
    transcripts = day_transcripts(call_date, artefacts, settings)
    redaction = redaction_report(transcripts, artefacts, settings)  # as stored: before the audit masks in memory
    result = audit(transcripts, rules, call_date, policy)
    try:
        card = configured_scorecard(settings, rules)
    except ScorecardError as exc:  # the day's findings still count; its calls go unscored, and the log says why
        log.warning("%s: the day's calls are not scored: %s", call_date, exc)
        card = None
    scores: dict[str, float | None] = {}
    ledger = open_ledger(settings.ledger)
    access = AccessLog(ledger)
    dismissed_ids = dismissed(Reviews(ledger, access).between(call_date, call_date))
    if card is not None:
        result.scores = answer_calls(card, transcripts, result, policy)
        overrides = ScoreOverrides(ledger, access)
        scores = {s.call.recording_id: s.score for s in standing(card, result.scores, overrides, dismissed_ids)}
    index.replace_scores(call_date, scores)
    index.replace_tags(call_date, result.tags)  # the rules' tags and findings first: saved searches filter by them
    index.replace_findings(call_date, [f.to_dict() for f in result.findings])
    watched = watch_findings(call_date, SavedSearches(ledger).listed(), index, configured_teams(settings))
    result.findings = sorted([*result.findings, *watched], key=lambda f: (f.key, f.start, f.rule_id))
    result.redaction = redaction
    if watched:
        index.replace_findings(call_date, [f.to_dict() for f in result.findings])
    write_day_calls(store, settings, call_date, day_calls(result, transcripts, scores, dismissed_ids))
    reports, search_url = DayReports(call_date), settings.web.search_url
    opened = opened_on(call_date, settings)
    anchor = write_anchor(access, store, artefacts.bucket, record_locks(store, settings.storage),
                          signing_key(settings.storage))
    store.put_bytes(artefacts.bucket, reports.audit("html"), report_html(result, search_url, opened, anchor).encode())
    store.put_bytes(artefacts.bucket, reports.audit("csv"), report_csv(result, search_url).encode())
    store.put_bytes(artefacts.bucket, reports.audit("json"),
                    json.dumps(report_json(result, opened, anchor), ensure_ascii=False, indent=1).encode())
    store.put_bytes(artefacts.bucket, reports.scores, json.dumps(scores_json(result), ensure_ascii=False).encode())
    return result


def stored_audit(call_date: str, store: ObjectStore, settings: Settings) -> AuditResult | None:
    """The day's audit as its last run stored it (the nightly DAG's, or a rerun's); None if none is stored.

    A report stored before the redaction section existed reads with ``redaction`` None."""
    bucket, key = settings.storage.artefacts_bucket, DayReports(call_date).audit("json")
    if not store.exists(bucket, key):
        return None
    report = json.loads(store.get_bytes(bucket, key))
    redaction, scores = report.get("redaction"), DayReports(call_date).scores
    stored = json.loads(store.get_bytes(bucket, scores)) if store.exists(bucket, scores) else {}
    return AuditResult(call_date, int(report["summary"]["recordings"]),
                       [Finding.from_dict(f) for f in report["findings"]], tags=dict(report.get("tags") or {}),
                       rule_set=str(report["summary"].get("rule_set") or ""),
                       redaction=RedactionReport.from_dict(redaction) if redaction else None,
                       scores=[CallScore.from_dict(s) for s in stored.get("scores") or ()])


@dataclass
class Rescored:
    """A day audited again with a rule set: the findings and tags it added and removed against the stored audit."""

    call_date: str
    before: str  # the rule set of the stored audit ("" for none, or one stored before sets had an identity)
    after: str
    result: AuditResult
    added: list[Finding]
    removed: list[Finding]
    tags_added: dict[str, list[str]]
    tags_removed: dict[str, list[str]]

    def totals(self) -> dict[str, Any]:
        """The audit's totals and how many findings and tags changed: counts only, what the DAG hands Airflow."""
        return {**self.result.totals(), "rule_set_before": self.before, "added": len(self.added),
                "removed": len(self.removed), "tags_added": sum(map(len, self.tags_added.values())),
                "tags_removed": sum(map(len, self.tags_removed.values()))}

    def to_dict(self) -> dict[str, Any]:
        return {"date": self.call_date, "rule_set_before": self.before, "rule_set": self.after,
                "added": [f.to_dict() for f in self.added], "removed": [f.to_dict() for f in self.removed],
                "tags_added": self.tags_added, "tags_removed": self.tags_removed}


def _tag_changes(a: dict[str, list[str]], b: dict[str, list[str]]) -> dict[str, list[str]]:
    """The tags of ``a`` that ``b`` does not have, per recording."""
    out = {rid: sorted(set(tags) - set(b.get(rid, ()))) for rid, tags in a.items()}
    return {rid: tags for rid, tags in sorted(out.items()) if tags}


def rescore(call_date: str, rules: RuleSet, index: TranscriptIndex, store: ObjectStore,
            settings: Settings) -> Rescored | None:
    """The day audited again (findings, tags and reports replaced), with what changed since its stored audit;
    None for a day with neither calls nor an audit (nothing is written for it)."""
    before = stored_audit(call_date, store, settings)
    if before is None and not day_transcripts(call_date, Artefacts.of(store, settings), settings):
        return None
    after = run_audit(call_date, rules, index, store, settings)
    old = {f.finding_id: f for f in before.findings} if before else {}
    new = {f.finding_id: f for f in after.findings}
    old_tags = before.tags if before else {}
    return Rescored(call_date, before.rule_set if before else "", after.rule_set, after,
                    [f for i, f in new.items() if i not in old], [f for i, f in old.items() if i not in new],
                    _tag_changes(after.tags, old_tags), _tag_changes(old_tags, after.tags))
