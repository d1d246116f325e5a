"""Text rules every part shares: what counts as a CJK character (search, post-processing, the quality gate
and the audit), and which text must not reach a spreadsheet as a formula (the CSV reports).

Han (with extensions, radicals and compatibility ideographs), kana, bopomofo and
Hangul: scripts written without spaces, where every character is a unit of its
own for tokenising, counting and matching.
"""

from __future__ import annotations

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(value: object) -> object:
    """Text a spreadsheet would run as a formula (``=HYPERLINK(...)`` from a sidecar) is kept as text."""
    return f"'{value}" if isinstance(value, str) and value.startswith(FORMULA_START) else value

