"""One vocabulary across commands: flag names, help panels, defaults, ``--version``, model files."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

import sp_dspy
from sp_dspy._errors import ConfigError
from sp_dspy._lm._config import bundled_models_file, user_models_file
from sp_dspy.cli import COMMANDS, PANEL_ORDER, app, main
from sp_dspy.cli import _lm_options as lmo

pytestmark = pytest.mark.usefixtures("isolated_run")
REPO = Path(__file__).resolve().parents[1]
RUNNING = ("eval", "compile", "ablate", "check")


def _help(command: str) -> str:
    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    return result.output


def _panels(text: str) -> dict[str, list[str]]:
    """Panel title -> the long flags listed in it, read from rich ``--help`` output."""
    panels: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        title = re.match(r"╭─ (.+?) ─", line)
        if title:
            current = panels.setdefault(title.group(1), [])
        elif line.startswith("╰"):
            current = None
        elif current is not None:
            flag = re.match(r"│ (?:\*\s+)?(--[a-z0-9-]+)", line)
            if flag:
                current.append(flag.group(1))
    return panels


def test_version_prints_the_package_version() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output == f"sp-dspy {sp_dspy.__version__}\n"


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_option_of_every_command_is_in_a_named_panel(command: str) -> None:
    panels = _panels(_help(command))
    unplaced = [flag for flag in panels.get("Options", []) if flag != "--help"]
    assert not unplaced, f"add {unplaced} to a panel in sp_dspy/cli/__init__.py"


@pytest.mark.parametrize("command", RUNNING)
def test_help_groups_the_options_of_running_commands(command: str) -> None:
    panels = _panels(_help(command))
    assert (
        {"Data", "Model"} <= set(panels) if command != "check" else {"Data", "Model", "Guard"} <= set(panels)
    )
    # Panels come in one order on every command.
    shown = [name for name in panels if name in PANEL_ORDER]
    assert shown == sorted(shown, key=PANEL_ORDER.index)
    for flag in ("--lm", "--api-base", "--max-tokens", "--timeout"):
        assert flag in panels["Model"]


def test_help_shows_defaults() -> None:
    text = _help("eval")
    for default in ("[default: 16]", "[default: official]", "[default: output/results]", "[default: strict]"):
        assert default in text
    # A flag left out keeps the configured model's setting; help says so instead of showing nothing.
    assert "[default: (the model's, else 120)]" in text and "[default: (the bundled sample)]" in text
    assert "[default: mipro]" in _help("compile")


def test_token_limits_have_one_name_each_everywhere() -> None:
    """``--max-tokens`` is the per-call output limit on every command; the compile budget is
    ``--max-total-tokens``."""
    for command in RUNNING:
        text = _help(command)
        assert "--max-tokens" in _panels(text)["Model"]
        assert "Completion token limit per call" in text
    compile_panels = _panels(_help("compile"))
    assert "--max-total-tokens" in compile_panels["Budget"]
    assert "--lm-max-tokens" not in _help("compile")


def test_program_and_protocol_mean_the_same_on_every_command() -> None:
    for command in ("eval", "compile", "check"):
        panels = _panels(_help(command))
        assert {"--program", "--protocol"} <= set(panels["Guard"])
    compile_help = _help("compile")
    assert "--cot" not in compile_help
    assert "dspy-cot" in compile_help and "per-policy or per-rule" in compile_help


#: Flags whose default differs on purpose: a different thing of the same kind.
DIFFERENT_ON_PURPOSE = {
    ("compile", "--program"),  # compile starts from a DSPy program; it cannot compile the official one
    ("compile", "--concurrency"),  # dev cases in flight, each making several calls
    ("split", "--out"),  # each command writes its own kind of file
    ("report", "--out"),
}


def test_a_flag_has_one_default_on_every_command() -> None:
    """``--parser``, ``--benchmark``, ``--seed``, ``--n-boot``, ...: the same default wherever they appear
    (``None`` means "the default below", used where a plan file may set the value)."""
    from sp_dspy.cli import COMMANDS, load_command

    defaults: dict[str, dict[str, object]] = {}
    for name in COMMANDS:
        command = typer.main.get_command_from_info(
            load_command(name), pretty_exceptions_short=True, rich_markup_mode="rich"
        )
        for param in command.params:
            flags = [opt for opt in param.opts if opt.startswith("--")]
            if not flags or param.default is None or isinstance(param.default, bool):
                continue  # no default, or an off switch (off everywhere)
            if (name, flags[0]) not in DIFFERENT_ON_PURPOSE:
                defaults.setdefault(flags[0], {})[name] = param.default
    disagree = {flag: seen for flag, seen in defaults.items() if len({str(v) for v in seen.values()}) > 1}
    assert not disagree
    assert defaults["--parser"] == {"eval": "strict", "check": "strict"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--lm", "no-such-model"], "--lm 'no-such-model': not a configured model name"),
        (["--models", "fake,no-such-model"], "--models 'no-such-model': not a configured model name"),
        (["--lm", "fake", "--temperature", "7"], "--temperature: must be between 0 and 2"),
    ],
)
def test_errors_name_the_flag_the_user_typed(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        _run_main(["eval", *args])
    assert exit_info.value.code == 2
    assert f"error: {message}" in capsys.readouterr().err


def _run_main(argv: list[str]) -> None:
    import sys

    saved = sys.argv
    sys.argv = ["sp-dspy", *argv]
    try:
        main()
    finally:
        sys.argv = saved


def test_models_checks_every_key_before_the_first_model_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SP_TEST_UNSET_KEY", raising=False)
    (tmp_path / "models.yaml").write_text(
        "models:\n  first: fake/oracle\n  second:\n    model: fake/empty\n    api_key_env: SP_TEST_UNSET_KEY\n",
        encoding="utf-8",
    )
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app,
        [
            "eval",
            "--config",
            "models.yaml",
            "--models",
            "first,second",
            "--limit",
            "1",
            "-q",
            "--output-dir",
            str(out),
        ],
    )
    assert isinstance(result.exception, ConfigError)
    assert "model 'second': api_key_env names SP_TEST_UNSET_KEY, which is not set" in str(result.exception)
    assert not out.exists() or not any(out.iterdir())  # 'first' never ran


def test_configured_names_work_from_any_directory(tmp_path: Path) -> None:
    """The package's models file applies wherever the command runs (``isolated_run`` works in tmp_path)."""
    (config,) = lmo.lm_configs("gpt-5-mini", None, None, default=lmo.LOCAL)
    assert config.model == "openai/gpt-5-mini" and config.api_key_env == "OPENAI_API_KEY"


