"""The library's shape: floors that follow the data's flow, no cycle, short functions and modules, and every
artefact file name spelled in one place (``asr_tasks/version.py``).

Read from the source (``tests/layout.py``); ``bench/layout.py`` prints the same figures.
"""

from __future__ import annotations

import ast

from tests.layout import FLOORS, Layout, floor_of, read

ARTEFACT_NAMES = ("manifest.json", "quarantine.json", "redacted.flac", "/gated.", "/unredacted.", "/transcript.",
                  "qa-audit.", "/quality.")


def layout() -> Layout:
    return read()


def test_no_module_imports_a_higher_floor_or_takes_part_in_a_cycle() -> None:
    shape = layout()
    assert shape.cycles() == []
    assert shape.upward() == [], "a lower floor imports a higher one (tests/layout.py FLOORS)"


def test_every_package_is_on_a_floor_and_says_what_it_owns() -> None:
    shape = layout()
    named = {prefix for floor in FLOORS for prefix in floor}
    for package in shape.packages():
        assert package in named or any(p.startswith(package + ".") for p in named), package
        assert ast.get_docstring(ast.parse(shape.modules[package].read_text())), f"{package}: no docstring"


def test_functions_and_modules_stay_short() -> None:
    shape = layout()
    long = [f for f in shape.functions if f.lines > (60 if f.module.startswith("asr_tasks.web") else 80)]
    assert long == []
    big = {m: n for m, p in shape.modules.items() if (n := len(p.read_text().splitlines())) > 500}
    assert big == {}


def strings(tree: ast.AST) -> list[str]:
    """The string constants of a module that are not docstrings nor route paths (``@router.get("/call/…")``)."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                skip.add(id(first.value))
        for decorator in getattr(node, "decorator_list", []):
            skip |= {id(n) for n in ast.walk(decorator)}
    return [n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip]


def test_each_artefact_file_name_is_spelled_once() -> None:
    shape = layout()
    spelled = {name: sorted(m for m, path in shape.modules.items()
                            if any(name in s for s in strings(ast.parse(path.read_text()))))
               for name in ARTEFACT_NAMES}
    assert spelled == {name: ["asr_tasks.version"] for name in ARTEFACT_NAMES}


def test_the_floors_are_read_as_declared() -> None:
    """A guard on the rule itself: a step down is allowed, a step up is caught."""
    assert floor_of("asr_tasks.config") == 0 < floor_of("asr_tasks.intake.stores")
    assert floor_of("asr_tasks.records.ledger") < floor_of("asr_tasks.pipeline.index") < floor_of(
        "asr_tasks.records.erasure")
    shape = layout()
    shape.imports["asr_tasks.config"] = {"asr_tasks.web.app"}
    shape.imports["asr_tasks.web.app"] = shape.imports.get("asr_tasks.web.app", set()) | {"asr_tasks.config"}
    assert ("asr_tasks.config", "asr_tasks.web.app") in shape.upward() and shape.cycles()
