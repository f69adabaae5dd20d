"""The layers the import graph shows: no circles, and each layer imports only the ones below it.

The graph (``tests/_import_graph.py``) follows every import a file can run: module-level,
function-local, ``TYPE_CHECKING`` and the lazy tables of the ``__init__`` files, so a
deferred import does not hide a layer that reaches up. A failure prints the offending
imports as ``FILE:LINE``.
"""

from __future__ import annotations

from pathlib import Path

from tests._import_graph import (
    Edge,
    circles,
    describe_circles,
    function_local_imports,
    import_graph,
    module_edges,
)

#: What ``programs/`` and ``optimizers/`` may import from sp-dspy: the public lower modules.
LOWER_PUBLIC = {
    "sp_dspy.data",
    "sp_dspy.errors",
    "sp_dspy.files",
    "sp_dspy.lm",
    "sp_dspy.metrics",
    "sp_dspy.protocol",
}

#: The single-file foundations every layer may use (errors, lazy names, user paths, YAML lines, redaction,
#: usage, a run's manifest).
FOUNDATIONS = {
    "sp_dspy/_errors.py",
    "sp_dspy/_lazy.py",
    "sp_dspy/_redact.py",
    "sp_dspy/_regular.py",
    "sp_dspy/_run_manifest.py",
    "sp_dspy/_usage.py",
    "sp_dspy/_user_dirs.py",
    "sp_dspy/_version.py",
    "sp_dspy/_yaml_lines.py",
}

GRAPH = import_graph()


def _reached_from(package: str) -> dict[str, Edge]:
    """Each file outside ``package`` that a file of it needs, directly or not, with the first import found."""
    inside = {path for path in GRAPH if path.startswith(f"{package}/")}
    reached: dict[str, Edge] = {}
    todo = sorted(inside)
    while todo:
        for edge in GRAPH[todo.pop()]:
            if edge.target not in inside and edge.target not in reached:
                reached[edge.target] = edge
                todo.append(edge.target)
    return reached


def test_the_import_graph_has_no_circles() -> None:
    found = circles(GRAPH)
    assert not found, "\n" + describe_circles(GRAPH)


def _above_lower_public(graph: dict[str, list[Edge]]) -> list[str]:
    """Each import in ``programs/`` or ``optimizers/`` of a sp-dspy module not in ``LOWER_PUBLIC``."""
    return [
        f"{edge.source}:{edge.line}: imports {edge.module} ({edge.kind} import)"
        for source, edges in graph.items()
        if source.startswith(("programs/", "optimizers/"))
        for edge in edges
        if edge.target.startswith("sp_dspy/") and edge.module not in LOWER_PUBLIC
    ]


def test_programs_and_optimizers_import_only_lower_public_modules() -> None:
    """Never the umbrella ``sp_dspy`` (its lazy table names compile and the runner) nor a private module."""
    offences = _above_lower_public(GRAPH)
    assert not offences, "\n".join(offences)


def test_the_layer_rule_catches_every_form_of_import(tmp_path: Path) -> None:
    for name in ("__init__.py", "_errors.py", "protocol.py", "_lm/__init__.py"):
        (tmp_path / "sp_dspy" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "sp_dspy" / name).write_text("", encoding="utf-8")
    (tmp_path / "programs").mkdir()
    (tmp_path / "programs" / "_sample.py").write_text(
        "import sp_dspy._lm\n"
        "from sp_dspy import _errors\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from sp_dspy import Case\n"
        "def f() -> None:\n    from sp_dspy._lm import make_lm\n"
        "from sp_dspy.protocol import build_targets\n"
        "import sp_dspy\n",
        encoding="utf-8",
    )
    offences = _above_lower_public(import_graph(tmp_path))
    assert [offence.split(":")[1] for offence in offences] == ["1", "2", "5", "7", "9"]


def test_data_needs_only_the_foundations() -> None:
    """Loading cases is below the benchmark kinds, metrics and reports that use them (architecture layer 2)."""
    offences = [
        f"{edge.source}:{edge.line}: imports {edge.module} ({edge.kind} import)"
        for target, edge in sorted(_reached_from("sp_dspy/_data").items())
        if target not in FOUNDATIONS
    ]
    assert not offences, "\n".join(offences)


def test_the_foundations_need_only_each_other() -> None:
    """A run's manifest, the YAML reader and the version sit below ``_data`` and the umbrella ``sp_dspy``."""
    offences = [
        f"{edge.source}:{edge.line}: imports {edge.module} ({edge.kind} import)"
        for source in sorted(FOUNDATIONS)
        for edge in GRAPH[source]
        if edge.target.startswith("sp_dspy/") and edge.target not in FOUNDATIONS
    ]
    assert not offences, "\n".join(offences)


def test_the_runner_never_reaches_compile() -> None:
    """Compile runs its dev scoring on the runner; budgets, pricing and provenance sit below both."""
    offences = [
        f"{edge.source}:{edge.line}: imports {edge.module} ({edge.kind} import)"
        for target, edge in sorted(_reached_from("sp_dspy/_runner").items())
        if target.startswith("sp_dspy/_compile/")
    ]
    assert not offences, "\n".join(offences)


def test_the_graph_follows_every_kind_of_import(tmp_path: Path) -> None:
    """Function-local, type-only, lazy-table and command-table imports are edges, each with its line."""
    package = tmp_path / "sp_dspy"
    (package / "cli").mkdir(parents=True)
    files = {
        "__init__.py": '_MODULES = {"sp_dspy._late": ("late",), "._typed": ("typed",)}\n',
        "_late.py": "def f() -> None:\n    from sp_dspy import late\n",
        "_typed.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import _late\n",
        "cli/__init__.py": 'COMMANDS = {"list-models": "help"}\n',
        "cli/_list_models.py": "from sp_dspy.cli import COMMANDS\nimport sp_dspy._typed\n",
    }
    for name, text in files.items():
        (package / name).write_text(text, encoding="utf-8")
    edges = {
        (edge.source, edge.target, edge.line, edge.kind)
        for name in files
        for edge in module_edges(tmp_path, Path("sp_dspy", name))
    }
    assert edges == {
        ("sp_dspy/__init__.py", "sp_dspy/_late.py", 1, "lazy"),
        ("sp_dspy/__init__.py", "sp_dspy/_typed.py", 1, "lazy"),
        ("sp_dspy/_late.py", "sp_dspy/__init__.py", 2, "function"),
        ("sp_dspy/_typed.py", "sp_dspy/_late.py", 3, "type"),
        ("sp_dspy/cli/__init__.py", "sp_dspy/cli/_list_models.py", 1, "lazy"),
        ("sp_dspy/cli/_list_models.py", "sp_dspy/cli/__init__.py", 1, "module"),
        ("sp_dspy/cli/_list_models.py", "sp_dspy/_typed.py", 2, "module"),
    }
    graph = import_graph(tmp_path)
    assert circles(graph) == [
        ["sp_dspy/__init__.py", "sp_dspy/_late.py", "sp_dspy/_typed.py"],
        ["sp_dspy/cli/__init__.py", "sp_dspy/cli/_list_models.py"],
    ]
    assert "sp_dspy/_late.py:2 -> sp_dspy/__init__.py (function import)" in describe_circles(graph)


def test_function_local_imports_are_counted_once_each(tmp_path: Path) -> None:
    (tmp_path / "programs").mkdir()
    (tmp_path / "programs" / "_a.py").write_text(
        "import os\ndef f() -> None:\n    import json\n    def g() -> None:\n        from os import path\n",
        encoding="utf-8",
    )
    assert function_local_imports(tmp_path) == {"programs": 2}
