"""``asr produce``: a production for e-discovery (``records/production.py``) of the calls a search matches or of
chosen recordings, into a new folder; ``asr produce --verify DIR`` checks a package against its manifest and its
load file.

The calls go through the page's door (``web/door.py``) as a Call Reader's and an Exporter's: every call, no
team's scope (the command line is for operators with a shell on a worker, as ``cli/records.py`` says). The access
log names the account that runs the command, or ``--user``, the one the production is made for (the production's
name then says which account made it).
"""

from __future__ import annotations

import argparse
import getpass
from functools import partial
from pathlib import Path
from typing import Any

from asr_tasks.cli.console import print_json, table
from asr_tasks.cli.options import Checked, add_call_filters, search_filters
from asr_tasks.config import get_settings
from asr_tasks.index.query import check_query
from asr_tasks.inputs import InputError, within
from asr_tasks.records.production import LAST_BATES, MANIFEST, Production, bates_prefix, empty_folder


def cmd_produce(args: argparse.Namespace) -> int:
    """The package of the chosen calls; exit status 1 when a call was refused (the others are in it)."""
    if args.verify:
        return cmd_verify(Path(args.verify), args.json)
    from asr_tasks.index.backends import open_index
    from asr_tasks.intake.stores import open_store
    from asr_tasks.records.access_log import open_access_log
    from asr_tasks.records.ledger import open_ledger
    from asr_tasks.records.production import produce, searched
    from asr_tasks.web.door import Door

    filters = search_filters(args)
    if args.recordings and filters.narrows():
        raise InputError("search filters narrow a --query; --recordings names its calls")
    if not args.to:
        raise InputError("--to DIR: the new or empty folder the package goes into")
    settings = get_settings()
    index, store = open_index(settings.index), open_store(settings.storage)
    ids = args.recordings or searched(index, args.query, filters)
    if not ids:  # as the page answers: no empty package, no folder made for one
        raise InputError("no call matches: there is nothing to produce")
    directory = empty_folder(Path(args.to))
    account = getpass.getuser()
    user = args.user or account
    door = Door(None, user, settings, lambda: index, lambda: store, open_ledger(settings.ledger),
                open_access_log(settings))
    name = f"{directory.resolve().name} (cli{'' if user == account else f', run by {account}'})"
    production = produce(door, ids, directory,
                         original=args.original, prefix=args.prefix, start=args.start, name=name)
    if args.json:
        print_json(production.to_dict())
    else:
        print_production(production)
    return 1 if production.refused else 0


def print_production(production: Production) -> None:
    """Each call produced (Bates number, id, day, files), each call refused with why, and the counts."""
    if production.produced:
        print(table(["BATES", "RECORDING", "DATE", "FILES"],
                    [[p.bates, p.recording_id, p.call_date or "-", " ".join(p.files)] for p in production.produced]))
    for recording_id, why in production.refused:
        print(f"refused  {recording_id}: {why}")
    numbers = [p.bates for p in production.produced]
    span = f" ({numbers[0]}-{numbers[-1]})" if numbers else ""
    print(f"{len(numbers)} call{'' if len(numbers) == 1 else 's'} produced into {production.directory}{span}, {len(production.refused)} refused; "
          f"check it: asr produce --verify {production.directory} (or sha256sum -c {MANIFEST} in it)")


def cmd_verify(directory: Path, as_json: bool) -> int:
    """Every line of the package's manifest and every row of its load file checked: 0 when all hold and nothing
    else is there, else 1."""
    from asr_tasks.records.production import verify

    found = verify(directory)
    if as_json:
        print_json(found.to_dict())
    elif found.intact:
        print(f"{directory}: intact, every file as {MANIFEST} lists it")
    else:
        for problem in found.problems():
            print(problem)
    return 0 if found.intact else 1


def add_commands(sub: Any) -> None:
    p = sub.add_parser("produce", help="a production for e-discovery: the calls' audio, text, a load file, their "
                                       "access log and hashes, in a new folder (--verify DIR checks one)")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--query", metavar="Q", action=Checked, check=check_query,
                       help="every call the search matches (all pages), with the filters below, as asr search")
    which.add_argument("--recordings", metavar="ID", nargs="+", help="these recording ids")
    which.add_argument("--verify", metavar="DIR", help="check the package in DIR as sha256sum -c checks its manifest, "
                                                       "and its load file against both (exit 1 naming each file "
                                                       "missing, altered, added or listed twice)")
    p.add_argument("--to", metavar="DIR", help="the folder the package goes into: new or empty")
    p.add_argument("--date-from", help="YYYY-MM-DD")
    p.add_argument("--date-to", help="YYYY-MM-DD")
    add_call_filters(p)
    p.add_argument("--sounds-like", action="store_true", help="every word of --query also matches what sounds "
                                                              "like it or is spelt nearly like it")
    rendition = p.add_mutually_exclusive_group()
    rendition.add_argument("--redacted", action="store_true", help="the audio the page plays and the masked text "
                                                                   "(the default)")
    rendition.add_argument("--original", action="store_true", help="the audio as uploaded and the text before "
                                                                   "masking, where keep_unredacted kept it")
    p.add_argument("--prefix", default="CALL", action=Checked, check=bates_prefix,
                   help="the Bates numbers' prefix (default CALL: CALL000001, ...)")
    p.add_argument("--start", type=int, default=1, action=Checked, check=partial(within, least=1, most=LAST_BATES),
                   help="the first Bates number (default 1)")
    p.add_argument("--user", help="the user the access log names (default: the account running the command)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_produce)
