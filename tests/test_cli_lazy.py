"""The lazily registered CLI: same help and commands as registering every module up front."""

from __future__ import annotations

import hashlib
import importlib
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from sp_dspy._benchmarks import load_benchmark
from sp_dspy._errors import DataError
from sp_dspy.cli import COMMANDS, app, load_command


def _eager_app() -> typer.Typer:
    eager = typer.Typer(
        name="sp-dspy", help=app.info.help, add_completion=False, pretty_exceptions_enable=False
    )
    assert app.registered_callback is not None
    eager.callback()(app.registered_callback.callback)  # the group's own options (--version)
    for name in COMMANDS:
        importlib.import_module(f"sp_dspy.cli._{name.replace('-', '_')}").register(eager)
    return eager


def test_help_lists_the_same_commands_and_help_as_the_eager_app() -> None:
    runner = CliRunner()
    lazy = runner.invoke(app, ["--help"], env={"COLUMNS": "100"})
    eager = runner.invoke(_eager_app(), ["--help"], env={"COLUMNS": "100"})
    assert lazy.exit_code == eager.exit_code == 0
    assert lazy.output == eager.output
    for name in COMMANDS:
        assert f" {name} " in lazy.output


def test_each_command_loads_with_its_own_help() -> None:
    runner = CliRunner()
    for name, short_help in COMMANDS.items():
        info = load_command(name)
        assert info.name == name
        result = runner.invoke(app, [name, "--help"], env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        assert short_help.split()[0] in result.output


def test_score_does_not_import_other_command_modules(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from sp_dspy.cli import app\n"
        "app(['score', '--help'], standalone_mode=False)\n"
        "print(sorted(m for m in sys.modules if m.startswith('sp_dspy.cli.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    loaded = out.stdout.strip().splitlines()[-1]
    assert "sp_dspy.cli._score" in loaded
    for module in ("_eval", "_compile", "_serve", "_ablate", "_compare"):
        assert f"sp_dspy.cli.{module}" not in loaded


HEAVY = ("dspy", "litellm", "numpy", "matplotlib", "aiohttp", "huggingface_hub")


@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_command_module_imports_nothing_heavy(name: str) -> None:
    """A command module imports its layers at module level; what is slow to import waits for the command."""
    code = (
        "import sys\n"
        "from sp_dspy.cli import app\n"
        f"app([{name!r}, '--help'], standalone_mode=False)\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_unknown_command_is_a_usage_error_with_a_suggestion() -> None:
    code = "from sp_dspy.cli import main; main()"
    out = subprocess.run(
        [sys.executable, "-c", code, "scor"], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 2
    assert "Did you mean 'score'?" in out.stderr
    assert "Traceback" not in out.stderr


def test_content_hash_is_of_the_loaded_bytes_and_computed_on_demand(tmp_path: Path) -> None:
    blob = Path(load_benchmark(None).source).read_bytes()
    copy = tmp_path / "bench.json"
    copy.write_bytes(blob)
    loaded = load_benchmark(str(copy))
    assert loaded.content_hash == hashlib.sha256(blob).hexdigest()
    assert loaded.model_dump()["content_hash"] == loaded.content_hash

    changed = load_benchmark(str(copy))
    copy.write_bytes(b"[]")  # replaced after loading: no hash that would not describe the cases
    with pytest.raises(DataError, match="changed since it was loaded"):
        _ = changed.content_hash
