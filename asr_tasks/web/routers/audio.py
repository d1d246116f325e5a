"""The recordings' audio as the page plays it: the redacted rendition where personal data was said in it.

A store that can sign an HTTP URL (MinIO) is redirected to; otherwise the
recording is served here with HTTP Range support, which the browser needs to
start playback in the middle of a file. Only recordings that the pipeline
decoded are served, with a media type read from the file's first bytes (never
from its name) and as an attachment: an upload is hostile until shown otherwise.
The helpers here also serve the original audio (``unredacted``).
"""

from __future__ import annotations

from contextlib import ExitStack
from datetime import timedelta
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import FileResponse, RedirectResponse, Response
from starlette.background import BackgroundTask

from asr_tasks.config import Settings
from asr_tasks.index.base import TranscriptIndex
from asr_tasks.intake.artefacts import Artefacts
from asr_tasks.intake.stores import ObjectStore
from asr_tasks.records.access_log import AccessLog
from asr_tasks.records.ledger import Ledger
from asr_tasks.states import RecordingState
from asr_tasks.version import RecordingVersion
from asr_tasks.web.deps import Access, AppLedger, AppSettings, IndexOpener, Second, StoreOpener, User, indexed

PERMISSION = "read"
PRESIGN_EXPIRES = timedelta(minutes=15)
# Audio containers by their first bytes: (offset, magic) -> media type. Anything else is not served.
MAGIC: list[tuple[int, bytes, str]] = [
    (8, b"WAVE", "audio/wav"), (0, b"fLaC", "audio/flac"), (0, b"OggS", "audio/ogg"), (0, b"ID3", "audio/mpeg"),
    (4, b"ftyp", "audio/mp4"), (0, b"#!AMR", "audio/amr"), (0, b"\x1a\x45\xdf\xa3", "audio/webm"),
    (0, b".snd", "audio/basic"), (8, b"AIFF", "audio/aiff"), (0, b"riff", "audio/wav"),  # Wave64
]

RANGE_SHOWN = 80  # characters of a Range header the access log keeps
router = APIRouter()


def audio_media_type(head: bytes) -> str | None:
    """The media type of an audio file from its first bytes (MPEG audio and ADTS by their frame sync)."""
    for offset, magic, media_type in MAGIC:
        if head[offset : offset + len(magic)] == magic:
            return media_type
    if len(head) >= 2 and head[0] == 0xFF and head[1] & 0xF6 == 0xF0:
        return "audio/aac"  # ADTS: sync word, layer 0
    if len(head) >= 2 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0:
        return "audio/mpeg"  # an MPEG audio frame without an ID3 tag
    return None


def servable(index: TranscriptIndex, ledger: Ledger, recording_id: str) -> dict[str, Any]:
    """The recording whose audio is asked for; never a quarantined upload, which the pipeline could not decode."""
    rec = indexed(index, ledger, recording_id)
    if rec.get("state") == RecordingState.QUARANTINED:
        raise HTTPException(status_code=404, detail=f"recording {recording_id} is quarantined: not served")
    return rec


def playable(settings: Settings, rec: dict[str, Any], store: ObjectStore) -> tuple[str, str]:
    """Where the recording's audio is played from: the redacted rendition when personal data was said in it.

    Fails closed: with redaction on, a call whose gated transcript is not stored (so nobody knows whether
    personal data was said in it) is not played at all, rather than played as uploaded."""
    version, artefacts = RecordingVersion.indexed(rec), Artefacts.of(store, settings, str(rec.get("model")))
    if artefacts.exists(version.redacted_audio):
        return artefacts.bucket, version.redacted_audio
    refused = f"recording {rec['recording_id']}: the original is not served: "
    if artefacts.exists(version.gated(artefacts.model)):
        if artefacts.gated(version).pii:
            raise HTTPException(status_code=409, detail=refused + "its redacted audio is not ready")
    elif settings.postprocess.redact_pii:
        raise HTTPException(status_code=409, detail=refused + "its gated transcript is not stored, so what was "
                                                              "said in it is not known")
    return rec["bucket"], rec["key"]


def log_play(request: Request, access: AccessLog, user: str, recording_id: str, detail: str) -> None:
    """Every request for a call's audio goes to the access log, whatever its headers; a part of the file asked
    for (a Range) is named after the detail, so the log says which bytes went out."""
    asked = request.headers.get("range", "").strip()
    whole = not asked or asked.lower().replace(" ", "") == "bytes=0-"
    access.append(user, "play", recording_id=recording_id, detail=detail if whole else f"{detail}, {shown(asked)}")


def shown(header: str) -> str:
    """A header as the log keeps it: the characters a byte range is written in, and not more than a line."""
    return "".join(c for c in header if c.isascii() and (c.isalnum() or c in "=,- "))[:RANGE_SHOWN]


def stored_audio(store: ObjectStore, bucket: str, key: str, recording_id: str) -> Response:
    """A signed store URL when there is one, else the file served here; audio by its content, as an attachment."""
    try:
        media_type = audio_media_type(store.head(bucket, key, 16))
    except FileNotFoundError as exc:
        raise HTTPException(status_code=404, detail=f"recording {recording_id}: its audio is not stored") from exc
    if media_type is None:
        raise HTTPException(status_code=415, detail=f"recording {recording_id}: not an audio file by its content")
    disposition = f'attachment; filename="{recording_id}"'
    url = store.presigned_url(bucket, key, PRESIGN_EXPIRES,
                              {"Content-Type": media_type, "Content-Disposition": disposition})
    if url and url.startswith(("http://", "https://")):
        return RedirectResponse(url, status_code=307)
    resources = ExitStack()
    try:
        path = resources.enter_context(store.local_copy(bucket, key))
    except FileNotFoundError as exc:
        resources.close()
        raise HTTPException(status_code=404, detail=str(exc)) from exc
    # Starlette's FileResponse answers HTTP Ranges, as media elements ask; the local copy goes once it is sent.
    response = FileResponse(path, media_type=media_type, background=BackgroundTask(resources.close))
    response.headers["Content-Disposition"] = disposition
    return response


@router.get("/audio/{recording_id}", name="audio")
def audio(recording_id: str, request: Request, user: User, settings: AppSettings, index: IndexOpener,
          store: StoreOpener, ledger: AppLedger, access: Access, t: Second = 0.0) -> Response:
    """The recording as the page plays it: its redacted rendition where personal data was said in it."""
    rec = servable(index(), ledger, recording_id)
    opened = store()
    bucket, key = playable(settings, rec, opened)
    log_play(request, access, user, recording_id,
             f"{'redacted' if key != rec['key'] else 'as uploaded'} from {t:.1f} s")
    return stored_audio(opened, bucket, key, recording_id)
