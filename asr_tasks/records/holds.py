"""Legal holds: recordings under litigation that nothing may erase, neither retention nor ``asr erase``.

A hold covers one object key, an agent's or a customer's calls, or the calls of
a range of days; it stands until released, and both are kept (who, when, why)
in the ledger's database and written to the access log.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import date, datetime, timezone
from typing import Any, Literal, get_args

from sqlalchemy import insert, select, update

from asr_tasks.records.access_log import AccessLog
from asr_tasks.records.ledger import Ledger, as_utc, legal_holds

Scope = Literal["key", "agent", "customer", "dates"]
SCOPES = get_args(Scope)


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

    def describe(self) -> str:
        what = (f"calls of {self.date_from} to {self.date_to}" if self.scope == "dates"
                else f"{self.scope} {self.value}")
        return f"legal hold {self.id} on {what} ({self.why}; {self.held_by}, {self.held_at})"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "active": self.active}


class Holds:
    """The legal holds of one ledger database."""

    def __init__(self, ledger: Ledger, access: AccessLog) -> None:
        self.engine = ledger.engine
        self.access = access

    def place(self, scope: str, why: str, user: str, value: str | None = None, date_from: str | None = None,
              date_to: str | None = None) -> Hold:
        if scope not in SCOPES:
            raise HoldError(f"unknown hold scope {scope!r} (scopes: {', '.join(SCOPES)})")
        if not why.strip():
            raise HoldError("a hold needs a reason (--why)")
        if scope == "dates":
            for day in (date_from, date_to):
                try:
                    date.fromisoformat(day or "")
                except ValueError as exc:
                    raise HoldError(f"a hold on dates needs --from and --to as YYYY-MM-DD, not {day!r}") from exc
            if str(date_from) > str(date_to):
                raise HoldError(f"--from {date_from} is after --to {date_to}")
            value = None
        elif not value:
            raise HoldError(f"a hold on a {scope} needs its value")
        with self.engine.begin() as db:
            hold_id = db.execute(insert(legal_holds).values(
                scope=scope, value=value, date_from=date_from if scope == "dates" else None,
                date_to=date_to if scope == "dates" else None, why=why, held_by=user,
                held_at=datetime.now(timezone.utc)).returning(legal_holds.c.id)).scalar_one()
        hold = self.get(int(hold_id))
        self.access.append(user, "hold", detail=hold.describe())
        return hold

    def release(self, hold_id: int, why: str, user: str) -> Hold:
        hold = self.get(hold_id)
        if not hold.active:
            raise HoldError(f"legal hold {hold_id} was released already ({hold.released_by}, {hold.released_at})")
        if not why.strip():
            raise HoldError("releasing a hold needs a reason (--why)")
        with self.engine.begin() as db:
            db.execute(update(legal_holds).where(legal_holds.c.id == hold_id, legal_holds.c.released_at.is_(None))
                       .values(released_by=user, released_at=datetime.now(timezone.utc), release_why=why))
        self.access.append(user, "release", detail=f"{hold.describe()} released: {why}")
        return self.get(hold_id)

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
                     released_at=_iso(r.released_at) if r.released_at else None, release_why=r.release_why)
                for r in rows]


def _iso(value: datetime) -> str:
    return as_utc(value).isoformat(timespec="seconds")

