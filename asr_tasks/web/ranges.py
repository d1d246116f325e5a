"""Which bytes of a file a request gets: its HTTP Range header read strictly, so that the access log names the
bytes that are sent, not the header that was asked.

One range of a ``bytes`` unit is served as asked (206, clipped to the file); a header that is not one
(several ranges, another unit, a malformed one) is answered with the whole file (200), as RFC 9110 lets a
server ignore a Range it does not serve; a range that starts past the end is refused (416).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# bytes=FIRST-[LAST] or bytes=-SUFFIX, one of them, as RFC 9110 writes a byte range (whitespace tolerated)
ONE_RANGE = re.compile(r"\s*bytes\s*=\s*(?:(\d{1,19})\s*-\s*(\d{0,19})|-\s*(\d{1,19}))\s*", re.IGNORECASE)


class Unsatisfiable(ValueError):
    """A range that holds no byte of the file (416)."""


@dataclass(frozen=True)
class Part:
    """The bytes ``start`` to ``end`` (inclusive) of a file of ``size`` bytes, and whether that is all of it."""

    start: int
    end: int
    size: int
    ranged: bool

    @property
    def length(self) -> int:
        return self.end - self.start + 1

    def describe(self) -> str:
        if not self.ranged:
            return f"the whole file, {self.size} bytes"
        return f"bytes {self.start}-{self.end} of {self.size}"


def part(header: str | None, size: int) -> Part:
    """The bytes a request gets of a file of ``size`` bytes, from its Range header (None: no header)."""
    whole = Part(0, size - 1, size, False)
    match = ONE_RANGE.fullmatch(header or "")
    if match is None or size == 0:
        return whole
    first, last, suffix = match.groups()
    if suffix is not None:
        if int(suffix) == 0:
            raise Unsatisfiable(f"bytes=-{suffix} asks for no byte")
        start, end = max(0, size - int(suffix)), size - 1
    else:
        start, end = int(first), min(int(last), size - 1) if last else size - 1
        if start >= size:
            raise Unsatisfiable(f"bytes {start}- start past the end ({size} bytes)")
        if end < start:
            return whole  # an invalid range: ignored, as the RFC asks
    return Part(start, end, size, True)