def test_user_file_then_config_file_are_layered_over_the_package_file(tmp_path: Path) -> None:
    user = user_models_file()
    user.parent.mkdir(parents=True)
    user.write_text(
        "models:\n  mine: openai/gpt-4o-mini\n  gpt-5-mini:\n    model: openai/gpt-5-mini\n    max_tokens: 99\n"
    )
    extra = tmp_path / "extra.yaml"
    extra.write_text("models:\n  mine: anthropic/claude-sonnet-4-5\n")
    (mine,) = lmo.lm_configs("mine", None, None, default=lmo.LOCAL)
    assert mine.model == "openai/gpt-4o-mini"
    (mine,) = lmo.lm_configs("mine", None, extra, default=lmo.LOCAL)
    assert mine.model == "anthropic/claude-sonnet-4-5"
    (mini,) = lmo.lm_configs("gpt-5-mini", None, extra, default=lmo.LOCAL)
    assert mini.max_tokens == 99  # the user's entry replaced the package's
    (big,) = lmo.lm_configs("gpt-5.5", None, extra, default=lmo.LOCAL)
    assert big.model == "openai/gpt-5.5"  # the package's entries stay
    listed = CliRunner().invoke(app, ["list-models", "--config", str(extra)], env={"COLUMNS": "200"})
    assert listed.exit_code == 0, listed.output
    assert "mine" in listed.output and "gpt-5.5" in listed.output and str(user) in listed.output
    with pytest.raises(ConfigError, match=r"^--config .*nope\.yaml: no such file$"):
        lmo.lm_configs("mine", None, tmp_path / "nope.yaml", default=lmo.LOCAL)


