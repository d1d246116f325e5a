"""A production: the calls counsel asked for in litigation, as a package e-discovery tools load and anyone can check.

A bank hands calls over ("produces" them) as native files with their text, a metadata load file and a hash of
each, every call numbered with a Bates number both sides cite. The calls come through the page's door
(``web/door.py``), so a production holds what the page would serve the same user and refuses what it would
refuse (a call unknown to them, erased, or whose only safe rendition is missing), each refused call named with
why while the others go on. The package, in a new or empty folder:

    NATIVES/<BATES>.<ext>    the audio: the redacted rendition where personal data was said, or as uploaded
    TEXT/<BATES>.txt, .json  the transcript as the call page's exports make it (masked, or before masking)
    DATA/loadfile.dat        a Concordance DAT load file: one row per call, its Bates number, parties and hash
    DATA/access_log.jsonl    every access-log row of the calls, the production's own "export" rows included
    MANIFEST.sha256          the SHA-256 of every other file, as ``sha256sum -c`` reads it

``verify`` checks the package as ``sha256sum -c`` checks the manifest, line by line, and the load file against both,
so a file changed, removed or added since shows, whatever lines were added to the manifest or taken from it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from asr_tasks.inputs import InputError

if TYPE_CHECKING:  # for the types only: ``asr`` reads the Bates options' checks from here as it starts
    from asr_tasks.index.base import TranscriptIndex
    from asr_tasks.index.query import Filters
    from asr_tasks.records.access_log import AccessLog

NATIVES, TEXT, DATA = "NATIVES", "TEXT", "DATA"
LOAD_FILE, ACCESS_LOG, MANIFEST = f"{DATA}/loadfile.dat", f"{DATA}/access_log.jsonl", "MANIFEST.sha256"
TEXT_FORMATS = ("txt", "json")  # the call page's transcript exports a package holds
BATES_PREFIX = r"^[A-Za-z][A-Za-z0-9_-]{0,19}$"  # part of every file name: letters, digits, _ and -
BATES_DIGITS = 6
LAST_BATES = 10**BATES_DIGITS - 1
# Concordance's delimiters: ASCII 20 between values, þ around each, ® for a line break inside one.
SEPARATOR, QUOTE, NEWLINE = "\x14", "\u00fe", "\u00ae"
COLUMNS = ("BEGBATES", "ENDBATES", "RECORDING_ID", "CALL_DATE", "AGENT", "CUSTOMER", "DURATION_SECONDS",
           "NATIVE_PATH", "TEXT_PATH", "JSON_PATH", "SHA256", "AUDIO_REDACTED", "TEXT_REDACTED")
MANIFEST_LINE = re.compile(r"(?P<sha256>[0-9a-fA-F]{64}) [ *](?P<path>.+)")  # text or binary mode, as sha256sum writes
SEARCH_PAGE = 500  # calls per index query when a search chooses them
CHUNK = 1 << 20


class Refused(Exception):
    """A call the door would not serve, with why (``404 no recording …``, ``410 recording … was erased``)."""


@dataclass(frozen=True)
class Call:
    """A call as the door hands it to a production: its document as indexed, its transcript in each of
    ``TEXT_FORMATS``, which rendition its audio is, the extension its bytes call for, the bytes, and whether
    personal data is held back in any of it. The text and the bytes are read as the call is written, so that a
    production of thousands of calls holds one call's at a time."""

    rec: dict[str, Any]
    texts: Callable[[], dict[str, str]]
    rendition: str
    extension: str
    audio: Callable[[], Iterable[bytes]]
    text_masked: bool


class Door(Protocol):
    """What a production goes through: the page's door (``web/door.py``), which finds each call as the index has
    it (a Team Lead's among their teams' calls only), refuses what it would not serve, and writes the access log."""

    access: AccessLog
    user: str

    def produced(self, recording_id: str, *, original: bool) -> Call: ...

    def log(self, action: str, *, recording_id: str | None = None, detail: str | None = None) -> None: ...


