"""The one door a call's content goes out through.

Every route that answers with something of a call (its audio, text, words,
highlights, findings, an export, the call page, a day's keys, a hold, the
access log itself) takes a ``Door``. The router has checked the user's
permission; the door finds the recording as the index has it (404 unknown, 410
erased), reads the artefacts of the version that indexed it (never the running
code's), refuses what is not safe to serve (a quarantined upload; the original
where personal data was found and no redacted rendition is stored, or where the
object under its key is no longer the version that was indexed: 409), and
writes one access-log row per request before anything goes out, naming what
was served (which bytes of which rendition, from which second; which page); a play is one row however many
range requests the player makes for it (``Door.audio``). A Team Lead's door opens onto
their teams' calls only (``scope.py``): another team's call is unknown to it.
A production (``records/production.py``: ``asr produce`` and the page's zip) takes its calls through a door
too, and logs each call it writes. ``tests/test_door.py`` calls every route of the app and fails when one answers
with a call's content and no row.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from functools import partial
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request
from fastapi.responses import Response, StreamingResponse

from asr_tasks.config import Settings
from asr_tasks.index.base import TranscriptIndex
from asr_tasks.intake.artefacts import Artefacts
from asr_tasks.intake.stores import ObjectStore
from asr_tasks.models import Segment
from asr_tasks.records.access_log import AccessLog
from asr_tasks.records.ledger import Ledger
from asr_tasks.records.production import TEXT_FORMATS, Call, Refused
from asr_tasks.records.teams import configured_teams
from asr_tasks.states import RecordingState
from asr_tasks.version import RecordingVersion
from asr_tasks.web.call_page import export_transcript
from asr_tasks.web.deps import Access, AppLedger, AppSettings, IndexOpener, StoreOpener, User, gone
from asr_tasks.web.ranges import Unsatisfiable, part
from asr_tasks.web.scope import ScopedIndex, scope_of

# Audio containers by their first bytes: (offset, magic) -> media type. Anything else is not served.
MAGIC: list[tuple[int, bytes, str]] = [
    (8, b"WAVE", "audio/wav"), (0, b"fLaC", "audio/flac"), (0, b"OggS", "audio/ogg"), (0, b"ID3", "audio/mpeg"),
    (4, b"ftyp", "audio/mp4"), (0, b"#!AMR", "audio/amr"), (0, b"\x1a\x45\xdf\xa3", "audio/webm"),
    (0, b".snd", "audio/basic"), (8, b"AIFF", "audio/aiff"), (0, b"riff", "audio/wav"),  # Wave64
]
# A play's nonce: letters only (no run of digits a masking policy could take for a number), made by the page per
# play; its rows are looked up this long back, and a nonce older than that is a play again.
PLAY_NONCE_LETTERS = 20
PLAY_NONCE = rf"^([a-z]{{{PLAY_NONCE_LETTERS}}})?$"
PLAY_WINDOW = timedelta(hours=12)
_plays = threading.Lock()  # a play's first requests, checked and logged one at a time in a process

# The file extension of each media type served, for a file named anew (a production's natives).
EXTENSIONS = {"audio/wav": "wav", "audio/flac": "flac", "audio/ogg": "ogg", "audio/mpeg": "mp3", "audio/mp4": "m4a",
              "audio/amr": "amr", "audio/webm": "webm", "audio/basic": "au", "audio/aiff": "aiff", "audio/aac": "aac"}


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


@dataclass(frozen=True)
class Audio:
    """Which audio of a recording is served: where it is stored, which rendition it is, its media type by its first
    bytes, and its size."""

    bucket: str
    key: str
    rendition: str
    media_type: str
    size: int


@dataclass
class Door:
    """One request's way to a call's content: the signed-in user, the app's stores, and the access log (a command
    line's door has no request: ``asr produce``)."""

    request: Request | None
    user: str
    settings: Settings
    index: Callable[[], TranscriptIndex]
    store: Callable[[], ObjectStore]
    ledger: Ledger
    access: AccessLog
    scope: frozenset[str] | None = None  # the agents whose calls the user may see; None: all (``scope.py``)

    def sees(self, agent_id: str | None) -> bool:
        """Whether a call of this agent is within the user's scope (what a route shows from a stored report, which
        the scoped index does not answer)."""
        return self.scope is None or agent_id in self.scope

    def log(self, action: str, *, recording_id: str | None = None, query: str | None = None,
            filters: dict[str, Any] | None = None, hits: int | None = None, detail: str | None = None,
            subjects: Iterable[str] = ()) -> None:
        """The request's row in the access log, written before its answer goes out; ``subjects``: the recordings
        a search returned, whose erasure seals what was typed."""
        self.access.append(self.user, action, recording_id=recording_id, query=query, filters=filters, hits=hits,
                           detail=detail, subjects=subjects)

    def erased(self, recording_id: str) -> HTTPException | None:
        """410 for a recording whose erasure has begun; None for a Team Lead, to whom an erased call is unknown as
        any other call outside their teams is (a tombstone keeps no agent to tell whose it was)."""
        return gone(self.ledger, recording_id) if self.scope is None else None

    def recording(self, recording_id: str) -> dict[str, Any]:
        """The recording as the index has it; 410 once its erasure has begun (even while its documents are still
        being removed), 404 if there never was one or it is not the user's to see."""
        missing = self.erased(recording_id)
        if missing is not None:
            raise missing
        rec = self.index().recording(recording_id)
        if rec is None:
            raise self.erased(recording_id) or HTTPException(status_code=404, detail=f"no recording {recording_id}")
        return rec

    def call(self, recording_id: str, detail: str, action: str = "read",
             query: str | None = None) -> tuple[dict[str, Any], list[Segment]]:
        """The recording and its segments, logged (with the search it was opened from, ``query``): what the call
        page and the transcript exports show."""
        rec = self.recording(recording_id)
        segments = self.index().segments(recording_id)
        self.log(action, recording_id=recording_id, query=query or None, detail=detail)
        return rec, segments

    def artefacts(self, rec: dict[str, Any]) -> tuple[RecordingVersion, Artefacts]:
        """The artefacts of the version that indexed the recording, under the model that made them."""
        return RecordingVersion.indexed(rec), Artefacts.of(self.store(), self.settings, str(rec.get("model")))

    def playable(self, rec: dict[str, Any]) -> tuple[str, str, str]:
        """Where the page plays a recording from (bucket, key, which rendition): the redacted rendition when
        personal data was said in it. Fails closed: with redaction on, a call whose gated transcript is not
        stored (so nobody knows whether personal data was said in it) is not played at all."""
        version, artefacts = self.artefacts(rec)
        if artefacts.exists(version.redacted_audio):
            return artefacts.bucket, version.redacted_audio, "redacted"
        refused = f"recording {rec['recording_id']}: the original is not served: "
        if artefacts.exists(version.gated(artefacts.model)):
            if artefacts.gated(version).pii:
                raise HTTPException(status_code=409, detail=refused + "its redacted audio is not ready")
        elif self.settings.postprocess.redact_pii:
            raise HTTPException(status_code=409, detail=refused + "its gated transcript is not stored, so what "
                                                                  "was said in it is not known")
        return rec["bucket"], rec["key"], "as uploaded"

    def unredacted(self, recording_id: str) -> dict[str, Any]:
        """The transcript as it was before masking, where ``keep_unredacted`` kept it (404 where not), logged."""
        rec = self.recording(recording_id)
        version, artefacts = self.artefacts(rec)
        if not artefacts.exists(version.unredacted(artefacts.model)):
            raise HTTPException(status_code=404, detail=f"recording {recording_id}: no unredacted transcript is "
                                                        "kept (keep_unredacted)")
        self.log("read", recording_id=recording_id, detail="unredacted transcript")
        return artefacts.unredacted(version).to_dict()

    def served(self, rec: dict[str, Any], *, original: bool) -> Audio:
        """The recording's audio as the page plays it (``original``: as uploaded), checked: a quarantined upload,
        a file that is not audio by its content, and an original re-uploaded since it was indexed are not
        served."""
        recording_id = rec["recording_id"]
        if rec.get("state") == RecordingState.QUARANTINED:
            raise HTTPException(status_code=404, detail=f"recording {recording_id} is quarantined: not served")
        bucket, key, rendition = (rec["bucket"], rec["key"], "original") if original else self.playable(rec)
        store = self.store()
        try:
            media_type = audio_media_type(store.head(bucket, key, 16))
        except FileNotFoundError as exc:
            raise HTTPException(status_code=404, detail=f"recording {recording_id}: its audio is not stored") from exc
        if media_type is None:
            raise HTTPException(status_code=415, detail=f"recording {recording_id}: not an audio file by its content")
        stored = store.stat(bucket, key)
        if stored is None:
            raise HTTPException(status_code=404, detail=f"recording {recording_id}: its audio is not stored")
        if rendition != "redacted" and stored.etag != rec.get("etag"):  # the source, re-uploaded since
            raise HTTPException(status_code=409, detail=f"recording {recording_id}: the object stored under its key "
                                                        "is not the version that was indexed; not served")
        return Audio(bucket, key, rendition, media_type, stored.size)

    def played(self, recording_id: str, rendition: str, play: str) -> bool:
        """Whether the user's play ``play`` of this rendition has its row already (written by an earlier range
        request of it, in any server process: the access log is the one place they all see)."""
        since = datetime.now(timezone.utc) - PLAY_WINDOW
        return any((e.detail or "").startswith(f"{rendition} from ") and (e.detail or "").endswith(f", play {play}")
                   for e in self.access.entries(since=since, user=self.user, recording_id=recording_id,
                                                actions=("play",)))

    def audio(self, recording_id: str, t: float, *, original: bool, play: str = "") -> Response:
        """The recording's audio as the page plays it (``original``: as uploaded), the bytes a Range asks for.

        ``play`` is the page's nonce of one play: its first request writes the ``play`` row (naming the nonce)
        and the player's later range requests of it write none. A request without one (a download) is a play of
        its own."""
        served = self.served(self.recording(recording_id), original=original)
        size = served.size
        try:
            sent = part(self.request.headers.get("range") if self.request else None, size)
        except Unsatisfiable as exc:
            raise HTTPException(status_code=416, detail=f"recording {recording_id}: {exc}",
                                headers={"Content-Range": f"bytes */{size}"}) from exc
        detail = f"{served.rendition} from {t:.1f} s, {sent.describe()}"
        if not play:
            self.log("play", recording_id=recording_id, detail=detail)
        else:
            with _plays:
                if not self.played(recording_id, served.rendition, play):
                    self.log("play", recording_id=recording_id, detail=f"{detail}, play {play}")
        headers = {"Content-Disposition": f'attachment; filename="{recording_id}"', "Accept-Ranges": "bytes",
                   "Content-Length": str(sent.length if size else 0)}
        if sent.ranged:
            headers["Content-Range"] = f"bytes {sent.start}-{sent.end}/{size}"
        return StreamingResponse(self.store().stream(served.bucket, served.key, sent.start, sent.length if size else 0),
                                 status_code=206 if sent.ranged else 200, media_type=served.media_type,
                                 headers=headers)

    def produced(self, recording_id: str, *, original: bool) -> Call:
        """A call as a production takes it (``records/production.py``), unlogged (the production logs what it
        wrote): its audio as the page plays it and its text as the transcript exports make it (``original``: as
        uploaded, and as transcribed before masking where ``keep_unredacted`` kept it), both read when written;
        or why not, as the page would answer (unknown, erased, a rendition not safe to serve)."""
        try:
            rec = self.recording(recording_id)
            audio = self.served(rec, original=original)
        except HTTPException as exc:
            raise Refused(f"{exc.status_code} {exc.detail}") from exc
        version, artefacts = self.artefacts(rec)
        kept = original and artefacts.exists(version.unredacted(artefacts.model))
        masked = not kept and artefacts.exists(version.gated(artefacts.model)) and bool(artefacts.gated(version).pii)

        def texts() -> dict[str, str]:
            segments = artefacts.unredacted(version).segments if kept else self.index().segments(recording_id)
            return {fmt: export_transcript(fmt, rec, segments) for fmt in TEXT_FORMATS}

        return Call(rec, texts, audio.rendition, EXTENSIONS[audio.media_type],
                    partial(self.store().stream, audio.bucket, audio.key, 0, audio.size), masked)


def door(request: Request, user: User, settings: AppSettings, index: IndexOpener, store: StoreOpener,
         ledger: AppLedger, access: Access) -> Door:
    """The request's door, for the signed-in user: a Team Lead's index answers with their teams' calls only."""
    agents = scope_of(request, user, configured_teams(settings))
    if agents is None:
        return Door(request, user, settings, index, store, ledger, access)
    return Door(request, user, settings, lambda: ScopedIndex(index(), agents), store, ledger, access, agents)


CallDoor = Annotated[Door, Depends(door)]
