"""Erasing recordings: a customer's request, an expired retention period, a mistaken upload.

An erasure takes an object key with every version of it: the ledger rows become
tombstones first (state ``erasing``, who, when, the reason's code), then the index documents,
every artefact (transcripts, PCM, renditions), the day's reports and, where
``erase_source`` is on, the recording and its sidecar are removed, and the
tombstones become ``erased``. Every step may run twice, so a crash halfway and a
rerun leave nothing behind; a key under a legal hold is left alone and the hold
is named. The ledger keeps no content of an erased recording: a final tombstone holds the
version's id, who, when and a reason code (``REASONS``), not the key, parties or day, and
the access log's row names the id and the code (``reasons.py``).

What a person erases is an ``ErasureSelection`` (one key, recording, customer, agent or
day before which, and the code), in two steps: ``Eraser.plan`` counts what it takes and
signs a token over the selection, the user and the ids it takes (HMAC-SHA256 under a key
the client never sees, ``erasure_key_file``); ``Eraser.confirmed`` erases only where the
selection, taken again, signs to that token, so calls that arrived since, another
selection or another user erase nothing.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator
from sqlalchemy import select
from sqlalchemy.engine import make_url

from asr_tasks.audit.reports import run_audit
from asr_tasks.audit.rules import load_rule_set
from asr_tasks.config import PROJECT_ROOT, Settings
from asr_tasks.gate.reports import drop_from_reports
from asr_tasks.index.base import TranscriptIndex
from asr_tasks.intake.artefacts import Artefacts
from asr_tasks.intake.days import sidecar_key
from asr_tasks.inputs import CalendarDay, ObjectKey, PartyId, RecordingId
from asr_tasks.intake.stores import ObjectStore
from asr_tasks.records.access_log import AccessLog
from asr_tasks.records.holds import Hold, Holds
from asr_tasks.records.key_files import write_key_file
from asr_tasks.records.ledger import Ledger
from asr_tasks.records.locking import record_locks
from asr_tasks.records.tables import recordings
from asr_tasks.records.reasons import REASONS, Reason
from asr_tasks.states import NOT_CURRENT_STATES, RecordingState
from asr_tasks.version import DayReports, RecordingVersion

log = logging.getLogger(__name__)
SELECTORS = ("key", "recording_id", "customer", "agent", "before")
SHOWN = 20  # the keys a plan lists; the counts are of all of them
KEY_BYTES = 32


@dataclass
class ErasureResult:
    """What an erasure did: keys erased now, keys a crash had left half-erased and finished now, keys left alone
    under a hold, and the days whose reports were rewritten."""

    erased: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)
    held: list[tuple[str, str]] = field(default_factory=list)  # (key, the hold that keeps it)
    days: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"erased": self.erased, "finished": self.finished,
                "held": [{"key": k, "hold": h} for k, h in self.held], "days": self.days}


class ErasureSelection(BaseModel):
    """What one erasure takes, from ``asr erase`` or the page's API: exactly one of an object key, a recording
    (every version of its key), a customer's or an agent's calls, or the calls before a day; and the reason's code.

    Each is typed (``inputs.py``): a day is a calendar day, never text compared with the ledger's days."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    key: ObjectKey | None = None
    recording_id: RecordingId | None = None
    customer: PartyId | None = None
    agent: PartyId | None = None
    before: CalendarDay | None = None
    reason: Reason

    @model_validator(mode="after")
    def _exactly_one(self) -> ErasureSelection:
        named = [name for name in SELECTORS if getattr(self, name) is not None]
        if len(named) != 1:
            raise ValueError("an erasure takes exactly one of key, recording_id, customer, agent or before"
                             + (f", not {' and '.join(named)}" if named else ""))
        return self

    @property
    def chosen(self) -> tuple[str, str]:
        """The one selector given, and its value."""
        name = next(name for name in SELECTORS if getattr(self, name) is not None)
        return name, str(getattr(self, name))

    def logged(self) -> str:
        """What kind of selection it was, as the access log keeps it: never the key or the party (the log outlives
        the calls), the recording's id or the day where it was one of those."""
        name, value = self.chosen
        what = {"key": "one object key", "recording_id": f"the key of recording {value}",
                "customer": "a customer's calls", "agent": "an agent's calls", "before": f"the calls before {value}"}
        return f"{what[name]} ({self.reason})"