@dataclass(frozen=True)
class Produced:
    """A call in the package: its Bates number, its files (relative to the package) and its load-file row."""

    bates: str
    recording_id: str
    call_date: str | None
    files: tuple[str, ...]
    row: dict[str, str]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Production:
    """What a production wrote where, and the calls it refused, each with why."""

    directory: Path
    name: str
    produced: list[Produced] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"directory": str(self.directory), "name": self.name, "produced": [p.to_dict() for p in self.produced],
                "refused": [{"recording_id": rid, "reason": why} for rid, why in self.refused]}


@dataclass(frozen=True)
class Verification:
    """What ``verify`` found: files the manifest lists that are gone, files a line of it gives another hash, files
    it lists twice with different hashes, files it does not list, the load file's rows that name a file neither
    there nor listed or a native of another hash (``load_file``: each naming the row's Bates number), natives and
    texts no row names, and lines that are not ``<sha256>  <path>``."""

    missing: list[str] = field(default_factory=list)
    altered: list[str] = field(default_factory=list)
    listed_twice: list[str] = field(default_factory=list)
    unlisted: list[str] = field(default_factory=list)
    load_file: list[str] = field(default_factory=list)
    unloaded: list[str] = field(default_factory=list)
    malformed: list[str] = field(default_factory=list)

    @property
    def intact(self) -> bool:
        return not (self.missing or self.altered or self.listed_twice or self.unlisted or self.load_file
                    or self.unloaded or self.malformed)

    def problems(self) -> list[str]:
        """One line per problem, naming the file."""
        return ([f"missing: {p}" for p in self.missing] + [f"altered: {p}" for p in self.altered]
                + [f"listed twice with different hashes: {p}" for p in self.listed_twice]
                + [f"not in the manifest: {p}" for p in self.unlisted]
                + [f"load file: {p}" for p in self.load_file]
                + [f"not in the load file: {p}" for p in self.unloaded]
                + [f"not a manifest line: {line!r}" for line in self.malformed])

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "intact": self.intact}


def bates_prefix(value: str, name: str) -> str:
    """A Bates prefix, which every file name of the package starts with: refused unless it is a short word."""
    if not re.fullmatch(BATES_PREFIX, value):
        raise InputError(f"{name} {value!r}: a Bates prefix is a letter then up to 19 letters, digits, _ or -")
    return value


def empty_folder(directory: Path) -> Path:
    """The folder a production goes into: new or empty, so that nothing but the package is in it."""
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise InputError(f"{directory}: not an empty folder; a production goes into a new or empty one")
    return directory


def searched(index: TranscriptIndex, query: str, filters: Filters) -> list[str]:
    """The ids of every call a search matches (every page of it), each once, in the index's order."""
    ids: list[str] = []
    after: str | None = None
    while True:
        page = index.calls(query, filters, size=SEARCH_PAGE, after=after)
        ids += [str(c["recording_id"]) for c in page.calls]
        if not page.next_after:
            return list(dict.fromkeys(ids))
        after = page.next_after


def produce(door: Door, recording_ids: Iterable[str], directory: Path, *, original: bool = False,
            prefix: str = "CALL", start: int = 1, name: str | None = None, whole_log: bool = True) -> Production:
    """The package of the chosen calls in ``directory`` (new or empty), numbered from ``prefix`` + ``start`` in
    call-date then id order; ``original``: the audio as uploaded and the text before masking, which the caller
    has checked the user may have. A call the door refuses, or whose files cannot be written, is left out whole
    and listed with why. Each call written is an "export" row in the access log, before the log's rows of the
    calls are collected into the package: every row of them, or with ``whole_log`` off (a user who may not read
    the access log) the production's own rows only."""
    ids = list(dict.fromkeys(recording_ids))
    empty_folder(directory)
    if start + len(ids) - 1 > LAST_BATES:
        raise InputError(f"{len(ids)} calls from {prefix}{start:0{BATES_DIGITS}d} run past {prefix}{LAST_BATES}")
    production = Production(directory, name or directory.resolve().name)
    calls = []
    for recording_id in ids:
        try:
            calls.append(door.produced(recording_id, original=original))
        except (Refused, OSError) as exc:  # what the page would answer, or a store that could not be read
            production.refused.append((recording_id, str(exc)))
    for folder in (NATIVES, TEXT, DATA):
        (directory / folder).mkdir(parents=True, exist_ok=True)
    number = start
    for call in sorted(calls, key=lambda c: (c.rec.get("call_date") or "", c.rec["recording_id"])):
        bates = f"{prefix}{number:0{BATES_DIGITS}d}"
        try:
            produced = _write_call(directory, bates, call)
        except OSError as exc:
            production.refused.append((call.rec["recording_id"], f"not written: {exc}"))
            continue
        door.log("export", recording_id=produced.recording_id,
                 detail=f"production {production.name}: {bates}, audio {call.rendition}")
        production.produced.append(produced)
        number += 1
    _write_data(production, door.access, None if whole_log else door.user)
    write_manifest(directory)
    return production


