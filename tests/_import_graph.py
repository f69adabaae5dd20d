"""The package's import graph as Python runs it, read from the source (nothing is imported).

Every import counts wherever it stands: at module level, inside a function (deferred, but
still a file that needs another), or under ``if TYPE_CHECKING:`` (a type-only loop is still
two files that need each other). A package import counts as importing its ``__init__``,
and an ``__init__`` imports what its lazy table names (the module strings handed to
``lazy_getattr``/``importlib``; the CLI's ``COMMANDS``, whose command ``name`` lives in
``_<name>``), as first use of a lazy name runs that import. ``from pkg import sub`` counts
as importing ``pkg/sub.py`` when that file exists; importing ``a.b`` does not count
``a/__init__.py`` (Python runs it, but not its lazy table).

``python -m tests._import_graph`` prints each circle and the counts the issue's closing
note asks for: circles, and function-local imports per package.
"""

from __future__ import annotations

import ast
import sys
from collections import Counter, deque
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("sp_dspy", "programs", "optimizers")
#: The repository's folders that install inside ``sp_dspy`` (``programs/`` is ``sp_dspy.programs``).
INSTALLED_AS = {"programs": "sp_dspy.programs", "optimizers": "sp_dspy.optimizers"}
#: An ``__init__`` whose dict ``COMMANDS`` is a command table: command ``name`` lives in ``_<name>``.
COMMAND_TABLES = {"sp_dspy/cli/__init__.py": "COMMANDS"}

Kind = Literal["module", "function", "type", "lazy"]


@dataclass(frozen=True)
class Edge:
    """One import: ``source`` needs ``target`` (files relative to the root) at ``line``, as ``kind``."""

    source: str
    target: str
    line: int
    kind: Kind
    module: str  # the dotted name imported (for the layer rules)


def _dotted(path: Path) -> str:
    """The module name ``path`` is imported as, once installed."""
    parts = path.with_suffix("").parts
    dotted = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    top, _, rest = dotted.partition(".")
    return ".".join(filter(None, (INSTALLED_AS.get(top, top), rest)))


def _file_of(root: Path, dotted: str) -> str | None:
    for folder, installed in INSTALLED_AS.items():
        if dotted == installed or dotted.startswith(f"{installed}."):
            dotted = folder + dotted[len(installed) :]
    base = root.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate.relative_to(root).as_posix()
    return None


