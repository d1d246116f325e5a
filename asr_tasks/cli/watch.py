"""``asr watch``: saved searches that the nightly audit runs over each new day (``audit.saved_searches``), under
the name of the account that saves them."""

from __future__ import annotations

import argparse
import getpass
import sys
from typing import Any

from asr_tasks.cli.console import print_json, table
from asr_tasks.cli.options import Checked, add_call_filters
from asr_tasks.config import get_settings
from asr_tasks.index.query import Filters, check_query
from asr_tasks.inputs import speaker_names


def _searches() -> Any:
    from asr_tasks.audit.saved_searches import SavedSearches
    from asr_tasks.records.ledger import open_ledger
    from asr_tasks.text.masking import configured_policy

    settings = get_settings()
    return SavedSearches(open_ledger(settings.ledger), configured_policy(settings))


def cmd_watch_add(args: argparse.Namespace) -> int:
    from asr_tasks.audit.saved_searches import SavedSearchError

    filters = Filters(None, None, args.agent, args.speaker, args.quality, args.min_non_talk_share,
                      args.min_agent_interruptions, args.min_customer_interruptions, args.rule, tuple(args.tag),
                      args.sounds_like, args.min_score, args.max_score)
    try:
        saved = _searches().add(getpass.getuser(), args.name, args.query, filters,
                                speaker_names(get_settings().audio), args.severity)
    except SavedSearchError as exc:
        print(f"asr watch add: {exc}", file=sys.stderr)
        return 2
    print(f"saved: {saved.describe()}; the nightly audit reports its hits as findings of {saved.rule_id}")
    return 0


def cmd_watch_list(args: argparse.Namespace) -> int:
    searches = _searches().listed(None if args.all else getpass.getuser())
    if args.json:
        print_json([s.to_dict() for s in searches])
    elif searches:
        print(table(["OWNER", "NAME", "SEVERITY", "SOUNDS LIKE", "QUERY", "FILTERS"],
                    [[s.owner, s.name, s.severity, "yes" if s.filters.sounds_like else "", s.query,
                      "; ".join(f"{k} {', '.join(v) if isinstance(v, list) else v}"
                                for k, v in s.to_dict()["filters"].items() if k != "sounds_like")]
                     for s in searches]))
    else:
        print("no saved searches")
    return 0


def cmd_watch_remove(args: argparse.Namespace) -> int:
    from asr_tasks.audit.saved_searches import SavedSearchError

    try:
        removed = _searches().remove(getpass.getuser(), args.name)
    except SavedSearchError as exc:
        print(f"asr watch remove: {exc}", file=sys.stderr)
        return 2
    print(f"removed: {removed.describe()} (the findings it made stay with their days)")
    return 0


def add_commands(sub: Any) -> None:
    p = sub.add_parser("watch", help="saved searches the nightly audit runs over each new day: add, list, remove")
    watch = p.add_subparsers(dest="watch_command", required=True)
    a = watch.add_parser("add", help="save a search; each night its hits of the new day become findings")
    a.add_argument("name", help="its name (one per account): letters, digits, spaces, '.', '-', '_'")
    a.add_argument("query", action=Checked, check=check_query, help="words and phrases, as asr search takes them")
    a.add_argument("--sounds-like", action="store_true", help="every word also matches what sounds like it")
    add_call_filters(a)
    a.add_argument("--severity", default="medium", help="its findings' severity (default medium)")
    a.set_defaults(func=cmd_watch_add)
    listed = watch.add_parser("list", help="your saved searches (--all: everyone's)")
    listed.add_argument("--all", action="store_true")
    listed.add_argument("--json", action="store_true")
    listed.set_defaults(func=cmd_watch_list)
    r = watch.add_parser("remove", help="remove one of your saved searches")
    r.add_argument("name")
    r.set_defaults(func=cmd_watch_remove)