def _write_call(directory: Path, bates: str, call: Call) -> Produced:
    """The call's native and texts under its Bates number, and its load-file row; whatever fails, none of its
    files is left behind."""
    native = f"{NATIVES}/{bates}.{call.extension}"
    texts = {fmt: f"{TEXT}/{bates}.{fmt}" for fmt in TEXT_FORMATS}
    try:
        digest = _copy(call.audio(), directory / native)
        for fmt, text in call.texts().items():
            (directory / texts[fmt]).write_text(text, encoding="utf-8")
    except BaseException:
        for path in (native, *texts.values()):
            (directory / path).unlink(missing_ok=True)
        raise
    rec = call.rec
    duration = rec.get("duration")
    row = {"BEGBATES": bates, "ENDBATES": bates, "RECORDING_ID": str(rec["recording_id"]),
           "CALL_DATE": rec.get("call_date") or "", "AGENT": rec.get("agent_id") or "",
           "CUSTOMER": rec.get("customer_id") or "", "DURATION_SECONDS": "" if duration is None else f"{duration:.2f}",
           "NATIVE_PATH": _windows(native), "TEXT_PATH": _windows(texts["txt"]), "JSON_PATH": _windows(texts["json"]),
           "SHA256": digest, "AUDIO_REDACTED": "Y" if call.rendition == "redacted" else "N",
           "TEXT_REDACTED": "Y" if call.text_masked else "N"}
    return Produced(bates, row["RECORDING_ID"], rec.get("call_date"), (native, *texts.values()), row)


def _windows(path: str) -> str:
    """A path in the package as the load file gives it: relative, with backslashes, as Windows review tools read."""
    return path.replace("/", "\\")


def _copy(pieces: Iterable[bytes], path: Path) -> str:
    """Write the pieces to a new file; their SHA-256."""
    digest = hashlib.sha256()
    with path.open("xb") as out:
        for piece in pieces:
            digest.update(piece)
            out.write(piece)
    return digest.hexdigest()


def _write_data(production: Production, access: AccessLog, only: str | None) -> None:
    """The load file, and the access log of the calls produced (each row as ``AccessEntry.to_dict`` gives it):
    all of it, or (``only``: the user who made it) the production's own rows."""
    lines = [list(COLUMNS), *([p.row[c] for c in COLUMNS] for p in production.produced)]
    dat = "".join(SEPARATOR.join(_value(v) for v in line) + "\r\n" for line in lines)
    (production.directory / LOAD_FILE).write_bytes(dat.encode("utf-8-sig"))
    own = f"production {production.name}: "
    rows = [e.to_dict() for p in production.produced for e in access.entries(recording_id=p.recording_id)
            if only is None or (e.user == only and e.action == "export" and (e.detail or "").startswith(own))]
    (production.directory / ACCESS_LOG).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                                                   encoding="utf-8")


def _value(text: str) -> str:
    """A value between Concordance's qualifiers: a line break as ®, and neither delimiter inside."""
    return QUOTE + re.sub(r"\r\n|\r|\n", NEWLINE, text).replace(QUOTE, "").replace(SEPARATOR, " ") + QUOTE


def sha256_of(path: Path) -> str:
    """A file's SHA-256, read a piece at a time (a native may be hours of audio)."""
    digest = hashlib.sha256()
    with path.open("rb") as data:
        while piece := data.read(CHUNK):
            digest.update(piece)
    return digest.hexdigest()


