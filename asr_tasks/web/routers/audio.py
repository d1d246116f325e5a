"""The recordings' audio as the page plays it: the redacted rendition where personal data was said in it.

Every byte is served here, never from a link to the store, so each request goes to the access log with the
bytes it got (``door.py``): the browser's media element asks for parts of the file (HTTP Range) to start
playback in the middle. Only recordings that the pipeline decoded are served, with a media type read from the
file's first bytes (never from its name) and as an attachment: an upload is hostile until shown otherwise.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from asr_tasks.web.deps import Second
from asr_tasks.web.door import CallDoor

PERMISSION = "read"

router = APIRouter()


@router.get("/audio/{recording_id}", name="audio")
def audio(recording_id: str, door: CallDoor, t: Second = 0.0) -> Response:
    """The recording as the page plays it: its redacted rendition where personal data was said in it."""
    return door.audio(recording_id, t, original=False)
