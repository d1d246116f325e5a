"""What only the unredacted permission shows: a recording as it was uploaded, personal data and all, and its
transcript as it was before masking. Each read goes to the access log (``door.py``)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query
from fastapi.responses import Response

from asr_tasks.web.deps import Second
from asr_tasks.web.door import PLAY_NONCE, CallDoor

DOWNLOADS = True  # a call's content as a file: another site's page cannot fetch it in your name (``same_site``)
PERMISSION = "read_unredacted"

router = APIRouter()


@router.get("/audio/{recording_id}/original", name="original_audio")
def original_audio(recording_id: str, door: CallDoor, t: Second = 0.0,
                   play: str = Query("", pattern=PLAY_NONCE)) -> Response:
    """The recording as it was uploaded, personal data and all (``play``: as for the page's audio)."""
    return door.audio(recording_id, t, original=True, play=play)


@router.get("/api/recordings/{recording_id}/unredacted")
def unredacted(recording_id: str, door: CallDoor) -> dict[str, Any]:
    """The transcript as it was before masking, where ``keep_unredacted`` kept it: never indexed, read here only."""
    return door.unredacted(recording_id)
