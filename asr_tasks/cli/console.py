"""What the ``asr`` commands print: JSON as they all write it (UTF-8 text, indented)."""

from __future__ import annotations

import json
import sys
from typing import Any


def print_json(value: Any) -> None:
    json.dump(value, sys.stdout, ensure_ascii=False, indent=2)
    sys.stdout.write("\n")

