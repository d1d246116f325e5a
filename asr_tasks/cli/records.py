"""The ``asr`` commands of records management: erase, hold, release, retention, the access log and the roles.

The user an action is recorded under is the account that runs the command: the
command line is for operators with a shell on a worker, the web page has its own
permissions (``permissions.py``).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from datetime import date, datetime, timedelta, timezone
from typing import Any

from asr_tasks.cli.access import log_access
from asr_tasks.cli.console import print_json
from asr_tasks.cli.options import Checked
from asr_tasks.config import get_settings
from asr_tasks.inputs import (
    InputError,
    calendar_day,
    confirmation_token,
    day_range,
    object_key,
    party_id,
    recording_id,
    refusal,
)
from asr_tasks.records.access_log import ACTIONS, os_account
from asr_tasks.records.reasons import REASONS


def _parts() -> tuple[Any, ...]:
    from asr_tasks.index.backends import open_index
    from asr_tasks.intake.stores import open_store
    from asr_tasks.records.access_log import AccessLog
    from asr_tasks.records.ledger import open_ledger

    settings = get_settings()
    ledger = open_ledger(settings.ledger)
    return settings, ledger, open_store(settings.storage), open_index(settings.index), AccessLog(ledger)


def _holds() -> Any:
    """The legal holds: placing, listing or releasing one needs no index (and the store only to lock objects)."""
    from asr_tasks.intake.stores import open_store
    from asr_tasks.records.access_log import AccessLog
    from asr_tasks.records.holds import Holds
    from asr_tasks.records.ledger import open_ledger
    from asr_tasks.records.locking import record_locks

    settings = get_settings()
    ledger = open_ledger(settings.ledger)
    return Holds(ledger, AccessLog(ledger), record_locks(open_store(settings.storage), settings.storage))


ERASE_OPTIONS = {"key": "--key", "recording_id": "--recording", "customer": "--customer", "agent": "--agent",
                 "before": "--before", "reason": "--reason"}
HOLD_OPTIONS = {"date_from": "--from", "date_to": "--to", "why": "--why", "future": "--future"}


def cmd_erase(args: argparse.Namespace) -> int:
    """Without --confirm: what would be erased and the command that erases exactly that (nothing erased). With
    it: the erasure, refused (exit 1, nothing erased) where the selection no longer takes what the token was for;
    a key under a legal hold is left and its hold named (exit status 1)."""
    from pydantic import ValidationError

    from asr_tasks.records.erasure import SHOWN, Eraser, ErasureSelection, PlanChanged

    try:
        selection = ErasureSelection(key=args.key, recording_id=args.recording, customer=args.customer,
                                     agent=args.agent, before=args.before, reason=args.reason)
    except ValidationError as exc:
        raise refusal(exc, ERASE_OPTIONS) from None
    eraser = Eraser(*_parts())
    user = os_account()
    if args.confirm is None:
        plan = eraser.plan(selection, user)
        if args.json:
            print_json(plan.to_dict())
        elif plan.keys:
            print(f"would erase {len(plan.keys) - len(plan.held)} keys ({plan.versions} versions chosen) of "
                  f"{len(plan.days)} days; {len(plan.held)} held keys left as they are")
            for key in plan.keys[:SHOWN]:
                print(f"  {key}")
            if len(plan.keys) > SHOWN:
                print(f"  ... and {len(plan.keys) - SHOWN} more")
            for key, hold in plan.held[:SHOWN]:
                print(f"held     {key}: {hold}")
            name, value = selection.chosen
            command = ["asr", "erase", ERASE_OPTIONS[name], value, "--reason", selection.reason, "--confirm", plan.token]
            print(f"nothing is erased yet; to erase exactly these:\n  {shlex.join(command)}")
        if not plan.keys:
            print("asr: erase: nothing to erase (no recording of that key, id, customer, agent or date is left)",
                  file=sys.stderr)
        return 0 if plan.keys else 1
    try:
        result = eraser.confirmed(selection, user, args.confirm)
    except PlanChanged as exc:
        print(f"asr: erase: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print_json(result.to_dict())
    else:
        for key in result.erased:
            print(f"erased   {key}")
        for key, hold in result.held:
            print(f"held     {key}: not erased, {hold}")
    return 1 if result.held else 0


def cmd_hold(args: argparse.Namespace) -> int:
    """A hold placed as ``HoldRequest`` takes it (exit 2 naming the option for what it could not honour), or the
    holds listed."""
    from pydantic import ValidationError

    from asr_tasks.records.holds import HoldError, HoldRequest

    day_range(args.date_from, args.date_to, "--from", "--to")
    if args.list:
        holds = _holds()
        listed = holds.listed(include_released=args.all)
        log_access("list", detail="legal holds, released ones too" if args.all else "legal holds in force",
                   hits=len(listed))  # as the page's listing of the holds is logged
        if args.json:
            print_json([h.to_dict() for h in listed])
        for h in [] if args.json else listed:
            state = "active" if h.active else f"released by {h.released_by} {h.released_at}: {h.release_why}"
            print(f"{h.describe()} [{state}]")
        return 0
    scope, value = next(((s, v) for s, v in (("key", args.key), ("agent", args.agent), ("customer", args.customer))
                         if v is not None), ("dates", None))
    if scope == "dates" and not (args.date_from or args.date_to):
        raise InputError("name what to hold: --key, --agent, --customer or --from/--to")
    try:
        asked = HoldRequest(scope=scope, value=value, date_from=args.date_from, date_to=args.date_to,  # type: ignore[arg-type]
                            why=args.why or "", future=args.future)
    except ValidationError as exc:
        raise refusal(exc, {**HOLD_OPTIONS, "value": f"--{scope}"}) from None
    try:
        hold = _holds().place(user=os_account(), **asked.model_dump())
    except HoldError as exc:
        print(f"asr: hold: {exc}", file=sys.stderr)
        return 2
    print_json(hold.to_dict()) if args.json else print(hold.describe())
    return 0


def cmd_release(args: argparse.Namespace) -> int:
    from asr_tasks.records.holds import HoldError

    try:
        hold = _holds().release(args.hold_id, args.why, os_account())
    except HoldError as exc:
        print(f"asr: release: {exc}", file=sys.stderr)
        return 2
    print(f"released {hold.describe()}")
    return 0


def cmd_retention(args: argparse.Namespace) -> int:
    """What the daily retention DAG does, run once for one day."""
    from asr_tasks.records.retention import run_retention

    settings, ledger, store, index, access = _parts()
    today = date.fromisoformat(args.date) if args.date else date.today()
    run = run_retention(settings, today, ledger, store, index, access)
    print_json(run.to_dict()) if args.json else print(
        f"{today}: {run.erased} erased in {run.batches} batches, {run.held} held, {run.finished} interrupted "
        "erasures finished" + ("" if settings.storage.retention_days else " (no retention_days rule: nothing expires)"))
    return 0


def cmd_lock(args: argparse.Namespace) -> int:
    """Seal what is already in the store, as indexing seals each new call once ``object_lock`` is on."""
    from asr_tasks.records.holds import HoldError

    day_range(args.since, args.until, "--from", "--to")
    try:
        calls, objects = _holds().seal(args.since, args.until)
    except HoldError as exc:
        print(f"asr: lock: {exc}", file=sys.stderr)
        return 2
    print_json({"recordings": calls, "objects": objects}) if args.json else print(
        f"{calls} recordings sealed in the store ({objects} objects retained, and held where a hold covers them)")
    return 0


def cmd_access_log(args: argparse.Namespace) -> int:
    from asr_tasks.records.access_log import AccessLog
    from asr_tasks.records.ledger import open_ledger

    since, until = args.since, args.until
    day_range(since, until, "--since", "--until")
    first = datetime.fromisoformat(since).replace(tzinfo=timezone.utc) if since else None
    end = (datetime.fromisoformat(until).replace(tzinfo=timezone.utc) + timedelta(days=1)) if until else None
    access = AccessLog(open_ledger(get_settings().ledger))
    if args.verify:
        return _verify_access_log(access, first, end, args.json)
    entries = access.entries(since=first, until=end, user=args.user, recording_id=args.recording,
                             actions=tuple(args.action or ()))
    log_access("list", detail="the access log", hits=len(entries))  # what others searched is read: as on the page
    if args.json:
        print_json([e.to_dict() for e in entries])
        return 0
    for e in entries:
        what = " ".join(x for x in (e.recording_id and f"recording {e.recording_id}",
                                    e.query is not None and f"query {e.query!r}",
                                    e.filters and json.dumps(e.filters, ensure_ascii=False),
                                    e.hits is not None and f"{e.hits} hits", e.detail) if x)
        print(f"{e.at}  {e.user:<16} {e.action:<8} {what}")
    if not entries:
        print("no access recorded for that choice", file=sys.stderr)
    return 0


def _verify_access_log(access: Any, since: datetime | None, until: datetime | None, as_json: bool) -> int:
    """The chain recomputed over the days (widened to the signed anchors around them), gaps in its ids, and every
    anchor found (the anchor objects and the QA reports' own) checked against its signature and the rows: 0 when
    all hold; the rows after the last signed anchor are counted, not yet protected."""
    from asr_tasks.intake.stores import open_store
    from asr_tasks.records.anchors import AnchorKeyError, check_log, found_anchors, public_key_file, verifying_key

    settings = get_settings()
    try:
        public = verifying_key(settings.storage)
    except AnchorKeyError as exc:
        print(f"asr: access-log: {exc}", file=sys.stderr)
        return 2
    check = check_log(access, found_anchors(open_store(settings.storage), settings.storage.artefacts_bucket),
                      since, until, public)
    chain = check.chain
    if as_json:
        print_json(check.to_dict())
        return 0 if check.intact else 1
    span = f"rows {chain.first_id or 'from the first'} to {chain.last_id}" if chain.checked else "no rows"
    if chain.broken is not None:
        print(f"access log: row {chain.broken.id} ({chain.broken.at}) does not match: {chain.broken.why}; "
              f"{chain.checked} rows before it checked")
    else:
        print(f"access log: {chain.checked} rows checked ({span}), the chain holds"
              + (f"; last hash {chain.last_hash}" if chain.last_id is not None else ""))
    for gap in chain.gaps:
        print(f"access log: {gap.describe()}")
    print(f"anchors: {check.anchors} checked, {check.signed} signed by the key of {public_key_file(settings.storage)}"
          f", {len(check.problems)} problems")
    for note in check.unsigned:
        print(f"anchor: {note}")
    for problem in check.problems:
        print(f"anchor: {problem}")
    after = f"row {check.last_signed}" if check.last_signed is not None else "none yet"
    print(f"not yet protected: {check.unprotected} rows after the last signed anchor ({after}): rows cut off or "
          f"rewritten there would not show until the next anchor")
    return 0 if check.intact else 1


def cmd_roles(args: argparse.Namespace) -> int:
    """The roles of the search page's permissions, as Airflow's FAB auth manager takes them (``[fab] custom_roles``)."""
    from asr_tasks.records.permissions import OPERATOR_PERMISSIONS, OPERATOR_ROLE, PERMISSIONS, RESOURCE, fab_custom_roles

    if args.table:
        for name, p in PERMISSIONS.items():
            print(f"{p.role:<24} {p.action} on {RESOURCE!r}: {p.allows} ({name})")
        print(f"{OPERATOR_ROLE:<24} runs and watches the DAGs ({len(OPERATOR_PERMISSIONS)} of Airflow's resources, "
              f"no writing connections, variables or XComs); nothing on {RESOURCE!r}")
        return 0
    print(fab_custom_roles())
    return 0


def add_commands(sub: Any) -> None:
    p = sub.add_parser("erase", help="erase recordings with everything they left (index, artefacts, reports): "
                                     "first what would go and a token, then --confirm TOKEN erases exactly that")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--key", action=Checked, check=object_key, help="an object key (every version of it)")
    which.add_argument("--recording", action=Checked, check=recording_id,
                       help="a recording id (every version of its key)")
    which.add_argument("--customer", action=Checked, check=party_id, help="a customer id: all of the customer's calls")
    which.add_argument("--agent", action=Checked, check=party_id, help="an agent id: all of the agent's calls")
    which.add_argument("--before", action=Checked, check=calendar_day, help="YYYY-MM-DD: every call before that day")
    p.add_argument("--reason", required=True, choices=REASONS, help="why, as a code kept on the tombstone and in "
                   "the access log: " + "; ".join(f"{code}: {what}" for code, what in REASONS.items()))
    p.add_argument("--confirm", metavar="TOKEN", action=Checked, check=confirmation_token,
                   help="the token the same command printed without it: erases what it showed, or nothing (exit 1) "
                        "where calls came or went since")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_erase)

    p = sub.add_parser("hold", help="place a legal hold (nothing erases what it covers), or list the holds")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--key", action=Checked, check=object_key, help="an object key some recording has")
    which.add_argument("--agent", action=Checked, check=party_id, help="an agent id: all of the agent's calls")
    which.add_argument("--customer", action=Checked, check=party_id, help="a customer id: all of the customer's calls")
    which.add_argument("--list", action="store_true", help="the active holds (--all: released ones too)")
    p.add_argument("--from", dest="date_from", action=Checked, check=calendar_day,
                   help="YYYY-MM-DD: calls from this day (with --to; not with --key, --agent or --customer, whose hold "
                        "is on every call of theirs)")
    p.add_argument("--to", dest="date_to", action=Checked, check=calendar_day, help="YYYY-MM-DD: calls up to this day")
    p.add_argument("--future", action="store_true",
                   help="with --key: a key no recording has yet (a call still to come); refused otherwise")
    p.add_argument("--why", help="the reason (required to place a hold)")
    p.add_argument("--all", action="store_true")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_hold)

    p = sub.add_parser("release", help="release a legal hold")
    p.add_argument("hold_id", type=int)
    p.add_argument("--why", required=True)
    p.set_defaults(func=cmd_release)

    p = sub.add_parser("retention", help="erase what retention_days has expired (what the retention DAG runs)")
    p.add_argument("--date", action=Checked, check=calendar_day, help="YYYY-MM-DD, the day it runs for (default: today)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_retention)

    p = sub.add_parser("lock", help="with object_lock: retain (and hold) in MinIO the recordings already there, "
                                    "as indexing does for each new one")
    p.add_argument("--from", dest="since", action=Checked, check=calendar_day, help="YYYY-MM-DD (call date)")
    p.add_argument("--to", dest="until", action=Checked, check=calendar_day, help="YYYY-MM-DD (that day included)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_lock)

    p = sub.add_parser("access-log", help="who searched, played, exported, erased or held what; --verify: whether "
                                          "it is as it was written")
    p.add_argument("--since", "--from", dest="since", action=Checked, check=calendar_day, help="YYYY-MM-DD")
    p.add_argument("--until", "--to", dest="until", action=Checked, check=calendar_day,
                   help="YYYY-MM-DD (that day included)")
    p.add_argument("--user")
    p.add_argument("--recording", help="a recording id")
    p.add_argument("--action", action="append", choices=ACTIONS, help="repeatable")
    p.add_argument("--verify", action="store_true",
                   help="recompute the hash chain (of the days chosen), flag gaps in its ids, and check every anchor "
                        "(the anchor objects and the QA reports') against the anchor public key and the rows; names "
                        "the first row or the anchor that does not match (exit 1) and counts the rows no signed "
                        "anchor protects yet")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_access_log)

    p = sub.add_parser("roles", help="the search page's roles as [fab] custom_roles JSON (--table: as a table)")
    p.add_argument("--table", action="store_true")
    p.set_defaults(func=cmd_roles)