def _absolute(path: Path, level: int, module: str | None) -> str:
    """The absolute dotted name of ``from <level dots><module> import ...`` in ``path``."""
    if not level:
        return module or ""
    package = _dotted(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    base = package[: len(package) - (level - 1)]
    return ".".join([*base, *([module] if module else [])])


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class _Imports(ast.NodeVisitor):
    """``(node, kind)`` of every import in a module, kind by where it stands."""

    def __init__(self) -> None:
        self.found: list[tuple[ast.Import | ast.ImportFrom, Kind]] = []
        self._functions = 0
        self._type_only = 0

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self._functions += 1
        self.generic_visit(node)
        self._functions -= 1

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function

    def visit_If(self, node: ast.If) -> None:
        if not _is_type_checking(node.test):
            self.generic_visit(node)
            return
        self._type_only += 1
        for child in node.body:
            self.visit(child)
        self._type_only -= 1
        for child in node.orelse:
            self.visit(child)

    def _import(self, node: ast.Import | ast.ImportFrom) -> None:
        kind: Kind = "function" if self._functions else "type" if self._type_only else "module"
        self.found.append((node, kind))

    visit_Import = _import
    visit_ImportFrom = _import


def _lazy_targets(root: Path, path: Path, tree: ast.Module) -> list[tuple[int, str]]:
    """``(line, dotted)`` of each module an ``__init__``'s lazy table or command table names."""
    found: list[tuple[int, str]] = []
    package = _dotted(path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
            if text.startswith(".") and text.strip(".").isidentifier():
                dotted = _absolute(path, len(text) - len(text.lstrip(".")), text.lstrip("."))
            elif text.split(".")[0] in PACKAGES and all(part.isidentifier() for part in text.split(".")):
                dotted = text
            else:
                continue
            if dotted != package and _file_of(root, dotted):
                found.append((node.lineno, dotted))
    table = COMMAND_TABLES.get(path.as_posix())
    for node in tree.body:
        targets = [node.target] if isinstance(node, ast.AnnAssign) else getattr(node, "targets", [])
        value = getattr(node, "value", None)
        if any(isinstance(t, ast.Name) and t.id == table for t in targets) and isinstance(value, ast.Dict):
            for key in value.keys:
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    found.append((key.lineno, f"{package}._{key.value.replace('-', '_')}"))
    return found


def module_edges(root: Path, path: Path) -> list[Edge]:
    """Every import of the project's own files in ``path`` (relative to ``root``)."""
    tree = ast.parse((root / path).read_text(encoding="utf-8"), filename=str(path))
    visitor = _Imports()
    visitor.visit(tree)
    source = path.as_posix()
    edges: list[Edge] = []

    def add(dotted: str, line: int, kind: Kind) -> None:
        target = _file_of(root, dotted)
        if target is None or target == source:  # another distribution's module, or itself
            return
        edge = Edge(source, target, line, kind, dotted)
        if edge not in edges:  # one edge per module a statement names
            edges.append(edge)

    for node, kind in visitor.found:
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node.lineno, kind)
            continue
        module = _absolute(path, node.level, node.module)
        for alias in node.names:
            submodule = f"{module}.{alias.name}" if module else alias.name
            add(submodule if _file_of(root, submodule) else module, node.lineno, kind)
    if path.name == "__init__.py":
        for line, dotted in _lazy_targets(root, path, tree):
            add(dotted, line, "lazy")
    return edges


def project_files(root: Path = ROOT) -> list[Path]:
    """The packages' Python files, relative to ``root``."""
    return [p.relative_to(root) for package in PACKAGES for p in sorted((root / package).rglob("*.py"))]


def import_graph(root: Path = ROOT) -> dict[str, list[Edge]]:
    """File -> its imports of the project's files."""
    return {path.as_posix(): module_edges(root, path) for path in project_files(root)}


def circles(graph: dict[str, list[Edge]]) -> list[list[str]]:
    """The strongly connected components of more than one file (Tarjan, iteratively), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work: list[tuple[str, int]] = [(start, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            targets = [edge.target for edge in graph.get(node, [])]
            if i < len(targets):
                work.append((node, i + 1))
                target = targets[i]
                if target not in index:
                    work.append((target, 0))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return sorted(found)


def shortest_loop(graph: dict[str, list[Edge]], component: list[str]) -> list[Edge]:
    """The shortest import loop through the component's first file (what to cut to break it)."""
    members = set(component)
    start = component[0]
    came: dict[str, Edge] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for edge in graph[node]:
            if edge.target not in members:
                continue
            if edge.target == start:
                loop = [edge]
                while loop[0].source != start:
                    loop.insert(0, came[loop[0].source])
                return loop
            if edge.target not in came:
                came[edge.target] = edge
                queue.append(edge.target)
    return []


def describe_circles(graph: dict[str, list[Edge]]) -> str:
    """Each circle: its files, and its shortest loop hop by hop as ``FILE:LINE -> FILE (kind)``."""
    lines = []
    for number, component in enumerate(circles(graph), 1):
        lines.append(f"circle {number} ({len(component)} files): {', '.join(component)}")
        lines.append("  shortest loop:")
        lines += [
            f"    {edge.source}:{edge.line} -> {edge.target} ({edge.kind} import)"
            for edge in shortest_loop(graph, component)
        ]
    return "\n".join(lines)


def function_local_imports(root: Path = ROOT) -> Counter[str]:
    """Import statements inside a function (any module, standard library too), per package.

    A package is a top-level one or a subpackage of ``sp_dspy`` (``sp_dspy/*.py`` on its own).
    """
    counts: Counter[str] = Counter()
    for path in project_files(root):
        visitor = _Imports()
        visitor.visit(ast.parse((root / path).read_text(encoding="utf-8")))
        parts = path.parts
        package = "/".join(parts[:2]) if parts[0] == "sp_dspy" and len(parts) > 2 else parts[0]
        counts[package] += sum(kind == "function" for _, kind in visitor.found)
    return counts


def main() -> int:
    graph = import_graph()
    found = circles(graph)
    if found:
        print(describe_circles(graph))
    print(
        f"{len(found)} circle(s) among {len(graph)} files (module, function-local, TYPE_CHECKING and lazy imports)"
    )
    counts = function_local_imports()
    print(f"{sum(counts.values())} function-local imports")
    for package, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        if count:
            print(f"  {count:4d} {package}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
