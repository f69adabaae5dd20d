"""The docs' command-line reference names every command and every flag, with its help text.

The reference is generated from the app at build time (``sp_dspy.cli._reference``); here it is
checked against the commands registered eagerly, module by module, as ``tests/test_cli_lazy.py``
builds them, so a command or flag the generator skipped would show.
"""

from __future__ import annotations

import html
import importlib
import re

import typer

from sp_dspy.cli import COMMANDS, app
from sp_dspy.cli._reference import cli_reference_markdown

REFERENCE = cli_reference_markdown()


def _eager_commands() -> dict[str, object]:
    eager = typer.Typer(name="sp-dspy", add_completion=False)
    assert app.registered_callback is not None
    eager.callback()(app.registered_callback.callback)
    for name in COMMANDS:
        importlib.import_module(f"sp_dspy.cli._{name.replace('-', '_')}").register(eager)
    group = typer.main.get_command(eager)
    return dict(group.commands)  # type: ignore[attr-defined]


def _section(name: str) -> str:
    start = REFERENCE.index(f"## sp-dspy {name} {{#{name}}}")
    following = REFERENCE.find("\n## sp-dspy ", start + 1)
    return REFERENCE[start : following if following > 0 else len(REFERENCE)]


def test_every_command_has_a_section_with_its_usage() -> None:
    commands = _eager_commands()
    assert set(commands) == set(COMMANDS)
    for name in COMMANDS:
        section = _section(name)
        assert f"Usage: sp-dspy {name} " in section
        assert f"[`sp-dspy {name}`](#{name})" in REFERENCE


def test_every_flag_of_every_command_is_listed_with_its_help() -> None:
    missing = []
    for name, command in _eager_commands().items():
        section = _section(name)
        plain = html.unescape(section.replace("\\", ""))  # as the page shows it
        for param in command.params:  # type: ignore[attr-defined]
            for flag in [*param.opts, *param.secondary_opts]:
                if flag.startswith("-") and not re.search(rf"<code>(.*, )?{re.escape(flag)}[ ,<]", section):
                    missing.append(f"{name} {flag}")
            help_text = " ".join((param.help or "").replace("\\", "").split())
            if help_text not in plain:
                missing.append(f"{name} {param.name}: help {help_text!r}")
        assert "--help" in section
    assert not missing, missing


def test_the_program_options_and_panels_are_there() -> None:
    assert "<code>--version</code>" in REFERENCE
    for panel in ("Data", "Guard", "Model", "Budget", "Run and output"):
        assert f"**{panel}**" in _section("eval")
    assert "**Server**" in _section("serve")


def test_every_table_row_has_two_cells() -> None:
    """A ``|`` in a help text or a metavar (``<llama-cpp|vllm>``) must not split its row."""
    rows = [line for line in REFERENCE.splitlines() if line.startswith("| ") and "---" not in line]
    assert rows
    bad = [row for row in rows if len(re.findall(r"(?<!\\)\|", row)) != 3]
    assert not bad, bad[:3]
