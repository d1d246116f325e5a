"""Trends per agent and per team, week by week: calls, findings per 100 calls (in all and by rule), the average
scorecard score and the share of non-talk time.

The audit writes each day's calls in short (``DayReports.calls``: agent, non-talk
share, score as it stands, findings per rule), so a quarter of trends reads a
few small files, not every report; a reviewer's override or verdict rewrites its
day there as in the index (a dismissed finding counts against no call). Weeks
start on Monday.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

from asr_tasks.audit.rules import AuditResult, Finding
from asr_tasks.config import Settings
from asr_tasks.intake.stores import ObjectStore
from asr_tasks.models import Transcript
from asr_tasks.records.teams import Teams
from asr_tasks.version import DayReports

GROUPINGS = ("agent", "team")
NO_GROUP = "-"  # the calls of no agent, or of an agent of no team


@dataclass
class Week:
    """One group's calls of one week, and what the audit said of them."""

    week: str  # its Monday
    group: str
    calls: int = 0
    findings: Counter[str] = field(default_factory=Counter)  # per rule
    scores: list[float] = field(default_factory=list)
    non_talk: list[float] = field(default_factory=list)

    def per_100(self, count: int) -> float:
        return round(100.0 * count / self.calls, 1) if self.calls else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"week": self.week, "group": self.group, "calls": self.calls,
                "findings_per_100": self.per_100(sum(self.findings.values())),
                "findings_per_100_by_rule": {r: self.per_100(n) for r, n in sorted(self.findings.items())},
                "average_score": round(sum(self.scores) / len(self.scores), 1) if self.scores else None,
                "non_talk_share": round(sum(self.non_talk) / len(self.non_talk), 3) if self.non_talk else None}


def found_per_call(findings: Iterable[Finding], dismissed: frozenset[str]) -> dict[str, dict[str, int]]:
    """Each call's findings per rule, those reviewers dismissed left out."""
    found: dict[str, Counter[str]] = {}
    for f in findings:
        if f.finding_id not in dismissed:
            found.setdefault(f.recording_id, Counter())[f.rule_id] += 1
    return {rid: dict(c) for rid, c in found.items()}


def day_calls(result: AuditResult, transcripts: Iterable[Transcript], scores: dict[str, float | None],
              dismissed: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The day's calls in short, as ``DayReports.calls`` keeps them (dismissed findings left out)."""
    found = found_per_call(result.findings, dismissed)
    return {"date": result.call_date, "calls": [
        {"recording_id": t.recording.recording_id, "agent_id": t.recording.agent_id,
         "non_talk_share": (t.analytics or {}).get("non_talk_share"), "score": scores.get(t.recording.recording_id),
         "findings": found.get(t.recording.recording_id, {})} for t in transcripts]}


def write_day_calls(store: ObjectStore, settings: Settings, day: str, calls: dict[str, Any]) -> None:
    store.put_bytes(settings.storage.artefacts_bucket, DayReports(day).calls, json.dumps(calls).encode())


def restated_day_calls(store: ObjectStore, settings: Settings, day: str, scores: dict[str, float | None],
                       found: dict[str, dict[str, int]]) -> None:
    """The day's calls in short with their scores and findings as reviews now leave them."""
    stored = stored_day_calls(store, settings, day)
    if stored is not None:
        for call in stored["calls"]:
            call["score"], call["findings"] = scores.get(call["recording_id"]), found.get(call["recording_id"], {})
        write_day_calls(store, settings, day, stored)


def stored_day_calls(store: ObjectStore, settings: Settings, day: str) -> dict[str, Any] | None:
    bucket, key = settings.storage.artefacts_bucket, DayReports(day).calls
    if not store.exists(bucket, key):
        return None
    calls: dict[str, Any] = json.loads(store.get_bytes(bucket, key))
    return calls


def monday(day: str) -> str:
    d = date.fromisoformat(day)
    return (d - timedelta(days=d.weekday())).isoformat()


def weekly(days: Iterable[dict[str, Any]], by: str, teams: Teams,
           sees: Callable[[str | None], bool] = lambda agent: True) -> list[Week]:
    """Each group's weeks (``by`` agent or team), in group and week order, from days of calls in short; a call
    ``sees`` refuses is left out."""
    weeks: dict[tuple[str, str], Week] = {}
    for day in days:
        week = monday(str(day["date"]))
        for call in day["calls"]:
            agent = call.get("agent_id")
            if not sees(agent):
                continue
            group = (agent if by == "agent" else teams.team_of(agent)) or NO_GROUP
            row = weeks.setdefault((group, week), Week(week, group))
            row.calls += 1
            row.findings.update(call.get("findings") or {})
            if call.get("score") is not None:
                row.scores.append(float(call["score"]))
            if call.get("non_talk_share") is not None:
                row.non_talk.append(float(call["non_talk_share"]))
    return [weeks[k] for k in sorted(weeks)]
