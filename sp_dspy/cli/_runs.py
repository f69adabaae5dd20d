"""``sp-dspy runs``: the runs in an output directory, one line each, newest first."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from .._runner import list_runs
from .._table import FitTable
from ._console import console

DEFAULT_DIR = Path("output/results")


def register(app: typer.Typer) -> None:
    app.command("runs")(runs_command)


def _num(value: float | None, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def runs_command(
    folder: Annotated[
        Path, typer.Argument(help="Output directory of the runs (eval's --output-dir).", show_default=True)
    ] = DEFAULT_DIR,
    json_out: Annotated[bool, typer.Option("--json", help="Print the runs as a JSON list instead.")] = False,
) -> None:
    """List the runs in an output directory: id, benchmark, protocol, program, model, status, scores, cost, date."""
    rows = list_runs(folder)
    if json_out:
        typer.echo(json.dumps([row.model_dump(mode="json") for row in rows], indent=2, ensure_ascii=False))
        return
    if not rows:
        console.print(f"No runs in {folder} (no manifest_*.json).", markup=False, highlight=False)
        return
    columns = ("run id", "benchmark", "protocol", "program", "model", "status", "cases", "RMR", "RMR@1.0")
    table = FitTable(*columns, "cost", "date", title=f"Runs in {folder}, newest first")
    for row in rows:
        table.add_row(
            row.run_id, row.benchmark, row.protocol, row.program, row.model, row.status, str(row.cases),
            _num(row.rmr), _num(row.rmr_exact), "unpriced" if row.cost_usd is None else f"${row.cost_usd:,.4f}",
            row.started_at.replace("T", " ")[:16],
        )  # fmt: skip
    console.print(table)
