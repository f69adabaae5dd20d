"""``sp-dspy list-benchmarks``: the ``--benchmark`` values, their task, cells and independent unit."""

from __future__ import annotations

import typer

from .._benchmarks import benchmark_kind, benchmark_names
from .._metrics import cell_names
from .._table import FitTable
from ._console import console


def register(app: typer.Typer) -> None:
    app.command("list-benchmarks")(list_benchmarks_command)


def list_benchmarks_command() -> None:
    """List the benchmarks --benchmark can name: their task, cells and the unit intervals resample."""
    table = FitTable("name", "cells", "unit", "task", title="Benchmarks")
    for name in benchmark_names():
        kind = benchmark_kind(name)
        cells = "tag NAME..., ALL" if kind.breakdown == "tag" else ", ".join(cell_names(kind.breakdown))
        table.add_row(name, cells, kind.unit, kind.task)
    console.print(table)
    console.print(
        "The unit is what every bootstrap interval and paired test resamples whole (docs/concepts/statistics.md).",
        highlight=False,
    )
