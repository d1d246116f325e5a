"""``asr audit``: a day's QA audit as the nightly DAG stored it, or run again with ``--rerun``.

Reading is the default: the report in the artefact bucket is what the QA team was
sent, and running the rules again replaces the day's findings and reports, which
only someone who means it should do.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from asr_tasks.cli.console import print_json, table
from asr_tasks.cli.options import Checked
from asr_tasks.config import Settings, get_settings
from asr_tasks.index.query import clock
from asr_tasks.inputs import InputError, calendar_day
from asr_tasks.version import DayReports

if TYPE_CHECKING:
    from asr_tasks.audit.redaction import RedactionReport
    from asr_tasks.audit.rules import AuditResult, Finding
    from asr_tasks.intake.stores import ObjectStore


def found(f: Finding) -> str:
    """What a finding found, in words: a phrase required but never said has no text of its own."""
    return f.matched_text or f"not said in the first {f.end:g} s"


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def redaction_lines(redaction: RedactionReport | None) -> list[str]:
    """The day's masking in a few aligned lines: the totals, one line per kind, one per missing rendition."""
    if redaction is None:
        return ["redaction: not in this report (audited before reports had it; --rerun adds it)"]
    renditions = (f"{plural(len(redaction.missing_renditions), 'rendition')} missing"
                  if redaction.missing_renditions else "every rendition present")
    lines = [f"redaction: {'' if redaction.redact_pii else 'off (redact_pii is false), '}"
             f"{plural(redaction.values, 'value')} masked ({redaction.by_pattern} by pattern, "
             f"{redaction.by_context} by context), {redaction.seconds_silenced:.1f} s silenced, {renditions}"]
    kind_width = max((len(k.kind) for k in redaction.kinds), default=0)
    n_width = len(str(max((max(k.by_pattern, k.by_context) for k in redaction.kinds), default=0)))
    lines += [f"  {k.kind:<{kind_width}}  {k.by_pattern:>{n_width}} by pattern  {k.by_context:>{n_width}} by context"
              for k in redaction.kinds]
    lines += [f"  rendition missing  {rid}" for rid in redaction.missing_renditions]
    return lines


def print_audit(result: AuditResult, search_url: str) -> None:
    """The counts per rule, how the day's masking fared, then one aligned row per finding with the call page
    that opens it at its second."""
    from asr_tasks.audit.reports import finding_link

    summary = result.summary()
    print(f"{result.call_date}: {summary['recordings']} calls audited, {summary['findings']} findings")
    for rule, n in summary["by_rule"].items():
        print(f"  {n:4d}  {rule}")
    for line in redaction_lines(result.redaction):
        print(line)
    rows = [[f.severity, f.rule_id, f.key, f.speaker, f"{clock(f.start)}-{clock(f.end)}", found(f),
             finding_link(f, search_url)] for f in result.findings]
    if rows:
        print(table(["SEVERITY", "RULE", "RECORDING", "SPEAKER", "TIME", "FOUND", "CALL PAGE"], rows))


def rerun(args: argparse.Namespace, settings: Settings, store: ObjectStore) -> AuditResult:
    """The rules over the day's transcripts now: findings replaced in the index, the reports written again."""
    from asr_tasks.audit.reports import run_audit
    from asr_tasks.audit.rules import RuleError, load_rules
    from asr_tasks.index.backends import open_index

    try:
        rules = load_rules(Path(args.rules) if args.rules else settings.audit.path("qa_rules_dir"))
    except RuleError as exc:
        raise InputError(str(exc)) from exc
    return run_audit(args.date, rules, open_index(settings.index), store, settings)


def cmd_audit(args: argparse.Namespace) -> int:
    from asr_tasks.audit.reports import stored_audit
    from asr_tasks.intake.stores import open_store

    if args.rules and not args.rerun:
        raise InputError("--rules: only with --rerun (a stored report keeps the rules it was made with)")
    settings = get_settings()
    store = open_store(settings.storage)
    result = rerun(args, settings, store) if args.rerun else stored_audit(args.date, store, settings)
    if result is None:
        print(f"asr audit: no report is stored for {args.date}: the qa_audit_nightly DAG has not audited that day "
              f"(asr audit --date {args.date} --rerun audits it now)", file=sys.stderr)
        return 1
    if args.json:
        print_json({"summary": result.summary(), "findings": [f.to_dict() for f in result.findings],
                    "redaction": result.redaction.to_dict() if result.redaction else None})
    else:
        print_audit(result, settings.web.search_url)
        report = f"{settings.storage.artefacts_bucket}/{DayReports(args.date).audit('html')}"
        print(f"audited again now, findings and report replaced: {report}" if args.rerun else f"the report: {report}")
    return 0


def add_commands(sub: Any) -> None:
    p = sub.add_parser("audit", help="a day's QA audit as stored by the nightly DAG (--rerun: audit it again)")
    p.add_argument("--date", required=True, action=Checked, check=calendar_day, help="YYYY-MM-DD")
    p.add_argument("--rerun", action="store_true",
                   help="run the rules again now: replaces the day's findings and stored reports")
    p.add_argument("--rules", help="with --rerun: folder of rule files (default: qa_rules_dir)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_audit)
