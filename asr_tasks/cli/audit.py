"""``asr audit``: a day's QA audit as the nightly DAG stored it, or run again; ``asr rules test``.

Reading is the default: the report in the artefact bucket is what the QA team was
sent, and running the rules again replaces the day's findings and reports, which
only someone who means it should do: ``--rerun`` for one day, ``--from``/``--to``
to re-score a span of days with changed rules, with what each day gained and lost.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from asr_tasks.cli.access import log_access
from asr_tasks.cli.console import print_json, table
from asr_tasks.cli.options import Checked
from asr_tasks.config import Settings, get_settings
from asr_tasks.index.query import clock
from asr_tasks.inputs import InputError, calendar_day, day_range, days_between
from asr_tasks.version import DayReports

if TYPE_CHECKING:
    from asr_tasks.audit.redaction import RedactionReport
    from asr_tasks.audit.reports import Rescored
    from asr_tasks.audit.rules import AuditResult, Finding, RuleSet
    from asr_tasks.intake.stores import ObjectStore


def found(f: Finding) -> str:
    """What a finding found, in words: a phrase required but never said has no text of its own."""
    if f.matched_text:
        return f.matched_text if f.confidence >= 1 else f"{f.matched_text} ({f.confidence:.0%} alike)"
    return f"not said in the first {f.end:g} s" if f.start == 0 else f"not said from {clock(f.start)} to {clock(f.end)}"


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
    if summary["by_tag"]:
        print("calls tagged: " + ", ".join(f"{tag} {n}" for tag, n in summary["by_tag"].items()))
    for line in redaction_lines(result.redaction):
        print(line)
    rows = [[f.severity, f.rule_id, f.key, f.speaker, f"{clock(f.start)}-{clock(f.end)}", found(f),
             finding_link(f, search_url)] for f in result.findings]
    if rows:
        print(table(["SEVERITY", "RULE", "RECORDING", "SPEAKER", "TIME", "FOUND", "CALL PAGE"], rows))


def rule_set(args: argparse.Namespace, settings: Settings) -> RuleSet:
    """The rule set of ``--rules`` or the configured folder, refused whole (file, line, rule) when broken."""
    from asr_tasks.audit.rules import RuleError, load_rule_set

    try:
        return load_rule_set(Path(args.rules) if args.rules else settings.audit.path("qa_rules_dir"))
    except RuleError as exc:
        raise InputError(str(exc)) from exc


def rerun(args: argparse.Namespace, settings: Settings, store: ObjectStore) -> AuditResult:
    """The rules over the day's transcripts now: findings replaced in the index, the reports written again."""
    from asr_tasks.audit.reports import run_audit
    from asr_tasks.index.backends import open_index

    return run_audit(args.date, rule_set(args, settings), open_index(settings.index), store, settings)


def change_lines(day: Rescored) -> list[str]:
    """A re-scored day in lines: the counts, then each finding added (+) or removed (-) and each tag changed."""
    moved = f"rule set {day.before or '(none recorded)'} -> {day.after}"
    lines = [f"{day.call_date}: {plural(len(day.added), 'finding')} added, {len(day.removed)} removed ({moved})"]
    for sign, findings in (("+", day.added), ("-", day.removed)):
        lines += [f"  {sign} {f.rule_id}  {f.key}  {f.speaker}  {clock(f.start)}  {found(f)}" for f in findings]
    for sign, tags in (("+", day.tags_added), ("-", day.tags_removed)):
        lines += [f"  {sign} tag {', '.join(names)}  {rid}" for rid, names in tags.items()]
    return lines