def select_keys(ledger: Ledger, selection: ErasureSelection) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Every version (current, superseded, half-erased) of the keys a selection takes, by bucket and key, not yet
    erased: an object key, the key of a recording, the keys of a customer's or an agent's calls, or of the calls
    before a day (the ledger's days are YYYY-MM-DD text, which the typed day compares as days)."""
    t = recordings
    name, value = selection.chosen
    columns = {"key": t.c.key, "recording_id": t.c.recording_id, "customer": t.c.customer_id, "agent": t.c.agent_id}
    where = t.c.call_date < value if name == "before" else columns[name] == value
    return versions_of(ledger, select(t.c.bucket, t.c.key).where(t.c.state != RecordingState.ERASED, where).distinct())


@dataclass(frozen=True)
class ErasurePlan:
    """What a selection would erase now, and the token that confirms exactly that erasure."""

    selection: ErasureSelection
    keys: list[str]  # every key it takes, held ones too, in order
    versions: int
    days: list[str]  # the days whose calls it would erase (and whose reports it would rewrite)
    held: list[tuple[str, str]]  # (key, the hold or lock that keeps it): left alone
    token: str

    def logged(self) -> str:
        return (f"{self.selection.logged()}: {len(self.keys)} keys ({self.versions} versions) of {len(self.days)} "
                f"days, {len(self.held)} of them held")

    def to_dict(self) -> dict[str, Any]:
        return {"selection": self.selection.model_dump(exclude_none=True), "keys": len(self.keys),
                "versions": self.versions, "days": self.days, "held": len(self.held),
                "first_keys": self.keys[:SHOWN], "first_held": [{"key": k, "hold": h} for k, h in self.held[:SHOWN]],
                "token": self.token}


class ErasureKeyError(RuntimeError):
    """The erasure key the settings name is not there: the set-up is wrong, not the request."""


class PlanChanged(Exception):
    """A confirmation whose token does not sign what the selection takes now; ``plan`` is what it takes now."""

    def __init__(self, plan: ErasurePlan) -> None:
        super().__init__(f"nothing erased: the token does not confirm this selection as it stands (new calls, another "
                         f"selection or another user); it now takes {len(plan.keys)} keys ({plan.versions} versions), "
                         f"{len(plan.held)} held: ask for the plan again")
        self.plan = plan


def erasure_key(ledger: Ledger, settings: Settings) -> bytes:
    """The key that signs erasure tokens: ``erasure_key_file`` (a mounted secret: missing is an error, never a new
    key, or the page and ``asr`` would sign with keys of their own), or else ``erasure.key`` beside a SQLite ledger
    (``var/erasure.key`` beside a server database), made on first use, readable by its owner only."""
    url = make_url(ledger.url)
    if settings.ledger.erasure_key_file:
        path = settings.ledger.path("erasure_key_file")
        if not path.exists():
            raise ErasureKeyError(f"no erasure key at {path} (erasure_key_file): mount the key there, or make one "
                                  f"with `head -c {KEY_BYTES} /dev/urandom > {path}`")
    elif url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        path = Path(url.database).with_name("erasure.key")
    else:
        path = PROJECT_ROOT / "var" / "erasure.key"
    if not path.exists():
        write_key_file(path, secrets.token_bytes(KEY_BYTES))
    key = path.read_bytes()
    if len(key) < KEY_BYTES:
        raise ValueError(f"{path}: an erasure key of {len(key)} bytes; at least {KEY_BYTES} (remove it for a new one)")
    return key


def versions_of(ledger: Ledger, keys_query: Any) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """The not yet erased versions of the keys a (bucket, key) query selects, grouped by key."""
    t = recordings
    keys = keys_query.subquery()
    query = (select(t).join(keys, (t.c.bucket == keys.c.bucket) & (t.c.key == keys.c.key))
             .where(t.c.state != RecordingState.ERASED).order_by(t.c.bucket, t.c.key, t.c.sensed_at))
    grouped: dict[tuple[str, str], list[dict[str, Any]]] = {}
    with ledger.engine.connect() as db:
        for row in db.execute(query):
            grouped.setdefault((row.bucket, row.key), []).append(dict(row._mapping))
    return grouped


class Eraser:
    """Erases keys with everything they left behind, and rewrites the reports of the days it touched."""

    def __init__(self, settings: Settings, ledger: Ledger, store: ObjectStore, index: TranscriptIndex,
                 access: AccessLog) -> None:
        self.settings, self.ledger, self.store, self.index, self.access = settings, ledger, store, index, access
        self.locks = record_locks(store, settings.storage)
        self.holds = Holds(ledger, access, self.locks)

    def plan(self, selection: ErasureSelection, user: str) -> ErasurePlan:
        """What the selection would erase, with the token that confirms it; erases nothing (logged with the count)."""
        plan = self._planned(selection, user, select_keys(self.ledger, selection))
        self.access.append(user, "erase", detail=f"dry run, nothing erased: {plan.logged()}")
        return plan

    def confirmed(self, selection: ErasureSelection, user: str, token: str) -> ErasureResult:
        """The erasure a plan's token confirms, the selection taken again: ``PlanChanged`` (nothing erased) where
        its recordings, the selection or the user are not those the token was given for."""
        keys = select_keys(self.ledger, selection)
        plan = self._planned(selection, user, keys)
        if not hmac.compare_digest(plan.token, token):
            self.access.append(user, "erase", detail=f"refused, nothing erased: the token does not confirm "
                                                     f"{plan.logged()}")
            raise PlanChanged(plan)
        result = self.erase(keys, selection.reason, user)
        self.access.append(user, "erase", detail=f"confirmed: {selection.logged()}: {len(result.erased)} keys erased "
                                                 f"({plan.versions} versions chosen), {len(result.held)} held, "
                                                 f"{len(result.finished)} interrupted erasures finished")
        return result

    def _planned(self, selection: ErasureSelection, user: str,
                 keys: dict[tuple[str, str], list[dict[str, Any]]]) -> ErasurePlan:
        active = self.holds.listed()
        held: list[tuple[str, str]] = []
        days: set[str] = set()
        for (_, key), versions in sorted(keys.items()):
            hold = self._hold(versions, active)
            if hold is not None:
                held.append((key, hold if isinstance(hold, str) else hold.describe()))
            else:
                days.update(row["call_date"] or "undated" for row in versions)
        ids = sorted(row["recording_id"] for versions in keys.values() for row in versions)
        signed = json.dumps({"selection": selection.model_dump(mode="json"), "user": user,
                             "ids": hashlib.sha256("\n".join(ids).encode()).hexdigest()}, sort_keys=True)
        token = hmac.new(erasure_key(self.ledger, self.settings), signed.encode(), hashlib.sha256).hexdigest()[:32]
        return ErasurePlan(selection, sorted(key for _, key in keys), len(ids), sorted(days), held, token)

    def erase(self, keys: dict[tuple[str, str], list[dict[str, Any]]], reason: str, user: str) -> ErasureResult:
        """Erase the keys for ``reason`` (a code of ``REASONS``), and first finish every erasure a crash cut
        short (whatever it was asked for).

        The tombstones become ``erased`` only once the days' reports are rewritten,
        so a crash at any point leaves ``erasing`` rows that the next erasure finishes.
        """
        if reason not in REASONS:
            raise ValueError(f"an erasure's reason is one of {', '.join(REASONS)}, not {reason!r}")
        result = ErasureResult()
        pending = unfinished(self.ledger)
        active = self.holds.listed()
        gone: list[dict[str, Any]] = []
        for (bucket, key), versions in {**pending, **keys}.items():
            resumed = (bucket, key) in pending
            hold = None if resumed else self._hold(versions, active)  # begun before a hold: finished
            if hold is not None:
                why = hold if isinstance(hold, str) else hold.describe()
                result.held.append((key, why))
                log.info("recording %s: not erased: %s", versions[-1]["recording_id"], why)
                continue
            if not resumed:
                self.ledger.erasing([row["recording_id"] for row in versions], user, reason)
                current = next((r["recording_id"] for r in reversed(versions) if r["state"] not in NOT_CURRENT_STATES),
                               versions[-1]["recording_id"])
                self.access.append(user, "erase", recording_id=current,
                                   detail=f"every version of its key ({len(versions)}): {reason}")
            self._remove(bucket, key, versions)
            (result.finished if resumed else result.erased).append(key)
            gone.extend(versions)
        if gone:
            self.index.purge_deleted()
            self.access.forget(row["recording_id"] for row in gone)
            self.holds.forget({row["key"] for row in gone}, {row["customer_id"] for row in gone if row["customer_id"]})
        touched: dict[str, set[str]] = {}
        for row in gone:
            touched.setdefault(row["call_date"] or "undated", set()).add(row["recording_id"])
        for day, ids in sorted(touched.items()):
            self._rewrite_reports(day, ids)
            result.days.append(day)
        self.ledger.erased([row["recording_id"] for row in gone])
        return result

    def _hold(self, versions: list[dict[str, Any]], active: list[Hold]) -> Hold | str | None:
        """The hold that keeps the key, or why the store would refuse to erase it (object locking)."""
        hold = next((h for row in versions if (h := self.holds.holding(row, active)) is not None), None)
        if hold is None and self.locks is not None:
            return next((why for row in versions if (why := self.locks.kept(row)) is not None), None)
        return hold

    def _remove(self, bucket: str, key: str, versions: list[dict[str, Any]]) -> None:
        """The key's index documents, the reviews of its findings, every version's artefacts and, with
        ``erase_source``, the recording itself."""
        self.index.delete_recording(bucket, key)
        self.ledger.forget_reviews([row["recording_id"] for row in versions])
        artefacts = self.settings.storage.artefacts_bucket
        for row in versions:
            for version in RecordingVersion.every(row["call_date"], row["recording_id"]):
                for item in list(self.store.list_keys(artefacts, version.folder)):
                    self.store.delete(artefacts, item.key)
        if self.settings.storage.erase_source:
            self.store.delete(bucket, key)
            self.store.delete(bucket, sidecar_key(key))

    def _rewrite_reports(self, day: str, recording_ids: set[str]) -> None:
        """The day's quality reports without the erased recordings, and its QA audit run again without them."""
        artefacts = Artefacts.of(self.store, self.settings)
        drop_from_reports(recording_ids, day, artefacts, self.settings.quality)
        if artefacts.exists(DayReports(day).audit("json")):
            run_audit(day, load_rule_set(self.settings.audit.path("qa_rules_dir")), self.index, self.store,
                      self.settings)


def unfinished(ledger: Ledger) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Keys whose erasure began and did not end (a crash): a rerun finishes them."""
    t = recordings
    return versions_of(ledger, select(t.c.bucket, t.c.key).where(t.c.state == RecordingState.ERASING).distinct())

