"""What the ``asr`` commands print: JSON as they all write it (UTF-8 text, indented), tables whose columns line
up, and rich's console at the width of what it prints when the output is not a terminal."""

from __future__ import annotations

import json
import sys
from typing import Any, Sequence

from rich.cells import cell_len
from rich.console import Console

PIPED_WIDTH = 1000  # off a terminal rich would cut every line at 80 columns; a file or a pipe has no width


def print_json(value: Any) -> None:
    json.dump(value, sys.stdout, ensure_ascii=False, indent=2)
    sys.stdout.write("\n")


def table(header: Sequence[str], rows: list[list[str]]) -> str:
    """Left-aligned columns, measured as a terminal draws them (a Chinese character takes two); the last one is
    not padded, so long text wraps naturally."""
    widths = [max(cell_len(str(r[i])) for r in [list(header), *rows]) for i in range(len(header) - 1)]
    lines = []
    for row in [list(header), *rows]:
        cells = [str(c) + " " * (w - cell_len(str(c))) for c, w in zip(row, widths)]
        lines.append("  ".join([*cells, str(row[-1])]).rstrip())
    return "\n".join(lines)


def stdout_console() -> Console:
    """rich's console on stdout: the terminal's width on one, else wide enough that no column is cut."""
    return Console() if sys.stdout.isatty() else Console(width=PIPED_WIDTH)
