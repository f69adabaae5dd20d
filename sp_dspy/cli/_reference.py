"""The command-line reference as Markdown, generated from the typer app (the docs site's CLI page).

It is built from the same click objects ``sp-dspy COMMAND --help`` prints (every command
loaded eagerly, flags in their panels, each flag's help line with its default), so the
reference cannot fall behind a flag: a new flag or command appears the next time the site
is built. The docs build calls :func:`cli_reference_markdown` from a hook (``docs/_hooks.py``).
"""

from __future__ import annotations

import html
import re
from typing import Any

import typer
from typer._click.core import Context

from . import COMMANDS, PANEL_ORDER, app, assign_panels, load_command

PROGRAM = "sp-dspy"
_OTHER_PANEL = "Other"
#: Characters Markdown would read as markup in a help line (emphasis, links, code, tables).
_MARKDOWN_SPECIALS = re.compile(r"([\\`*_\[\]|#])")


def _plain(text: str) -> str:
    """A help text as rich shows it (``\\[`` is rich's escaped ``[``), with Markdown and HTML escaped."""
    text = text.replace("\\[", "[")
    return _MARKDOWN_SPECIALS.sub(r"\\\1", html.escape(text, quote=False))


def build_command(name: str) -> Any:
    """Command ``name`` as the click command ``sp-dspy NAME`` runs (loaded, flags in their panels)."""
    command = typer.main.get_command_from_info(
        load_command(name), pretty_exceptions_short=app.pretty_exceptions_short, rich_markup_mode="rich"
    )
    assign_panels(name, command)
    return command


def _rows(command: Any, ctx: Context) -> dict[str, list[tuple[str, str]]]:
    """Each parameter's ``(usage, help)`` as ``--help`` prints it, grouped by panel in panel order."""
    panels: dict[str, list[tuple[str, str]]] = {}
    params = [*command.params, command.get_help_option(ctx)]
    for param in params:
        if param is None or getattr(param, "hidden", False):
            continue
        record = param.get_help_record(ctx)
        if record is None:
            continue
        is_argument = param.param_type_name == "argument"
        panel = param.rich_help_panel or ("Arguments" if is_argument else _OTHER_PANEL)
        panels.setdefault(panel, []).append(record)
    order = ["Arguments", *PANEL_ORDER, _OTHER_PANEL]
    return {panel: panels[panel] for panel in order if panel in panels}


def _table(rows: list[tuple[str, str]]) -> list[str]:
    """A Markdown table of ``(usage, help)`` rows, the usage as code."""
    lines = ["| Option | What it does |", "| --- | --- |"]
    for usage, help_text in rows:
        shown_usage = html.escape(usage).replace("|", "&#124;")  # a table cell ends at a bare "|"
        lines.append(f"| <code>{shown_usage}</code> | {_plain(' '.join(help_text.split()))} |")
    return lines


def command_markdown(name: str) -> str:
    """The reference section of ``sp-dspy NAME``: its help, usage line and every flag by panel."""
    command = build_command(name)
    ctx = Context(command, info_name=f"{PROGRAM} {name}")
    lines = [f"## {PROGRAM} {name} {{#{name}}}", ""]
    for paragraph in (command.help or "").strip().split("\n\n"):
        lines += [_plain(" ".join(paragraph.split())), ""]
    lines += ["```text", command.get_usage(ctx), "```", ""]
    for panel, rows in _rows(command, ctx).items():
        lines += [f"**{panel}**", "", *_table(rows), ""]
    return "\n".join(lines)


def _group_markdown() -> str:
    """The program's own line and options (``--version``, ``--help``) and the list of commands."""
    group = typer.main.get_command(app)
    ctx = Context(group, info_name=PROGRAM)
    lines = [_plain(group.help or ""), "", "```text", group.get_usage(ctx), "```", ""]
    rows = [record for param in group.params if (record := param.get_help_record(ctx)) is not None]
    help_option = group.get_help_option(ctx)
    if help_option is not None and (record := help_option.get_help_record(ctx)) is not None:
        rows.append(record)
    lines += [*_table(rows), "", "| Command | What it does |", "| --- | --- |"]
    lines += [f"| [`{PROGRAM} {name}`](#{name}) | {_plain(short)} |" for name, short in COMMANDS.items()]
    return "\n".join(lines)


def cli_reference_markdown() -> str:
    """The whole reference: the program's options, then every command in ``COMMANDS`` order."""
    return "\n\n".join([_group_markdown(), *(command_markdown(name) for name in COMMANDS)]) + "\n"
