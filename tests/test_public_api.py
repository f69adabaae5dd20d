"""``programs/`` and ``optimizers/`` build on sp-dspy's public API, and that API is documented.

Which modules they may import is the layer rule of ``tests/test_import_layers.py``; here,
each name they take is in its module's ``__all__``, and each public module is in the docs' Development page.
"""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from sp_dspy import ConfigError, DataError
from sp_dspy.optimizers import CoproSettings, load_settings
from sp_dspy.programs import rubric_targets

ROOT = Path(__file__).resolve().parents[1]
PUBLIC_MODULES = sorted(
    f"sp_dspy.{path.stem}" for path in (ROOT / "sp_dspy").glob("*.py") if not path.stem.startswith("_")
)


def _sources() -> list[Path]:
    return sorted(path for package in ("programs", "optimizers") for path in (ROOT / package).rglob("*.py"))


def _sp_dspy_imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """``(line, module, names)`` of every import of ``sp_dspy`` (or a module in it) in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [
                (node.lineno, alias.name, []) for alias in node.names if alias.name.split(".")[0] == "sp_dspy"
            ]
        elif (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and (node.module or "").split(".")[0] == "sp_dspy"
        ):
            found.append((node.lineno, str(node.module), [alias.name for alias in node.names]))
    return found


def test_every_imported_name_is_declared_public() -> None:
    """A name taken from ``sp_dspy`` or a public module is in that module's ``__all__``."""
    offences = []
    for path in _sources():
        for line, module, names in _sp_dspy_imports(path):
            exported = set(importlib.import_module(module).__all__)
            offences += [
                f"{path.relative_to(ROOT)}:{line}: {module}.{name} is not in its __all__"
                for name in names
                if name not in exported
            ]
    assert not offences, "\n".join(offences)


@pytest.mark.parametrize("module", PUBLIC_MODULES)
def test_public_modules_resolve_and_are_documented(module: str) -> None:
    loaded = importlib.import_module(module)
    for name in loaded.__all__:
        assert getattr(loaded, name) is not None, f"{module}.{name}"
    development = (ROOT / "docs" / "development" / "index.md").read_text(encoding="utf-8")
    assert re.search(rf"`{re.escape(module)}`", development), f"docs/development/index.md lacks {module}"


def test_settings_that_are_not_utf8_are_one_line(tmp_path: Path) -> None:
    path = tmp_path / "opt.yaml"
    path.write_bytes(b"copro:\n  breadth: \xff\n")
    with pytest.raises(
        ConfigError, match=r"opt\.yaml:2:12: not UTF-8 \(byte 0xff\); save the file as UTF-8$"
    ):
        load_settings("copro", CoproSettings, path=path)


def test_a_bad_rubric_names_the_rule_and_field() -> None:
    with pytest.raises(DataError, match=r"input 'rubric': not a list of rules \(0\.rule: "):
        rubric_targets([{"rule": "one", "type": "decisive", "text": "No insults."}])


def test_the_wheel_installs_one_top_level_package_with_programs_and_optimizers_inside(tmp_path: Path) -> None:
    """``programs/`` and ``optimizers/`` install as ``sp_dspy.programs`` and ``sp_dspy.optimizers``."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        cwd=tmp_path,
        timeout=300,
    )
    [wheel] = tmp_path.glob("sp_dspy-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {name.split("/")[0] for name in names if not name.startswith("sp_dspy-")} == {"sp_dspy"}
    assert "sp_dspy/programs/_registry.py" in names and "sp_dspy/optimizers/_recipes.py" in names
    top_level = next(name for name in names if name.endswith(".dist-info/top_level.txt"))
    assert zipfile.ZipFile(wheel).read(top_level).decode().split() == ["sp_dspy"]


def test_no_module_imports_programs_or_optimizers_by_their_folder_names() -> None:
    """Outside the repository ``import programs`` fails: every import names ``sp_dspy.programs``."""
    offenders = []
    for folder in ("sp_dspy", "programs", "optimizers", "tests", "benchmarks", "docs"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = (
                    [alias.name for alias in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                    if isinstance(node, ast.ImportFrom) and node.level == 0
                    else []
                )
                offenders += [
                    f"{path.relative_to(ROOT)}:{node.lineno}"
                    for name in names
                    if name.split(".")[0] in ("programs", "optimizers")
                ]
    assert offenders == []
