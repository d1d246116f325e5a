"""Records management from the page's API, for the records officer: legal holds placed and released, and
erasure (``asr erase``). The holds and erasures write their own access-log rows, and so does a listing of
the holds (``door.py``)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException
from pydantic import BaseModel, ConfigDict

from asr_tasks.records.erasure import Eraser, select_keys
from asr_tasks.records.holds import HoldError, Holds, Scope
from asr_tasks.records.locking import record_locks
from asr_tasks.records.reasons import Reason as ErasureReason
from asr_tasks.web.deps import Access, AppLedger, AppSettings, IndexOpener, StoreOpener, User
from asr_tasks.web.door import CallDoor

PERMISSION = "erase_hold"

router = APIRouter()


class HoldRequest(BaseModel):
    """A legal hold placed from the page's API: what it covers, and why."""

    model_config = ConfigDict(extra="forbid")
    scope: Scope
    value: str | None = None
    date_from: str | None = None
    date_to: str | None = None
    why: str


class Reason(BaseModel):
    """Why a hold is released: the log keeps it."""

    model_config = ConfigDict(extra="forbid")
    why: str


class EraseRequest(BaseModel):
    """An erasure asked through the page's API: one of key, recording, customer or before, and the reason's
    code (``reasons.py``)."""

    model_config = ConfigDict(extra="forbid")
    key: str | None = None
    recording_id: str | None = None
    customer: str | None = None
    before: str | None = None
    reason: ErasureReason


def ledger_holds(ledger: AppLedger, access: Access, settings: AppSettings, store: StoreOpener) -> Holds:
    """The ledger's legal holds, which log what is placed and released (and set MinIO's, with object locking)."""
    return Holds(ledger, access, record_locks(store(), settings.storage))


LegalHolds = Annotated[Holds, Depends(ledger_holds)]


@router.get("/api/holds")
def list_holds(holds: LegalHolds, door: CallDoor, include_released: bool = False) -> list[dict[str, Any]]:
    """The holds in force (and, asked for, those released)."""
    door.log("list", detail="legal holds, released ones too" if include_released else "legal holds in force")
    return [h.to_dict() for h in holds.listed(include_released=include_released)]


@router.post("/api/holds", status_code=201)
def place_hold(body: HoldRequest, user: User, holds: LegalHolds) -> dict[str, Any]:
    """A legal hold: nothing erases what it covers until it is released."""
    try:
        return holds.place(body.scope, body.why, user, value=body.value, date_from=body.date_from,
                           date_to=body.date_to).to_dict()
    except HoldError as exc:
        raise HTTPException(status_code=400, detail=str(exc)) from exc


@router.post("/api/holds/{hold_id}/release")
def release_hold(hold_id: int, body: Reason, user: User, holds: LegalHolds) -> dict[str, Any]:
    """A hold lifted: what it covered may be erased again."""
    try:
        return holds.release(hold_id, body.why, user).to_dict()
    except HoldError as exc:
        raise HTTPException(status_code=400, detail=str(exc)) from exc


@router.post("/api/erase")
def erase(body: EraseRequest, user: User, settings: AppSettings, ledger: AppLedger, index: IndexOpener,
          store: StoreOpener, access: Access) -> dict[str, Any]:
    """Erase every version of the chosen keys (``asr erase``); held keys are left and their holds named."""
    try:
        keys = select_keys(ledger, key=body.key, recording_id=body.recording_id, customer=body.customer,
                           before=body.before)
        return Eraser(settings, ledger, store(), index(), access).erase(keys, body.reason, user).to_dict()
    except ValueError as exc:
        raise HTTPException(status_code=400, detail=str(exc)) from exc