def rescore_days(args: argparse.Namespace, settings: Settings, store: ObjectStore) -> int:
    """Each day of ``--from``..``--to`` audited again with the rule set, and what changed."""
    from asr_tasks.audit.reports import rescore
    from asr_tasks.index.backends import open_index

    rules, index = rule_set(args, settings), open_index(settings.index)
    span = days_between(args.date_from, args.date_to)
    rescored = {day: rescore(day, rules, index, store, settings) for day in span}
    days = [d for d in rescored.values() if d is not None]
    log_access("read", hits=sum(len(d.added) + len(d.removed) for d in days),
               detail=f"the QA audit of {args.date_from} to {args.date_to}, re-scored (cli)")
    if args.json:
        print_json({"rule_set": rules.identity, "days": [d.to_dict() for d in days],
                    "without_calls": [day for day, d in rescored.items() if d is None]})
        return 0
    for day, done in rescored.items():
        print("\n".join(change_lines(done)) if done else f"{day}: no calls and no audit, nothing written")
    added, removed = sum(len(d.added) for d in days), sum(len(d.removed) for d in days)
    print(f"{plural(len(days), 'day')} re-scored with rule set {rules.identity}: {added} added, {removed} removed")
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    from asr_tasks.audit.reports import stored_audit
    from asr_tasks.intake.stores import open_store

    ranged = args.date_from is not None or args.date_to is not None
    if ranged == (args.date is not None):
        raise InputError("give --date (one day's audit) or --from and --to (re-score those days)")
    if ranged and (args.date_from is None or args.date_to is None or args.rerun):
        raise InputError("--from and --to re-score a span of days: both are needed, and --rerun is implied")
    day_range(args.date_from, args.date_to, "--from", "--to")
    if args.rules and not (args.rerun or ranged):
        raise InputError("--rules: only with --rerun or --from/--to (a stored report keeps the rules it was made with)")
    settings = get_settings()
    store = open_store(settings.storage)
    if ranged:
        return rescore_days(args, settings, store)
    result = rerun(args, settings, store) if args.rerun else stored_audit(args.date, store, settings)
    if result is None:
        print(f"asr audit: no report is stored for {args.date}: the qa_audit_nightly DAG has not audited that day "
              f"(asr audit --date {args.date} --rerun audits it now)", file=sys.stderr)
        return 1
    log_access("read", hits=len(result.findings),
               detail=f"the QA audit of {args.date}{', audited again' if args.rerun else ''} (cli)")
    if args.json:
        from asr_tasks.audit.reviews import open_reviews, precision

        held = open_reviews(settings).of(f.finding_id for f in result.findings)
        print_json({"summary": result.summary(), "findings": [f.to_dict() for f in result.findings],
                    "tags": result.tags, "redaction": result.redaction.to_dict() if result.redaction else None,
                    "reviews": precision(result.findings, held)})
    else:
        print_audit(result, settings.web.search_url)
        report = f"{settings.storage.artefacts_bucket}/{DayReports(args.date).audit('html')}"
        print(f"audited again now, findings and report replaced: {report}" if args.rerun else f"the report: {report}")
    return 0


def cmd_rules_test(args: argparse.Namespace) -> int:
    """Every rule's examples and counter-examples, each failure on a line of its own."""
    from asr_tasks.audit.conditions import Parser
    from asr_tasks.audit.rules import RuleError, known_speakers, load_file, rule_files, same_ids, test_rules
    from asr_tasks.audit.scorecards import ScorecardError, configured_scorecard

    folder = Path(args.rules) if args.rules else get_settings().audit.path("qa_rules_dir")
    files = rule_files(folder)
    if not files:
        raise InputError(f"{folder}: no rule files (*.yaml)")
    try:
        parser = Parser(known_speakers())
        rules = [rule for path in files for rule in load_file(path, parser)]
    except RuleError as exc:
        raise InputError(str(exc)) from exc
    failures = same_ids(rules) + test_rules(rules)
    try:  # the scorecard the nightly audit fills answers from the configured rules: it must fit them
        if not args.rules:
            configured_scorecard(get_settings(), rules)
    except ScorecardError as exc:
        failures.append(str(exc))
    for line in failures:
        print(line, file=sys.stderr)
    checked = sum(len(r.examples) + len(r.counter_examples) for r in rules)
    untested = [r.id for r in rules if not r.examples or not r.counter_examples]
    print(f"{plural(len(rules), 'rule')}, {plural(checked, 'example')} checked: {len(failures)} failed"
          + (f"; without examples or counter-examples: {', '.join(untested)}" if untested else ""))
    return 1 if failures else 0


def add_commands(sub: Any) -> None:
    p = sub.add_parser("audit", help="a day's QA audit as stored by the nightly DAG (--rerun: audit it again; "
                                     "--from/--to: re-score days with the rules as they are now)")
    p.add_argument("--date", action=Checked, check=calendar_day, help="YYYY-MM-DD")
    p.add_argument("--from", dest="date_from", action=Checked, check=calendar_day,
                   help="YYYY-MM-DD: re-score from this day (findings, tags and reports replaced)")
    p.add_argument("--to", dest="date_to", action=Checked, check=calendar_day, help="YYYY-MM-DD: the last day")
    p.add_argument("--rerun", action="store_true",
                   help="run the rules again now: replaces the day's findings and stored reports")
    p.add_argument("--rules", help="with --rerun or --from/--to: folder of rule files (default: qa_rules_dir)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_audit)
    rules = sub.add_parser("rules", help="the QA rule set: rules test runs every rule's examples")
    rules_sub = rules.add_subparsers(dest="rules_command", required=True)
    t = rules_sub.add_parser("test", help="check every rule's examples and counter-examples")
    t.add_argument("--rules", help="folder of rule files (default: qa_rules_dir)")
    t.set_defaults(func=cmd_rules_test)
