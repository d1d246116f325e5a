"""The library's shape as its own source states it: modules, the imports between them, floors, cycles, sizes.

Read with ``ast`` (no module of the library is run), so an import inside a function counts
like one at the top: a lazy import cannot hide a step up the floors. Used by
``tests/test_layout.py`` (the rules) and ``bench/layout.py`` (the figures).
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

from asr_tasks.config import PROJECT_ROOT

LIBRARY = PROJECT_ROOT / "asr_tasks"

# The library's floors from the ground up, in the order of the data's flow: a module may import its own floor
# and any floor listed before it, never one listed after it. A floor is a package, or some modules of one
# (records: its tables stand below the stages that write them; erasure and retention, which remove what the
# stages made and rerun the day's reports, stand above the audit). The modules at the top of ``asr_tasks``
# (settings, the dataclasses that flow, states, the recording version) are the ground floor.
FLOORS: tuple[tuple[str, ...], ...] = (
    ("asr_tasks",),
    ("asr_tasks.intake",),
    ("asr_tasks.transcription",),
    ("asr_tasks.text",),
    ("asr_tasks.gate",),
    ("asr_tasks.index",),
    ("asr_tasks.records.tables", "asr_tasks.records.key_files", "asr_tasks.records.ledger", "asr_tasks.records.chain",
     "asr_tasks.records.access_log", "asr_tasks.records.anchors", "asr_tasks.records.locking",
     "asr_tasks.records.holds", "asr_tasks.records.permissions", "asr_tasks.records.teams",
     "asr_tasks.records.migrations"),
    ("asr_tasks.audit",),
    ("asr_tasks.pipeline",),
    ("asr_tasks.records",),  # erasure, retention, progress
    ("asr_tasks.web",),
    ("asr_tasks.cli",),
)


@dataclasses.dataclass(frozen=True)
class Function:
    module: str
    name: str
    lines: int


@dataclasses.dataclass
class Layout:
    modules: dict[str, Path]
    imports: dict[str, set[str]]  # module -> library modules it imports (any depth, any place in the file)
    functions: list[Function]

    def packages(self) -> set[str]:
        return {m for m, path in self.modules.items() if path.name == "__init__.py" and m.count(".") == 1}

    def upward(self) -> list[tuple[str, str]]:
        """Imports from a lower floor to a higher one."""
        return [(module, target) for module, targets in sorted(self.imports.items()) for target in sorted(targets)
                if floor_of(target) > floor_of(module)]

    def cycles(self) -> list[list[str]]:
        """Strongly connected groups of more than one module (Tarjan's algorithm)."""
        index: dict[str, int] = {}
        low: dict[str, int] = {}
        stack: list[str] = []
        groups: list[list[str]] = []

        def visit(node: str) -> None:
            index[node] = low[node] = len(index)
            stack.append(node)
            for nxt in self.imports.get(node, ()):
                if nxt not in index:
                    visit(nxt)
                    low[node] = min(low[node], low[nxt])
                elif nxt in stack:
                    low[node] = min(low[node], index[nxt])
            if low[node] == index[node]:
                group = []
                while True:
                    top = stack.pop()
                    group.append(top)
                    if top == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))

        for node in sorted(self.modules):
            if node not in index:
                visit(node)
        return groups

    def layers(self) -> int:
        """Layers of the import graph: the longest chain of imports, counted in modules (cycles cut)."""
        depth: dict[str, int] = {}

        def height(node: str, seen: frozenset[str]) -> int:
            if node in depth:
                return depth[node]
            below = [height(n, seen | {node}) for n in self.imports.get(node, ()) if n not in seen and n != node]
            depth[node] = 1 + max(below, default=0)
            return depth[node]

        return max((height(m, frozenset()) for m in self.modules), default=0)

    def longest(self, prefix: str = "asr_tasks") -> Function:
        return max((f for f in self.functions if f.module.startswith(prefix)), key=lambda f: f.lines)

    def figures(self) -> dict[str, object]:
        longest = self.longest()
        biggest = max(self.modules, key=lambda m: len(self.modules[m].read_text().splitlines()))
        return {
            "modules": len(self.modules),
            "packages": sorted(self.packages()),
            "imports": sum(len(t) for t in self.imports.values()),
            "layers": self.layers(),
            "cycles": self.cycles(),
            "upward_imports": self.upward(),
            "longest_function": f"{longest.module}.{longest.name} ({longest.lines} lines)",
            "functions_over_80_lines": sum(f.lines > 80 for f in self.functions),
            "longest_module": f"{biggest} ({len(self.modules[biggest].read_text().splitlines())} lines)",
        }


def floor_of(module: str) -> int:
    """The floor of the longest prefix that names the module (every module has one: ``asr_tasks`` is the ground)."""
    matches = [(len(prefix), n) for n, names in enumerate(FLOORS) for prefix in names
               if module == prefix or module.startswith(prefix + ".")]
    return max(matches)[1]


def module_name(path: Path, root: Path = LIBRARY) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute name an ``from ... import`` names, relative imports included."""
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def read(root: Path = LIBRARY) -> Layout:
    modules = {module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    imports: dict[str, set[str]] = {m: set() for m in modules}
    functions: list[Function] = []
    for module, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = resolve(module, path.name == "__init__.py", node)
                names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.append(Function(module, node.name, (node.end_lineno or node.lineno) - node.lineno + 1))
            for name in names:
                while name and name not in modules:
                    name = name.rpartition(".")[0]
                if name and name != module:
                    imports[module].add(name)
    return Layout(modules, imports, functions)
