"""Key files kept outside the ledger's database (the anchors' signing key, the erasure tokens' key), written so
that a reader never sees half a key and two first uses at once keep one key."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def write_key_file(path: Path, data: bytes, *, replace_existing: bool = False) -> None:
    """``data`` into ``path`` at once: a temporary file of mode 0600, then a link (a key already there is kept)
    or, with ``replace_existing``, a rename over it with mode 0644 (a public key)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".tmp-{path.name}-")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        if replace_existing:
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
            return
        with contextlib.suppress(FileExistsError):  # another first use made it: that key is kept
            os.link(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
