"""The package's shape, reproducibly: module lengths, functions over 60 lines, cross-package reach-ins.

Usage: ``python benchmarks/code_shape.py [--top N]`` from the repository root. It reads the
source of ``sp_dspy/`` (and the ``programs/``, ``optimizers/`` folders installed inside it) with
:mod:`ast`, imports nothing, and prints:

- the package's lines and the N longest modules (the project's limit: 500 lines a module);
- every function or method over 60 lines (the limit: at most 6 in the whole package), with the
  nested functions counted on their own as well as inside their parent;
- reach-ins: ``from ..sub._private import`` (or ``from .._sub._private``) lines in one subpackage
  reaching into another subpackage's private module instead of its ``__init__``.

``tests/test_code_shape.py`` holds the package to the limits with the same counting.
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("sp_dspy", "programs", "optimizers")
MODULE_LIMIT = 500
FUNCTION_LIMIT = 60


@dataclass(frozen=True)
class Function:
    path: str
    name: str
    lines: int


def modules(root: Path = ROOT) -> list[Path]:
    """Every Python module of the package, symlinked folders read once (from the repository's own)."""
    found: list[Path] = []
    for folder in FOLDERS:
        base = root / folder
        for path in sorted(base.rglob("*.py")):
            if folder == "sp_dspy" and any(part in ("programs", "optimizers") for part in path.parts):
                continue  # sp_dspy/programs -> ../programs: counted from programs/
            found.append(path)
    return found


def module_lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def long_functions(path: Path, root: Path = ROOT, limit: int = FUNCTION_LIMIT) -> list[Function]:
    """Functions (and methods, nested ones too) whose ``def`` to last line spans more than ``limit``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[Function] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            length = (node.end_lineno or node.lineno) - start + 1
            if length > limit:
                found.append(Function(str(path.relative_to(root)), node.name, length))
    return found


def reach_ins(path: Path, root: Path = ROOT) -> list[str]:
    """Imports of another subpackage's private module (``.._runner._eval``) from this module."""
    relative = path.relative_to(root)
    parts = relative.parts
    own = parts[1] if parts[0] == "sp_dspy" and len(parts) > 2 else None
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or node.module is None:
            continue
        if node.level == 0:
            if not node.module.startswith("sp_dspy."):
                continue
            names = node.module.split(".")[1:]
        else:
            base = list(parts[:-1])[: len(parts) - node.level]  # the package the dots lead to
            names = [*base[1:], *node.module.split(".")]
        if len(names) >= 2 and names[0].startswith("_") and names[1].startswith("_") and names[0] != own:
            found.append(f"{relative}:{node.lineno}: {'.'.join(names)}")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=10, help="how many of the longest modules to list")
    args = parser.parse_args(argv)
    paths = modules()
    lengths = sorted(((module_lines(p), str(p.relative_to(ROOT))) for p in paths), reverse=True)
    print(f"package: {len(paths)} modules, {sum(n for n, _ in lengths):,} lines")
    print(f"modules over {MODULE_LIMIT} lines: {sum(1 for n, _ in lengths if n > MODULE_LIMIT)}")
    for length, name in lengths[: args.top]:
        print(f"  {length:5d}  {name}")
    functions = sorted((f for p in paths for f in long_functions(p)), key=lambda f: -f.lines)
    print(f"functions over {FUNCTION_LIMIT} lines: {len(functions)}")
    for function in functions:
        print(f"  {function.lines:5d}  {function.path}:{function.name}")
    reaches = [line for p in paths for line in reach_ins(p)]
    print(f"cross-package reach-ins into private modules: {len(reaches)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