def _files(directory: Path) -> list[str]:
    """Every file of the package but the manifest, by its path relative to the package (``/``-separated)."""
    found = (p.relative_to(directory).as_posix() for p in directory.rglob("*") if p.is_file())
    return sorted(p for p in found if p != MANIFEST)


def write_manifest(directory: Path) -> None:
    """``MANIFEST.sha256``: each file's SHA-256 and path, by path, as ``sha256sum`` writes them."""
    lines = [f"{sha256_of(directory / path)}  {path}\n" for path in _files(directory)]
    (directory / MANIFEST).write_text("".join(lines), encoding="utf-8")


def verify(directory: Path) -> Verification:
    """The package checked as ``sha256sum -c`` checks it (every line's file there, with that hash: a line appended
    for a changed file leaves the first one failing) and more: every file listed, once, and every row of the load
    file naming files that are there and listed, its native with the hash the row gives."""
    if not directory.is_dir():
        raise InputError(f"{directory}: no such folder")
    present = set(_files(directory))
    if not (directory / MANIFEST).is_file():
        return Verification(missing=[MANIFEST], unlisted=sorted(present))
    lines: list[tuple[str, str]] = []
    malformed = []
    for line in (directory / MANIFEST).read_text(encoding="utf-8").splitlines():
        match = MANIFEST_LINE.fullmatch(line)
        if match is None:
            malformed.append(line)
        else:
            lines.append((match["path"], match["sha256"].lower()))
    listed: dict[str, set[str]] = {}
    for path, digest in lines:
        listed.setdefault(path, set()).add(digest)
    hash_of = cache(lambda path: sha256_of(directory / path))  # a file listed twice is read once
    named, load_file = _check_load_file(directory, present, listed, hash_of)
    unloaded = [] if named is None else [p for p in present - named if p.startswith((f"{NATIVES}/", f"{TEXT}/"))]
    return Verification(missing=sorted(p for p in listed if p not in present),
                        altered=sorted({p for p, h in lines if p in present and hash_of(p) != h}),
                        listed_twice=sorted(p for p, digests in listed.items() if len(digests) > 1),
                        unlisted=sorted(present - set(listed)), load_file=load_file,
                        unloaded=sorted(unloaded), malformed=malformed)


def _check_load_file(directory: Path, present: set[str], listed: dict[str, set[str]],
                     hash_of: Callable[[str], str]) -> tuple[set[str] | None, list[str]]:
    """The files the load file's rows name (None: it cannot be read), and what is wrong with it: not there or not
    readable as a review tool reads it, a row of other columns, a file a row names that is neither in the package
    nor in the manifest (one in just one of them the manifest's own checks name), a native whose hash is not the
    row's."""
    if LOAD_FILE not in present:
        return None, [] if LOAD_FILE in listed else [f"{LOAD_FILE} is not in the package nor in its manifest"]
    try:
        text = (directory / LOAD_FILE).read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError:
        return None, [f"{LOAD_FILE} is not UTF-8 text"]
    lines = [[v.strip(QUOTE) for v in line.split(SEPARATOR)] for line in text.split("\r\n") if line]
    if not lines or lines[0] != list(COLUMNS):
        return None, [f"{LOAD_FILE} does not start with the columns {', '.join(COLUMNS)}"]
    named: set[str] = set()
    problems = []
    for number, values in enumerate(lines[1:], start=2):
        if len(values) != len(COLUMNS):
            problems.append(f"line {number} has {len(values)} values, not {len(COLUMNS)}")
            continue
        row = dict(zip(COLUMNS, values))
        files = [row[c].replace("\\", "/") for c in ("NATIVE_PATH", "TEXT_PATH", "JSON_PATH")]
        named.update(files)
        problems += [f"{row['BEGBATES']}: {path} is not in the package nor in its manifest"
                     for path in files if path not in present and path not in listed]
        if files[0] in present and hash_of(files[0]) != row["SHA256"].lower():
            problems.append(f"{row['BEGBATES']}: {files[0]} is not the native whose SHA256 the row gives")
    return named, problems
