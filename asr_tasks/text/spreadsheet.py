"""Which text must not reach a spreadsheet as a formula: every CSV the project writes (exports, reports)
passes its cells through ``spreadsheet_safe``."""

from __future__ import annotations

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(value: object) -> object:
    """Text a spreadsheet would run as a formula (``=HYPERLINK(...)`` from a sidecar) is kept as text."""
    return f"'{value}" if isinstance(value, str) and value.startswith(FORMULA_START) else value

