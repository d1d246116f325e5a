"""Legal holds: recordings under litigation that nothing may erase, neither retention nor ``asr erase``, nor
replace: a new model or pipeline version, new content under the key and ``asr reindex`` leave them as they are.

A hold covers one object key, an agent's or a customer's calls, or the calls of
a range of days; it stands until released, and both are kept (who, when, why)
in the ledger's database and written to the access log. With ``object_lock``
on, MinIO's own legal hold follows it on every object of the calls it covers
(``locking.py``).

A hold is asked for as a ``HoldRequest`` (``asr hold`` and the page's API alike), which
refuses what a hold could not honour rather than placing something else: a key, an agent
or a customer with a range of days (their hold covers every call of theirs, whatever its
day), a key no recording has (unless asked for as a hold for a call still to come,
``future``, which the hold keeps and shows), a value that is not a key or an id.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, field_validator, model_validator
from sqlalchemy import insert, select, tuple_, update

from asr_tasks.inputs import CalendarDay, ObjectKey, PartyId, day_range, has_control, message_of, typed
from asr_tasks.records.access_log import AccessLog
from asr_tasks.models import Recording
from asr_tasks.records.ledger import Ledger, as_utc, batches
from asr_tasks.records.locking import RecordLocks
from asr_tasks.records.tables import legal_holds, recordings
from asr_tasks.states import GONE_STATES, NOT_CURRENT_STATES, RecordingState

log = logging.getLogger(__name__)

Scope = Literal["key", "agent", "customer", "dates"]
SCOPES = get_args(Scope)
PIPELINE_USER = "pipeline"  # who the access log names for what sensing did on its own
FORGOTTEN = "(erased)"  # what a released hold names once the calls it covered were erased
WHOLE = {"key": "a key", "agent": "an agent", "customer": "a customer"}  # the scopes that hold every call of theirs


class HoldError(ValueError):
    """A hold that cannot be placed or released; the message says why."""


@dataclass(frozen=True)
class Hold:
    """One legal hold and, once released, who released it, when and why."""

    id: int
    scope: str
    value: str | None
    date_from: str | None
    date_to: str | None
    why: str
    held_by: str
    held_at: str
    released_by: str | None = None
    released_at: str | None = None
    release_why: str | None = None
    future: bool = False  # placed on a key no recording had yet

    @property
    def active(self) -> bool:
        return self.released_at is None

    def covers(self, row: dict[str, Any]) -> bool:
        """Whether the hold covers a ledger row (its key, agent, customer or call date)."""
        if self.scope == "key":
            return row.get("key") == self.value
        if self.scope == "agent":
            return row.get("agent_id") == self.value
        if self.scope == "customer":
            return row.get("customer_id") == self.value
        day = row.get("call_date") or ""
        return bool(day) and (self.date_from or "") <= day <= (self.date_to or "9999-12-31")

    def logged(self) -> str:
        """The hold as the access log keeps it: its id and what kind of thing it covers, not the key or the
        party (the log outlives the calls a released hold covered); the hold register has the rest."""
        return f"legal hold {self.id} on " + ("a range of days" if self.scope == "dates" else WHOLE[self.scope]) + (
            " still to come" if self.future else "")

    def describe(self) -> str:
        what = (f"calls of {self.date_from} to {self.date_to}" if self.scope == "dates"
                else f"{self.scope} {self.value}" + (" (future: no recording had it when placed)" if self.future else ""))
        return f"legal hold {self.id} on {what} ({self.why}; {self.held_by}, {self.held_at})"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "active": self.active}


class HoldRequest(BaseModel):
    """A legal hold as it is asked for (``asr hold``, the page's API): what it covers, why, and whether it is for a
    key still to come. What a hold could not honour is refused here, naming the field."""

    model_config = ConfigDict(extra="forbid")
    scope: Scope
    value: str | None = None
    date_from: CalendarDay | None = None
    date_to: CalendarDay | None = None
    why: str
    future: bool = False

    @field_validator("value")
    @classmethod
    def _value(cls, value: str | None, info: ValidationInfo) -> str | None:
        """A key is an object key, an agent or a customer an id (``inputs.py``); a range of days has none."""
        scope = info.data.get("scope")
        if scope == "dates" and value is not None:
            raise ValueError("a hold on a range of days takes no value: date_from and date_to say which")
        if scope in WHOLE:
            if value is None:
                raise ValueError(f"a hold on {WHOLE[scope]} needs its value")
            return str(typed(ObjectKey if scope == "key" else PartyId, value))
        return value

    @field_validator("date_from", "date_to")
    @classmethod
    def _range(cls, day: str | None, info: ValidationInfo) -> str | None:
        """Refused, not dropped, with a key, an agent or a customer: their hold is on every call of theirs."""
        scope = info.data.get("scope")
        if day is not None and scope in WHOLE:
            raise ValueError(f"a hold on {WHOLE[scope]} covers every call of it, whatever its day: a range of days "
                             "is a hold of its own (scope dates)")
        return day

    @field_validator("why")
    @classmethod
    def _why(cls, why: str) -> str:
        if not why.strip():
            raise ValueError("a hold needs a reason")
        if has_control(why):
            raise ValueError("holds a control character")
        return why

    @field_validator("future")
    @classmethod
    def _future(cls, future: bool, info: ValidationInfo) -> bool:
        """Only a key: an agent's or a customer's hold covers the calls of theirs that come later anyway."""
        if future and info.data.get("scope") != "key":
            raise ValueError("only a hold on a key is asked for as future: an agent's, a customer's or a range of "
                             "days' hold covers the calls still to come already")
        return future

    @model_validator(mode="after")
    def _days(self) -> HoldRequest:
        if self.scope == "dates":
            if self.date_from is None or self.date_to is None:
                raise ValueError("a hold on a range of days needs date_from and date_to (YYYY-MM-DD)")
            day_range(self.date_from, self.date_to, "date_from", "date_to")
        return self


@dataclass(frozen=True)
class Waiting:
    """A new version of a key that waits behind a hold on the key's current version, and why."""

    rec: Recording
    held: dict[str, Any]  # the current version's row, which the hold keeps
    hold_id: int
    why: str
    own: dict[str, Any] | None  # the new version's row, where the ledger has one (superseded, or waiting already)

    def record(self, access: AccessLog) -> None:
        """Both versions, each under its own id; by id only (the log outlives an erasure, a key names a call)."""
        new, kept = self.rec.recording_id, self.held["recording_id"]
        log.info("%s waits behind legal hold %d: the held version %s stays current", new, self.hold_id, kept)
        access.append(PIPELINE_USER, "hold", recording_id=new,
                      detail=f"a new version of a held call's key, kept apart behind legal hold {self.hold_id}; "
                             f"the held version {kept} stays current")
        access.append(PIPELINE_USER, "hold", recording_id=kept,
                      detail=f"kept as it is under legal hold {self.hold_id}: a new version of its key, {new}, waits")


class Holds:
    """The legal holds of one ledger database."""

    def __init__(self, ledger: Ledger, access: AccessLog, locks: RecordLocks | None = None) -> None:
        self.ledger = ledger
        self.engine = ledger.engine
        self.access = access
        self.locks = locks  # MinIO's legal hold, where object locking is on

    def covered(self, hold: Hold) -> list[dict[str, Any]]:
        """The ledger's rows (every version not erased) that a hold covers."""
        t = recordings
        query = select(t).where(t.c.state != RecordingState.ERASED)
        if hold.scope == "dates":
            query = query.where(t.c.call_date >= (hold.date_from or ""), t.c.call_date <= (hold.date_to or "9999"))
        else:
            query = query.where({"key": t.c.key, "agent": t.c.agent_id, "customer": t.c.customer_id}[hold.scope]
                                == hold.value)
        with self.engine.connect() as db:
            return [dict(row._mapping) for row in db.execute(query)]

    def sense(self, recs: Iterable[Recording], model: str, pipeline_version: str) -> set[str]:
        """A day's listing recorded (``Ledger.sensed``) as the holds in force (read once) allow; returns the ids
        the day's stages must leave alone.

        A held version is not started over (nor processed, where another model or pipeline
        made it), and a new version of a held key waits as ``held`` behind it, both logged
        the first time, until a sensing after the hold's release starts it.
        """
        recs = list(recs)
        active = self.listed()
        versions = self._versions_of_keys(recs) if active else {}
        waiting: dict[str, Waiting] = {}
        held: set[str] = set()
        untouched: set[str] = set()
        for rec in recs:
            rows = versions.get((rec.bucket, rec.key), [])
            own = next((row for row in rows if row["recording_id"] == rec.recording_id), None)
            current = next((row for row in rows if row["state"] not in NOT_CURRENT_STATES), None)
            hold = self.holding(current, active) if current is not None else None
            if current is None or hold is None:
                continue
            if current is own:
                held.add(rec.recording_id)
                if (own["model"], own["pipeline_version"]) != (model, pipeline_version):
                    untouched.add(rec.recording_id)  # the stages would make it again, under the new versions
                continue
            # the hold by its id: its register (who asked, why, what it covers) is the records officer's to read
            why = f"waits behind legal hold {hold.id}: the held version (ETag {current['etag']}) stays current"
            waiting[rec.recording_id] = Waiting(rec, current, hold.id, why, own)
            untouched.add(rec.recording_id)
        gone = self.ledger.sensed(recs, model, pipeline_version, {rid: w.why for rid, w in waiting.items()}, held)
        for w in waiting.values():
            if w.own is None or w.own["state"] != RecordingState.HELD:  # kept apart now, not on every sensing
                w.record(self.access)
                if self.locks is not None:  # the new upload is evidence too: MinIO holds it beside the old
                    self.locks.hold_key(w.rec.bucket, w.rec.key)
        return untouched | gone

    def seal(self, date_from: str | None = None, date_to: str | None = None) -> tuple[int, int]:
        """Every recording not erased (of the days given) sealed in MinIO as indexing seals a new one: retained
        until its rule ends, under legal hold where a hold covers it; for an archive from before ``object_lock``
        was turned on, or a hold whose MinIO part failed. Returns the recordings and their objects."""
        if self.locks is None:
            raise HoldError("object_lock is off: there is nothing to seal in the store")
        t = recordings
        query = select(t).where(t.c.state.not_in(GONE_STATES))
        if date_from:
            query = query.where(t.c.call_date >= date_from)
        if date_to:
            query = query.where(t.c.call_date <= date_to)
        with self.engine.connect() as db:
            rows = [dict(r._mapping) for r in db.execute(query.order_by(t.c.call_date, t.c.key))]
        return len(rows), self.seal_rows(rows, self.listed())

    def seal_rows(self, rows: Iterable[dict[str, Any]], active: list[Hold]) -> int:
        """These recordings sealed in MinIO (where object locking is on): retained, and held where one of the
        ``active`` holds covers them; returns the objects."""
        if self.locks is None:
            return 0
        return sum(self.locks.seal(row, held=self.holding(row, active) is not None) for row in rows)

    def _held_keys(self, rows: list[dict[str, Any]], active: list[Hold]) -> set[tuple[str, str]]:
        """The keys of these rows of which another version (another upload, another party) is still held: their
        source and sidecar keep MinIO's legal hold, which is set on every version of an object key."""
        t = recordings
        keys = sorted({(row["bucket"], row["key"]) for row in rows})
        held: set[tuple[str, str]] = set()
        with self.engine.connect() as db:
            for batch in batches(keys):
                query = select(t).where(tuple_(t.c.bucket, t.c.key).in_(batch), t.c.state != RecordingState.ERASED)
                held.update((r.bucket, r.key) for r in db.execute(query) if self.holding(dict(r._mapping), active))
        return held

    def _versions_of_keys(self, recs: list[Recording]) -> dict[tuple[str, str], list[dict[str, Any]]]:
        """Every ledger row of these recordings' keys, by bucket and key."""
        t = recordings
        keys: dict[str, set[str]] = {}
        for rec in recs:
            keys.setdefault(rec.bucket, set()).add(rec.key)
        found: dict[tuple[str, str], list[dict[str, Any]]] = {}
        with self.engine.connect() as db:
            for bucket, names in keys.items():
                for batch in batches(sorted(names)):
                    query = select(t.c.recording_id, t.c.bucket, t.c.key, t.c.etag, t.c.call_date, t.c.state,
                                   t.c.reason, t.c.model, t.c.pipeline_version, t.c.agent_id, t.c.customer_id
                                   ).where(t.c.bucket == bucket, t.c.key.in_(batch))
                    for row in db.execute(query):
                        found.setdefault((row.bucket, row.key), []).append(dict(row._mapping))
        return found

    def place(self, scope: str, why: str, user: str, value: str | None = None, date_from: str | None = None,
              date_to: str | None = None, future: bool = False) -> Hold:
        """A hold as ``HoldRequest`` takes it, on a key some recording has unless it is ``future`` (and then on
        one none has): what it covers is what was asked, or it is refused (``HoldError``)."""
        try:
            asked = HoldRequest(scope=scope, value=value, date_from=date_from, date_to=date_to, why=why,  # type: ignore[arg-type]
                                future=future)
        except ValidationError as exc:
            field = exc.errors()[0]["loc"]
            raise HoldError((f"{field[0]}: " if field else "") + message_of(exc)) from None
        if asked.scope == "key":
            known = self._known(str(asked.value))
            if not (known or asked.future):
                raise HoldError(f"no recording has the key {asked.value!r}: a hold for a call still to come is asked "
                                "for as one (asr hold --future, \"future\": true)")
            if known and asked.future:
                raise HoldError(f"recordings have the key {asked.value!r} already: its hold is not a future one")
        with self.engine.begin() as db:
            hold_id = db.execute(insert(legal_holds).values(
                scope=asked.scope, value=asked.value, date_from=asked.date_from, date_to=asked.date_to, why=asked.why,
                held_by=user, held_at=datetime.now(timezone.utc), future=asked.future,
            ).returning(legal_holds.c.id)).scalar_one()
        hold = self.get(int(hold_id))
        self.access.append(user, "hold", detail=hold.logged())
        if self.locks is not None:
            self.locks.hold(self.covered(hold), True)
        return hold

    def _known(self, key: str) -> bool:
        """Whether a recording not erased has this key (in any bucket)."""
        t = recordings
        with self.engine.connect() as db:
            return db.execute(select(t.c.key).where(t.c.key == key, t.c.state != RecordingState.ERASED).limit(1)
                              ).first() is not None

    def release(self, hold_id: int, why: str, user: str) -> Hold:
        hold = self.get(hold_id)
        if not hold.active:
            raise HoldError(f"legal hold {hold_id} was released already ({hold.released_by}, {hold.released_at})")
        if not why.strip():
            raise HoldError("releasing a hold needs a reason (--why)")
        with self.engine.begin() as db:
            db.execute(update(legal_holds).where(legal_holds.c.id == hold_id, legal_holds.c.released_at.is_(None))
                       .values(released_by=user, released_at=datetime.now(timezone.utc), release_why=why))
        self.access.append(user, "release", detail=f"{hold.logged()} released")
        if self.locks is not None:
            still = self.listed()
            freed = [row for row in self.covered(hold) if self.holding(row, still) is None]
            self.locks.hold(freed, False, spare=self._held_keys(freed, still))
        return self.get(hold_id)

    def forget(self, keys: set[str], customers: set[str]) -> None:
        """Released holds no longer name the keys and customers just erased: the register keeps that a hold
        was there, who placed and released it and why, not whose calls it covered."""
        h = legal_holds
        named = ((h.c.scope == "key") & h.c.value.in_(sorted(keys))) | (
            (h.c.scope == "customer") & h.c.value.in_(sorted(customers)))
        with self.engine.begin() as db:
            db.execute(update(h).where(h.c.released_at.is_not(None), named).values(value=FORGOTTEN))

    def get(self, hold_id: int) -> Hold:
        found = [h for h in self._load(select(legal_holds).where(legal_holds.c.id == hold_id))]
        if not found:
            raise HoldError(f"no legal hold {hold_id}")
        return found[0]

    def listed(self, include_released: bool = False) -> list[Hold]:
        query = select(legal_holds).order_by(legal_holds.c.id)
        if not include_released:
            query = query.where(legal_holds.c.released_at.is_(None))
        return self._load(query)

    def holding(self, row: dict[str, Any], active: list[Hold] | None = None) -> Hold | None:
        """The first active hold that covers a ledger row, if any."""
        return next((h for h in (self.listed() if active is None else active) if h.covers(row)), None)

    def _load(self, query: Any) -> list[Hold]:
        with self.engine.connect() as db:
            rows = db.execute(query).all()
        return [Hold(id=r.id, scope=r.scope, value=r.value, date_from=r.date_from, date_to=r.date_to, why=r.why,
                     held_by=r.held_by, held_at=_iso(r.held_at), released_by=r.released_by,
                     released_at=_iso(r.released_at) if r.released_at else None, release_why=r.release_why,
                     future=bool(r.future))
                for r in rows]


def _iso(value: datetime) -> str:
    return as_utc(value).isoformat(timespec="seconds")

