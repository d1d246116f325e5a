"""The recordings' audio as the page plays it: the redacted rendition where personal data was said in it.

Every byte is served here, never from a link to the store, so each request goes to the access log with the
bytes it got (``door.py``): the browser's media element asks for parts of the file (HTTP Range) to start
playback in the middle, and the page names each play with a nonce so that its requests are one row. Only recordings that the pipeline decoded are served, with a media type read from the
file's first bytes (never from its name) and as an attachment: an upload is hostile until shown otherwise.
"""

from __future__ import annotations

from fastapi import APIRouter, Query
from fastapi.responses import Response

from asr_tasks.web.deps import Second
from asr_tasks.web.door import PLAY_NONCE, CallDoor

DOWNLOADS = True  # a call's content as a file: another site's page cannot fetch it in your name (``same_site``)
PERMISSION = "read"

router = APIRouter()


@router.get("/audio/{recording_id}", name="audio")
def audio(recording_id: str, door: CallDoor, t: Second = 0.0, play: str = Query("", pattern=PLAY_NONCE)) -> Response:
    """The recording as the page plays it: its redacted rendition where personal data was said in it; ``play``
    the page's nonce of one play (one row for all its range requests)."""
    return door.audio(recording_id, t, original=False, play=play)
