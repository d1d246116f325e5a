"""What only the unredacted permission shows: a recording as it was uploaded, personal data and all, and its
transcript as it was before masking. Each read goes to the access log."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import Response

from asr_tasks.intake.artefacts import Artefacts
from asr_tasks.version import RecordingVersion
from asr_tasks.web.deps import Access, AppLedger, AppSettings, IndexOpener, Second, StoreOpener, User, indexed
from asr_tasks.web.routers.audio import log_play, servable, stored_audio

PERMISSION = "read_unredacted"

router = APIRouter()


@router.get("/audio/{recording_id}/original", name="original_audio")
def original_audio(recording_id: str, request: Request, user: User, index: IndexOpener, store: StoreOpener,
                   ledger: AppLedger, access: Access, t: Second = 0.0) -> Response:
    """The recording as it was uploaded, personal data and all."""
    rec = servable(index(), ledger, recording_id)
    opened = store()
    log_play(request, access, user, recording_id, f"original from {t:.1f} s")
    return stored_audio(opened, rec["bucket"], rec["key"], recording_id)


@router.get("/api/recordings/{recording_id}/unredacted")
def unredacted(recording_id: str, user: User, settings: AppSettings, index: IndexOpener, store: StoreOpener,
               ledger: AppLedger, access: Access) -> dict[str, Any]:
    """The transcript as it was before masking, where ``keep_unredacted`` kept it: never indexed, read here only."""
    rec = indexed(index(), ledger, recording_id)
    version, artefacts = RecordingVersion.indexed(rec), Artefacts.of(store(), settings, str(rec.get("model")))
    if not artefacts.exists(version.unredacted(artefacts.model)):
        raise HTTPException(status_code=404, detail=f"recording {recording_id}: no unredacted transcript is "
                                                    "kept (keep_unredacted)")
    access.append(user, "read", recording_id=recording_id, detail="unredacted transcript")
    return artefacts.unredacted(version).to_dict()