def test_the_models_file_is_package_data_and_has_one_copy() -> None:
    bundled = bundled_models_file()
    package = Path(sp_dspy.__file__).parent
    assert bundled.is_file() and bundled.parent.parent == package
    patterns = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][
        "sp_dspy"
    ]
    relative = bundled.relative_to(package).as_posix()
    assert any(fnmatch.fnmatch(relative, pattern) for pattern in patterns)
    assert not (REPO / "configs" / "models.yaml").exists()  # one copy: the package's


def test_compile_budget_flag_is_max_total_tokens(tmp_path: Path) -> None:
    from sp_dspy.cli._compile import register

    group = typer.Typer()

    @group.callback()
    def _group() -> None:
        """Test group, so ``compile`` stays a sub-command."""

    register(group)
    args = [
        "compile",
        "--lm",
        "fake/instructed",
        "--optimizer",
        "copro",
        "--out",
        str(tmp_path / "a"),
        "--dry-run",
    ]
    result = CliRunner().invoke(group, [*args, "--max-total-tokens", "10", "--max-tokens", "64"])
    assert result.exit_code == 0, result.output
    assert "--max-total-tokens 10 is below the estimate" in result.output
    bad = CliRunner().invoke(group, [*args, "--protocol", "per-case"])
    assert isinstance(bad.exception, ConfigError) and str(bad.exception).startswith("--protocol 'per-case'")


#: The commands that read recorded results: one flag group (``RecordedFlags``) selects their data.
READERS = ("score", "compare", "report", "view", "export")


def _flag_help(text: str) -> dict[str, str]:
    """Long flag -> the first line of its help, read from rich ``--help`` output."""
    found = {}
    for line in text.splitlines():
        row = re.match(r"│ (?:\*\s+)?(--[a-z0-9-]+)\s+(?:[A-Z]+\s+)?(.*?)\s*│$", line)
        if row:
            found[row.group(1)] = " ".join(row.group(2).split())
    return found


def test_the_commands_that_read_results_select_data_with_the_same_flags() -> None:
    from sp_dspy.cli._options import RecordedFlags

    flags = ["--" + name.replace("_", "-") for name in RecordedFlags.__dataclass_fields__]
    helps = {command: _help(command) for command in READERS}
    for command, text in helps.items():
        assert _panels(text)["Data"] == flags, command
    first = _flag_help(helps["score"])
    for command in READERS[1:]:
        assert {flag: _flag_help(helps[command])[flag] for flag in flags} == {
            flag: first[flag] for flag in flags
        }


@pytest.mark.parametrize("command", READERS)
def test_every_reading_command_loads_its_data_with_the_group_s_flags(command: str, tmp_path: Path) -> None:
    """``--with-evidence`` (new on report, view and export) reaches the loader, which refuses it for
    a custom benchmark in one line naming it."""
    results = tmp_path / "r.jsonl"
    results.write_text('{"id": "x", "violated_rules": []}\n', encoding="utf-8")
    extra = {
        "compare": [str(results)],
        "report": ["--out", str(tmp_path / "r.html")],
        "view": ["--out", str(tmp_path / "v.html")],
        "export": ["--to", "inspect", "--out", str(tmp_path / "logs")],
    }.get(command, [])
    args = [command, str(results), *extra, "--benchmark", "custom", "--with-evidence", "--n-boot", "0"]
    result = CliRunner().invoke(app, args)
    assert isinstance(result.exception, sp_dspy.DataError), result.output
    assert (
        str(result.exception)
        == "--with-evidence: only SafePyramid has an evidence file; drop it for --benchmark custom"
    )
