"""Anchors of the access log: the hash of its last row at a moment, signed and kept outside the database, so that
rows cut off its end, or a chain rewritten from some row on, show.

The chain (``chain.py``) shows a row changed or removed in the middle; a database
owner who removes the last rows, or rewrites every hash after an edit, leaves a
chain that holds. An anchor written before that does not: the nightly audit
writes one to the day's QA report and to an object of its own under
``anchors/access-log/`` (retained by MinIO's object lock where it is on), and
``asr access-log --verify`` checks every anchor it finds, in both places, against
the rows.

Each anchor is signed with an Ed25519 key kept outside the ledger's database
(``anchor_key_file``), and verify checks the signature with the public key the
settings name, never one an anchor carries: whoever rewrites the chain and the
anchors without the private key leaves anchors that do not verify. Since every
row is chained to the rows after it, a signed anchor protects every row up to
its own; the rows after the last one are counted as not yet protected.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from sqlalchemy import select

from asr_tasks.config import StorageSettings
from asr_tasks.intake.stores import MinioStore, ObjectStore, put_json
from asr_tasks.records.access_log import AccessLog, ChainCheck
from asr_tasks.records.ledger import batches
from asr_tasks.records.key_files import write_key_file
from asr_tasks.records.locking import RecordLocks
from asr_tasks.records.tables import access_log
from asr_tasks.version import DayReports

log = logging.getLogger(__name__)

PREFIX = "anchors/access-log/"
REPORTS = "reports/qa/"  # the nightly QA reports (``DayReports.audit``): each holds the anchor its run wrote
SIGNED = b"asr access-log anchor v1\n"  # what every signed text starts with: a signature of nothing else


class AnchorKeyError(RuntimeError):
    """The anchor key is missing or is not an Ed25519 key."""


@dataclass(frozen=True)
class Anchor:
    """The access log's last row when anchored: its id, its time and its hash, and the anchor key's signature of
    them (base64; None in an anchor written before anchors were signed)."""

    id: int
    at: str
    hash: str
    anchored_at: str
    signature: str | None = None

    def signed_text(self) -> bytes:
        return SIGNED + json.dumps([self.id, self.at, self.hash, self.anchored_at], separators=(",", ":")).encode()

    def signed_by(self, public: Ed25519PublicKey) -> bool:
        try:
            public.verify(base64.b64decode(self.signature or "", validate=True), self.signed_text())
        except (InvalidSignature, ValueError):
            return False
        return True

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _private(path: Path) -> Ed25519PrivateKey:
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise AnchorKeyError(f"{path}: not an Ed25519 private key")
    return key


def _public_pem(key: Ed25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def new_anchor_key(path: Path) -> Ed25519PrivateKey:
    """An anchor key at ``path`` (PKCS#8 PEM, mode 0600) and its public key beside it (``<path>.pub``); a key
    already there is kept. ``openssl genpkey -algorithm ed25519`` makes the same."""
    write_key_file(path, Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()),
        replace_existing=False)
    key = _private(path)
    public = Path(f"{path}.pub")
    if not public.exists() or public.read_bytes() != _public_pem(key):
        write_key_file(public, _public_pem(key), replace_existing=True)
    return key


def signing_key(storage: StorageSettings) -> Ed25519PrivateKey:
    """The key anchors are signed with. The embedded default is made on first use (and its public key logged);
    a key file the settings name must be there: a missing mounted secret is an error, never a new key."""
    path = storage.path("anchor_key_file")
    if path.exists():
        return _private(path)
    if storage.anchor_key_file != StorageSettings().anchor_key_file:
        raise AnchorKeyError(f"no anchor key at {path} (anchor_key_file): mount the key there, or make one with "
                             f"`openssl genpkey -algorithm ed25519 -out {path}`")
    key = new_anchor_key(path)
    log.warning("anchor key made at %s; its public key, which verify checks anchors with, is %s.pub", path, path)
    return key


def public_key_file(storage: StorageSettings) -> Path:
    """Where the public key verify trusts is: ``anchor_public_key_file``, or the file beside the key."""
    if storage.anchor_public_key_file:
        return storage.path("anchor_public_key_file")
    return Path(f"{storage.path('anchor_key_file')}.pub")


def verifying_key(storage: StorageSettings) -> Ed25519PublicKey | None:
    """The configured public key (None where its file is not there: no anchor's signature can be checked)."""
    path = public_key_file(storage)
    if not path.exists():
        return None
    key = serialization.load_pem_public_key(path.read_bytes())
    if not isinstance(key, Ed25519PublicKey):
        raise AnchorKeyError(f"{path}: not an Ed25519 public key")
    return key


def fingerprint(public: Ed25519PublicKey) -> str:
    """A public key as people compare it: SHA-256 of its raw bytes, first 16 hex digits."""
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def write_anchor(access: AccessLog, store: ObjectStore, bucket: str, locks: RecordLocks | None,
                 key: Ed25519PrivateKey) -> Anchor | None:
    """Anchor the log as it stands (None while it is empty), signed with ``key``: one object per last row,
    retained where locking is on, and the anchor returned for the day's report."""
    last = access.last()
    if last is None or last.id is None or last.row_hash is None:
        return None
    anchor = Anchor(last.id, last.at, last.row_hash, datetime.now(timezone.utc).isoformat(timespec="seconds"))
    anchor = replace(anchor, signature=base64.b64encode(key.sign(anchor.signed_text())).decode())
    key_name = f"{PREFIX}{anchor.id:012d}.json"
    put_json(store, bucket, key_name, anchor.to_dict())
    if locks is not None:
        locks.anchor(bucket, key_name)
    return anchor


@dataclass
class Kept:
    """The anchors a store holds, every version of each where it keeps versions, and what is wrong with them:
    one that is no anchor, deleted (a delete marker over a retained version) or written over with another; and
    where each was found."""

    anchors: list[Anchor]
    problems: list[str]
    where: dict[Anchor, list[str]] = field(default_factory=dict)

    def named(self, anchor: Anchor) -> str:
        return f"the anchor of row {anchor.id} ({', '.join(self.where.get(anchor, []))})"


def stored_anchors(store: ObjectStore, bucket: str) -> Kept:
    """Every anchor kept in the artefact bucket, oldest first; on MinIO every version of each, so that a plain
    delete or an overwrite (which a retention does not stop) hides none."""
    if isinstance(store, MinioStore):
        return _versioned(store, bucket)
    kept = Kept([], [])
    for item in store.list_keys(bucket, PREFIX):
        _read(store.get_bytes(bucket, item.key), item.key, kept)
    return kept


def _versioned(store: MinioStore, bucket: str) -> Kept:
    kept = Kept([], [])
    by_key: dict[str, list[Any]] = {}
    for obj in store.versions(bucket, PREFIX, under=True):
        by_key.setdefault(obj.object_name, []).append(obj)
    for key, versions in sorted(by_key.items()):
        if any(v.is_delete_marker for v in versions):
            kept.problems.append(f"anchor {key} was deleted (a delete marker hides it); its versions are read")
        found = {_read(store.call(f"read {bucket}/{key}", partial(_version_bytes, store, bucket, key, v.version_id)),
                       key, kept) for v in versions if not v.is_delete_marker}
        if len(found - {None}) > 1:
            kept.problems.append(f"anchor {key} was written over: its versions name {len(found - {None})} hashes")
    return kept


def _version_bytes(store: MinioStore, bucket: str, key: str, version_id: str | None) -> bytes:
    answer = store.client.get_object(bucket, key, version_id=version_id)
    try:
        return bytes(answer.read())
    finally:
        answer.close()
        answer.release_conn()


def _read(data: bytes, key: str, kept: Kept) -> str | None:
    """One stored anchor into ``kept`` (or a problem naming it); its hash."""
    try:
        value = json.loads(data)
    except ValueError as exc:
        kept.problems.append(f"anchor {key} is not an anchor ({exc})")
        return None
    return _take(value, key, kept)


def _take(value: Any, where: str, kept: Kept) -> str | None:
    try:
        anchor = Anchor(**value)
        if not isinstance(anchor.id, int) or not isinstance(anchor.hash, str) or not isinstance(
                anchor.signature, (str, type(None))):
            raise TypeError("id, hash or signature of the wrong type")
    except TypeError as exc:
        kept.problems.append(f"anchor {where} is not an anchor ({exc})")
        return None
    if anchor not in kept.where:
        kept.anchors.append(anchor)
    if where not in kept.where.setdefault(anchor, []):
        kept.where[anchor].append(where)
    return anchor.hash


def found_anchors(store: ObjectStore, bucket: str) -> Kept:
    """Every anchor verify can find in the artefact bucket: the anchor objects (every version on MinIO) and the
    anchor each nightly QA report holds, which a rewrite of the anchor objects alone leaves as it was."""
    kept = stored_anchors(store, bucket)
    for item in store.list_keys(bucket, REPORTS):
        day = item.key[len(REPORTS):].split("/", 1)[0]
        if item.key != DayReports(day).audit("json"):
            continue
        try:
            report = json.loads(store.get_bytes(bucket, item.key))
        except ValueError as exc:
            kept.problems.append(f"the QA report {item.key} cannot be read ({exc})")
            continue
        anchor = report.get("access_log_anchor") if isinstance(report, dict) else None
        if anchor is not None:  # a day audited while the log was empty has none
            _take(anchor, item.key, kept)
    return kept


def unmatched(access: AccessLog, anchors: list[Anchor], kept: Kept | None = None) -> list[str]:
    """What of each anchor the log no longer holds: its row gone, or its row's hash not the anchored one (each
    anchor named with where it was found, when ``kept`` says)."""
    hashes: dict[int, str | None] = {}
    with access.engine.connect() as db:
        for batch in batches(sorted({a.id for a in anchors})):
            query = select(access_log.c.id, access_log.c.row_hash).where(access_log.c.id.in_(batch))
            hashes.update({row.id: row.row_hash for row in db.execute(query)})
    problems = []
    for a in anchors:
        found = f" ({', '.join(kept.where[a])})" if kept is not None and kept.where.get(a) else ""
        if a.id not in hashes:
            problems.append(f"row {a.id}, anchored {a.anchored_at} with hash {a.hash[:16]}…{found}, is not in the "
                            f"log: rows were removed from its end")
        elif hashes[a.id] != a.hash:
            problems.append(f"row {a.id} does not carry the hash anchored {a.anchored_at} ({a.hash[:16]}…){found}: "
                            f"the chain was rewritten")
    return problems


@dataclass(frozen=True)
class LogCheck:
    """The chain over the rows checked, the anchors checked with it, and what does not match; the anchors whose
    signature verifies, the unsigned ones a signed anchor covers (reported, not failing), the last signed
    anchor's row and the rows after it, which no anchor protects yet."""

    chain: ChainCheck
    anchors: int
    problems: list[str]
    signed: int = 0
    unsigned: list[str] = field(default_factory=list)
    last_signed: int | None = None
    unprotected: int = 0

    @property
    def intact(self) -> bool:
        return self.chain.intact and not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {**self.chain.to_dict(), "anchors": self.anchors, "anchor_problems": self.problems,
                "signed_anchors": self.signed, "unsigned_anchors": self.unsigned,
                "last_signed_anchor": self.last_signed, "unprotected_rows": self.unprotected, "intact": self.intact}


@dataclass
class Signatures:
    """The anchors sorted by their signature under the configured public key."""

    signed: list[Anchor]
    forged: list[Anchor]  # signed, but not by the anchor key (or not checkable: no public key)
    unsigned: list[Anchor]
    problems: list[str]
    covered: list[str]  # unsigned anchors a signed one at or after their row covers


def signatures(kept: Kept, public: Ed25519PublicKey | None) -> Signatures:
    """Each anchor's signature checked with ``public``. An unsigned anchor (from before anchors were signed, or
    written by someone without the key: verify cannot tell which) fails the check unless a signed anchor stands
    at or after its row: the chain ties every row to the rows after it, so that anchor protects what the
    unsigned one claims to; past the last signed anchor, an unsigned one vouches for rows nothing else does."""
    found = Signatures([], [], [], [], [])
    for anchor in kept.anchors:
        if anchor.signature is None:
            found.unsigned.append(anchor)
        elif public is not None and anchor.signed_by(public):
            found.signed.append(anchor)
        else:
            found.forged.append(anchor)
            if public is not None:
                found.problems.append(f"{kept.named(anchor)}: its signature does not verify with the anchor public "
                                      f"key {fingerprint(public)}: it was written or rewritten without the anchor key")
    if public is None and found.forged:
        found.problems.append(f"{len(found.forged)} signed anchors cannot be checked: no anchor public key "
                              f"(anchor_public_key_file)")
    last = max((a.id for a in found.signed), default=None)
    for anchor in found.unsigned:
        if last is not None and anchor.id <= last:
            found.covered.append(f"{kept.named(anchor)} is unsigned; the signed anchor of row {last} covers it")
        else:
            found.problems.append(f"{kept.named(anchor)} is unsigned and no signed anchor covers its row: it vouches "
                                  f"for nothing (written before anchors were signed, or by someone without the key)")
    return found


def check_log(access: AccessLog, kept: Kept, since: datetime | None, until: datetime | None,
              public: Ed25519PublicKey | None) -> LogCheck:
    """The chain over the days asked, widened to the signed anchors around them (back to the last at or before
    their first row, on to the first at or after their last; the log's start and end where there is none), so
    that a row of the days removed or rewritten with every hash after it shows; every anchor's signature
    checked with ``public``, and those in the range against the rows; and the rows after the last signed
    anchor counted."""
    sigs = signatures(kept, public)
    first, last = access.span(since, until)
    ids = sorted({a.id for a in sigs.signed})
    start = end = None
    if since is not None:
        start = max((i for i in ids if first is None or i <= first), default=None)
    if until is not None:
        end = min((i for i in ids if i >= (last or 0)), default=None)
    chain = access.verify_ids(start, end)
    checked = [a for a in kept.anchors if a not in sigs.forged and (start is None or a.id >= start)
               and (end is None or a.id <= end)]
    last_signed = ids[-1] if ids else None
    cut = [cut] if (cut := access.cut_off()) is not None else []
    return LogCheck(chain, len(checked), kept.problems + sigs.problems + unmatched(access, checked, kept) + cut,
                    len(sigs.signed), sigs.covered, last_signed, access.count_after(last_signed))
