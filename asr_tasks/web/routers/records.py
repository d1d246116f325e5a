"""Records management from the page's API, for the records officer: legal holds placed and released, and
erasure (``asr erase``) in two steps, the plan and its token first. The bodies are the models ``asr hold`` and
``asr erase`` fill in (``HoldRequest``, ``ErasureSelection``), so a value that is not what it claims is a 422
naming the field. The holds and erasures write their own access-log rows, and so does a listing of the holds
(``door.py``)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException
from pydantic import BaseModel, ConfigDict, model_validator

from asr_tasks.inputs import ConfirmationToken
from asr_tasks.records.erasure import SELECTORS, Eraser, ErasureSelection, PlanChanged
from asr_tasks.records.holds import HoldError, HoldRequest, Holds
from asr_tasks.records.locking import record_locks
from asr_tasks.web.deps import Access, AppLedger, AppSettings, IndexOpener, StoreOpener, User
from asr_tasks.web.door import CallDoor

PERMISSION = "erase_hold"

router = APIRouter()


class Reason(BaseModel):
    """Why a hold is released: the log keeps it."""

    model_config = ConfigDict(extra="forbid")
    why: str


class EraseRequest(ErasureSelection):
    """An erasure asked through the page's API: the selection, and either nothing (or ``dry_run``: the plan and its
    token, nothing erased) or the plan's token as ``confirm`` (the erasure)."""

    dry_run: bool = False
    confirm: ConfirmationToken | None = None

    @model_validator(mode="after")
    def _one_step(self) -> EraseRequest:
        if self.dry_run and self.confirm is not None:
            raise ValueError("dry_run or confirm: the plan, or the erasure it gave the token for")
        return self

    def selection(self) -> ErasureSelection:
        return ErasureSelection.model_validate(self.model_dump(include={*SELECTORS, "reason"}))


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
        return holds.place(user=user, **body.model_dump()).to_dict()
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
    """Without ``confirm``: what the selection would erase (keys, versions, days, held keys) and the token that
    confirms it, nothing erased. With it: every version of the chosen keys erased (``asr erase``), held keys left
    and their holds named; 409 and nothing erased where the selection no longer takes what the token was for."""
    eraser = Eraser(settings, ledger, store(), index(), access)
    if body.confirm is None:
        return {"dry_run": True, **eraser.plan(body.selection(), user).to_dict()}
    try:
        return eraser.confirmed(body.selection(), user, body.confirm).to_dict()
    except PlanChanged as exc:
        now = {name: value for name, value in exc.plan.to_dict().items() if name != "token"}  # a new dry run's
        raise HTTPException(status_code=409, detail={"message": str(exc), **now}) from exc
