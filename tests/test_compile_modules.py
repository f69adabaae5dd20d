"""The compile package reads in layers: no two of its modules need each other.

Every import counts, wherever it stands (module level, inside a function, under
``TYPE_CHECKING``): a function-level import that closes a circle still means two
files that cannot be read one without the other.
"""

from __future__ import annotations

import ast
from pathlib import Path

import sp_dspy._compile as compile_package

PACKAGE = "sp_dspy._compile"


def _imports(path: Path) -> set[str]:
    """The ``sp_dspy._compile`` modules that the file at ``path`` imports, by short name."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level == 1:  # ``from ._x import y`` inside the package
                module = f"{PACKAGE}.{module}" if module else PACKAGE
            if module == PACKAGE:
                found.update(alias.name for alias in node.names)
            elif module.startswith(PACKAGE + "."):
                found.add(module.removeprefix(PACKAGE + ".").split(".")[0])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PACKAGE + "."):
                    found.add(alias.name.removeprefix(PACKAGE + ".").split(".")[0])
    return found


def _graph() -> dict[str, set[str]]:
    root = Path(compile_package.__file__).parent
    modules = {path.stem: path for path in root.glob("*.py") if path.stem != "__init__"}
    return {name: _imports(path) & modules.keys() - {name} for name, path in modules.items()}


def _circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of ``graph`` (its modules in order), or None."""
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> list[str] | None:
        if name in path:
            return [*path[path.index(name) :], name]
        if name in done:
            return None
        for target in sorted(graph[name]):
            found = visit(target, [*path, name])
            if found:
                return found
        done.add(name)
        return None

    for name in sorted(graph):
        found = visit(name, [])
        if found:
            return found
    return None


def test_the_circle_finder_finds_a_circle_through_a_function_level_import(tmp_path: Path) -> None:
    source = tmp_path / "_save.py"
    source.write_text("def save():\n    from sp_dspy._compile._run import Contender\n", encoding="utf-8")
    assert _imports(source) == {"_run"}
    assert _circle({"_run": {"_save"}, "_save": _imports(source)}) == ["_run", "_save", "_run"]


def test_no_two_compile_modules_import_each_other() -> None:
    graph = _graph()
    assert graph  # the package was found and read
    assert _circle(graph) is None, " -> ".join(_circle(graph) or [])
