"""Nightly QA audit of the day's calls, run as soon as transcribe_daily has indexed that day.

Data-aware: scheduled on the transcripts Asset, whose events carry the call date.
A manual run (or `airflow dags test qa_audit_nightly DATE`) audits its logical date.
The rule files are validated as a whole first: a broken rule set audits nothing.
"""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from airflow.sdk import Asset, dag, task

from asr_tasks.config import TRANSCRIPTS_ASSET_URI, get_settings

PLUGINS = str(Path(__file__).resolve().parent.parent / "plugins")
if PLUGINS not in sys.path:
    sys.path.append(PLUGINS)  # Airflow puts its plugins folder on the path; plain Python (tests, scripts) does not
from airflow_store import task_store  # noqa: E402
from task_defaults import default_args  # noqa: E402

settings = get_settings()
TRANSCRIPTS = Asset(TRANSCRIPTS_ASSET_URI)


@dag(
    dag_id="qa_audit_nightly",
    schedule=[TRANSCRIPTS],
    start_date=datetime(2026, 1, 1),
    catchup=False,
    tags=["asr", "qa"],
    default_args=default_args(settings.airflow),
    doc_md=__doc__,
)
def qa_audit_nightly() -> None:
    @task
    def audit_days(triggering_asset_events: Any = None, ds: str | None = None) -> list[dict[str, Any]]:
        """Evaluate every rule over each triggering day's transcripts; store findings, tags and reports; hand
        Airflow the totals only (counts per rule, severity and tag, the rule set's identity and how many findings
        it added and removed against the day's previous audit: a backfill after a rule change says what moved).
        A saved search's findings are counted by its id: its name and words stay in the ledger and the reports."""
        from asr_tasks.audit.rules import load_rule_set
        from asr_tasks.audit.reports import rescore
        from asr_tasks.audit.saved_searches import SavedSearches, counted_by_id
        from asr_tasks.index.backends import open_index
        from asr_tasks.records.ledger import open_ledger

        events = triggering_asset_events[TRANSCRIPTS] if triggering_asset_events else []
        days = sorted({e.extra["call_date"] for e in events if e.extra and "call_date" in e.extra})
        if not days and ds:
            days = [ds]
        rules = load_rule_set(settings.audit.path("qa_rules_dir"))
        index, store = open_index(settings.index), task_store(settings.storage)
        done = [rescore(day, rules, index, store, settings) for day in days]
        searches = SavedSearches(open_ledger(settings.ledger)).listed()  # after the runs: those they ran
        totals = [d.totals() for d in done if d is not None]
        return [{**t, "by_rule": counted_by_id(t["by_rule"], searches)} for t in totals]

    audit_days()


qa_audit_nightly()
