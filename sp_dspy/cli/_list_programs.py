"""``sp-dspy list-programs``: the ``--program`` values, the protocols each runs, what each is."""

from __future__ import annotations

import typer

from sp_dspy.programs import (
    GUARD_PROGRAMS,
    PROGRAM_NAMES,
    PROGRAM_SUMMARIES,
    PROTOCOLS,
    SEVERITY_PROGRAMS,
    guard_format,
)

from .._table import FitTable
from ._console import console


def register(app: typer.Typer) -> None:
    app.command("list-programs")(list_programs_command)


def list_programs_command() -> None:
    """List the guard programs --program can name, the protocols each runs, and what each is."""
    table = FitTable("name", "protocols", "what it is", title="Programs")
    for name in PROGRAM_NAMES:
        protocols = (
            guard_format(name).protocols
            if name in GUARD_PROGRAMS
            else ("per-policy",)
            if name in SEVERITY_PROGRAMS
            else PROTOCOLS
        )
        table.add_row(name, ", ".join(protocols), PROGRAM_SUMMARIES[name])
    console.print(table)
    console.print(
        "--program also takes a compiled artifact's directory (sp-dspy compile --out DIR).", highlight=False
    )
