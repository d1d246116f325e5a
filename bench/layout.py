"""The library's structure in figures: modules, packages, imports between modules, layers (the longest chain
of imports), cycles, imports that run up the floors, the longest function and module.

Read from the source with ``ast`` (``tests/layout.py``, whose rules ``tests/test_layout.py`` checks); nothing is
run or imported.

JSON keys: ``modules``, ``packages``, ``imports``, ``layers``, ``cycles``, ``upward_imports``,
``longest_function``, ``functions_over_80_lines``, ``longest_module``.

    .venv/bin/python bench/layout.py [--json] [--quick]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1])]

from bench.synthetic import parse_args, print_report  # noqa: E402
from tests.layout import read  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parse_args(parser, {})
    print_report(read().figures(), args.json)


if __name__ == "__main__":
    main()
