"""A production for e-discovery (``records/production.py``) as a download, for the export permission: the calls of
a search (posted, as every search is), or chosen by id, as a zip of the package, built in a temporary folder that goes once it is sent. The
calls come through the door, so a Team Lead's production holds their teams' calls only, and each call produced is
an access-log row. The audio as uploaded and the text before masking need the unredacted permission too, and the
calls' whole access history the access log's."""

from __future__ import annotations

import secrets
import shutil
import tempfile
import zipfile
from datetime import datetime, timezone
from pathlib import Path

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import FileResponse
from pydantic import Field
from starlette.background import BackgroundTask

from asr_tasks.inputs import InputError
from asr_tasks.records.permissions import PERMISSIONS
from asr_tasks.records.production import BATES_PREFIX, LAST_BATES, Production, produce, searched
from asr_tasks.web.deps import AppSettings, Searched, posted, refused, search_query
from asr_tasks.web.door import CallDoor
from asr_tasks.web.pages import held

PERMISSION = "export"
DOWNLOADS = True  # refuses a cross-site request (``same_site``): another site's page cannot produce in your name
UNREDACTED = "read_unredacted"
MAX_IDS = 10_000  # calls in one production from the page (by id, or a search's)
ACCESS_LOG = "access_log"  # the calls' whole access history in the package; without it, the production's own

router = APIRouter()


class ProductionAsked(Searched):
    """What a production holds, in the body: the calls of ``ids`` and every call the search (``q`` and the
    filters, as ``/api/export`` takes them; filters alone are a search too) matches; ``original`` for the audio
    as uploaded and the text before masking; the Bates numbers' prefix and first number."""

    q: str | None = None  # type: ignore[assignment]  # none: no search, the ids only
    ids: list[str] = []
    original: bool = False
    prefix: str = Field(default="CALL", pattern=BATES_PREFIX)
    start: int = Field(default=1, ge=1, le=LAST_BATES)


@router.post("/api/produce.zip")
def produce_zip(request: Request, door: CallDoor, settings: AppSettings,
                asked: Annotated[ProductionAsked, Depends(posted(ProductionAsked))]) -> FileResponse:
    """The package of the calls given by ``ids`` and of every call the search matches, zipped; ``original`` only
    for a user who may hear and read calls unredacted."""
    ids, original, prefix, start = asked.ids, asked.original, asked.prefix, asked.start
    if original and UNREDACTED not in held(request):
        raise HTTPException(status_code=403, detail=f"the original audio and text need the role "
                                                    f"{PERMISSIONS[UNREDACTED].role}")
    filters = asked.filters(settings)
    search = asked.q is not None or filters.narrows()
    if not search and not ids:
        raise HTTPException(status_code=422, detail="name the calls: a search (q, with its filters) or ids")
    if len(ids) > MAX_IDS:
        raise HTTPException(status_code=422, detail=f"{len(ids)} ids: at most {MAX_IDS} in one production")
    q = search_query(asked.q or "") if search else ""
    chosen = list(dict.fromkeys([*ids, *(searched(door.index(), q, filters) if search else [])]))
    if not chosen:
        raise HTTPException(status_code=422, detail="no call matches: there is nothing to produce")
    if len(chosen) > MAX_IDS:  # built whole before the first byte goes: asr produce takes more
        raise HTTPException(status_code=422, detail=f"{len(chosen)} calls: at most {MAX_IDS} in one production "
                                                    f"from the page; narrow the search, or use asr produce")
    name = f"production-{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"  # each its own
    work = Path(tempfile.mkdtemp(prefix="asr-production-"))
    try:
        production = produce(door, chosen, work / name, original=original, prefix=prefix, start=start, name=name,
                             whole_log=ACCESS_LOG in held(request))
        archive = zipped(production, work / f"{name}.zip")
    except InputError as exc:
        shutil.rmtree(work)
        raise refused(exc) from exc
    except BaseException:
        shutil.rmtree(work)
        raise
    left = f"-{len(production.refused)}-refused" if production.refused else ""  # seen in the download's name
    return FileResponse(archive, media_type="application/zip", filename=f"{name}{left}.zip",
                        headers={"X-Produced-Calls": str(len(production.produced)),
                                 "X-Refused-Calls": str(len(production.refused))},
                        background=BackgroundTask(shutil.rmtree, work, ignore_errors=True))


def zipped(production: Production, archive: Path) -> Path:
    """The package in a zip, in a folder of its name, its files stored uncompressed (most audio is compressed
    already); beside the folder, where calls were refused, a list of them with why, which is not the package's."""
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as out:
        for path in sorted(p for p in production.directory.rglob("*") if p.is_file()):
            out.write(path, f"{production.name}/{path.relative_to(production.directory).as_posix()}")
        if production.refused:
            out.writestr(f"{production.name}-refused.txt",
                         "".join(f"{rid}: {why}\n" for rid, why in production.refused))
    return archive
