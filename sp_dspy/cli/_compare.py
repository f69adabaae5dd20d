"""``sp-dspy compare``: is B better than A on the same cases, beyond noise?

The flags become a ``CompareConfig`` and the job is the library's ``compare_results``
(``sp_dspy/_report/_compare.py``, which says what is compared and how); this module prints
its tables, its ``--json`` document and its warnings.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .._benchmarks import benchmark_kind
from .._report import NOTE_PAIRED, NOTE_TEST, build_compare_config, compare_results
from .._table import FitTable
from . import _options as opt
from ._console import console, say_note, warn, write_json_report

if TYPE_CHECKING:
    from rich.table import Table

    from .._report import Comparison

METRIC_LABELS = {"rmr_avg": "RMR", "rmr_exact": "RMR@1.0", "rdr": "RDR"}


def register(app: typer.Typer) -> None:
    app.command("compare")(compare_command)


@opt.with_flag_groups
def compare_command(
    results_a: Annotated[str, typer.Argument(help="Results of A: JSONL file(s), comma-separated.")],
    results_b: Annotated[str, typer.Argument(help="Results of B: JSONL file(s), comma-separated.")],
    data: opt.RecordedFlags = opt.RecordedFlags(),
    cap_aware: opt.CapAware = False,
    json_out: Annotated[
        str | None, typer.Option("--json", help="Write the comparison as JSON to this file ('-' = stdout).")
    ] = None,
    skip_bad_lines: opt.SkipBadLines = False,
    seed: opt.Seed = 0,
    n_boot: opt.NBoot = 1000,
) -> None:
    """Compare two result sets on the same cases: paired differences with CIs and a paired randomization test."""
    config = build_compare_config(
        {"results_a": _paths(results_a), "results_b": _paths(results_b), "data": data.selection(),
         "cap_aware": cap_aware, "skip_bad_lines": skip_bad_lines, "seed": seed, "n_boot": n_boot}
    )  # fmt: skip
    compared = compare_results(config, notify=say_note)
    document = compared.to_json()
    if json_out == "-":
        typer.echo(document)
    else:
        _print(compared.comparison)
    for warning in compared.warnings:
        warn(warning)
    if json_out not in (None, "-"):
        target = write_json_report(json_out, document)
        console.print(f"Comparison written to {target}", markup=False, highlight=False)


def _paths(raw: str) -> list[Path]:
    """A side's comma-separated files (the job refuses none, a folder or a missing file)."""
    return [Path(part.strip()) for part in raw.split(",") if part.strip()]


def _num(value: Any, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def _present(comparison: Comparison) -> list[str]:
    return [name for name, cell in comparison.cells.items() if name == "ALL" or cell.n]


def metrics_table(comparison: Comparison) -> Table:
    table = FitTable(title="Paired differences (B - A)", caption=NOTE_PAIRED)
    for column in ("Cell", "Metric", "N", "Units", "A", "B", "B - A", "95% CI"):
        table.add_column(column, justify="left" if column in ("Cell", "Metric") else "right", no_wrap=True)
    for name in _present(comparison):
        paired = comparison.cells[name].paired
        for metric, label in METRIC_LABELS.items():
            ci = paired.ci.get(metric)
            interval = (paired.ci_note or "-") if ci is None else f"[{ci[0]:+.2f}, {ci[1]:+.2f}]"
            values = (_num(paired.a[metric]), _num(paired.b[metric]), _num(paired.diff[metric], "+.2f"))
            counts = (str(paired.n_pairs), str(paired.n_units))
            table.add_row(name if metric == "rmr_avg" else "", label, *counts, *values, interval)
    return table


def test_table(comparison: Comparison) -> Table:
    from .._metrics import format_p, paired_test_name

    title = f"Exact match (RMR@1.0): {paired_test_name(comparison.unit)}"
    table = FitTable(title=title, caption=NOTE_TEST)
    columns = ("Cell", "N", "Units", "A excl.", "B excl.", "A only", "B only", "p-value")
    for column in columns:
        table.add_column(column, justify="left" if column == "Cell" else "right")
    for name in _present(comparison):
        cell = comparison.cells[name]
        result = cell.test
        counts = (
            cell.n,
            result.n_units,
            cell.a["excluded"],
            cell.b["excluded"],
            result.a_only,
            result.b_only,
        )
        table.add_row(name, *map(str, counts), format_p(result.p_value))
    return table


def _print(comparison: Comparison) -> None:
    console.print(
        f"Compared {comparison.compared} case(s) of {comparison.dataset} with results on both sides\n"
        f"  A: {', '.join(comparison.files_a)}\n  B: {', '.join(comparison.files_b)}\n"
        f"  not compared: {comparison.only_a} only in A, {comparison.only_b} only in B, "
        f"{comparison.in_neither} in neither",
        markup=False,
        highlight=False,
    )
    console.print(metrics_table(comparison))
    console.print(test_table(comparison))
    if comparison.extra:
        table = benchmark_kind(comparison.benchmark).report_terminal(list(comparison.extra.items()))
        if table is not None:
            console.print(table)
