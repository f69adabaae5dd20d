"""``sp-dspy compare``: is B better than A on the same cases, beyond noise?

Per cell of the benchmark's breakdown (SafePyramid's levels, a custom benchmark's tags, none
for PKU-SafeRLHF) and pooled (``ALL``), over the cases both sides have results for: ``B - A`` with
paired bootstrap intervals over the benchmark's units (SafePyramid conversations, PKU-SafeRLHF
prompts, custom groups), and a paired randomization test of exact match over the same units,
a case a side excluded counting as wrong for it (a guard must not win by declining the hard cases).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import BaseModel, Field

from .._benchmarks import DEFAULT_BENCHMARK, benchmark_kind, kind_of_cases
from .._errors import ConfigError, DataError
from .._scoring import RecordedSelection, load_for_results, read_results
from .._table import FitTable
from . import _options as opt
from ._console import console, say_note, warn, write_json_report

if TYPE_CHECKING:
    from rich.table import Table

    from .._data import Case
    from .._metrics import CellComparison, ResultSet

METRIC_LABELS = {"rmr_avg": "RMR", "rmr_exact": "RMR@1.0", "rdr": "RDR"}
NOTE_PAIRED = (
    "B - A over the cases both sides scored; 95% paired bootstrap interval resampling whole units "
    "(both sides the same draws; none where too few units are paired for it to be informative); "
    "RDR: lower is better."
)
NOTE_TEST = (
    "Exact paired randomization test of exact match: each unit's sign (its cases exact only in B minus "
    "only in A) flipped at random; a case a side excluded (refused, unparseable, errored) counts as "
    "wrong for that side. A only: A exact and B not; B only: the reverse."
)


class Comparison(BaseModel):
    """The ``--json`` document of ``sp-dspy compare``."""

    dataset: str
    files_a: list[str]
    files_b: list[str]
    compared: int
    only_a: int
    only_b: int
    in_neither: int
    direction: str = "B - A"
    cells: dict[str, CellComparison]
    bootstrap: dict[str, Any]
    cap_aware: bool = False
    benchmark: str = "safepyramid"  # the benchmark kind the cases belong to
    #: The kind's own metrics per side on the compared cases (PKU-SafeRLHF: A and B PkuReports;
    #: custom: each side's binary view and per-rule scores).
    extra: dict[str, dict[str, Any]] = Field(default_factory=dict)
    unit: str = "conversation"  # what the bootstrap and the test resample (the benchmark's unit)
    notes: list[str] = Field(default_factory=lambda: [NOTE_PAIRED, NOTE_TEST])


def compare_results(
    cases: Sequence[Case],
    results_a: ResultSet,
    results_b: ResultSet,
    *,
    dataset: str = "",
    cap_aware: bool = False,
    n_boot: int = 1000,
    seed: int = 0,
) -> Comparison:
    """Compare two result sets on the cases both have results for (see the module docstring)."""
    from .._metrics import CellComparison, compare_cells, resolve_records

    # The model's metric types resolve now: the metrics (numpy) load only when a comparison runs.
    Comparison.model_rebuild(_types_namespace={"CellComparison": CellComparison})
    records_a = resolve_records(cases, results_a)
    records_b = resolve_records(cases, results_b)
    in_a, in_b = {c.id for c in cases if c.id in records_a}, {c.id for c in cases if c.id in records_b}
    compared = [case for case in cases if case.id in in_a and case.id in in_b]
    if not compared:
        raise DataError(
            f"{dataset or 'the dataset'}: no case has results on both sides (A: {len(in_a)}, B: {len(in_b)}); "
            "wrong --dataset or result files?"
        )
    kind = kind_of_cases(compared)
    chosen = kind or benchmark_kind(DEFAULT_BENCHMARK)
    cells = compare_cells(
        compared, records_a, records_b, cap_aware=cap_aware, n_boot=n_boot, seed=seed, by=chosen.breakdown,
        unit=chosen.unit,
    )  # fmt: skip
    extra = {}
    for side, results in (("A", results_a), ("B", results_b)):
        report = None if kind is None else kind.variant_report(compared, results, cap_aware=cap_aware)
        if report is not None:
            extra[side] = report
    return Comparison(
        dataset=dataset,
        files_a=list(results_a.files),
        files_b=list(results_b.files),
        compared=len(compared),
        only_a=len(in_a - in_b),
        only_b=len(in_b - in_a),
        in_neither=len(cases) - len(in_a | in_b),
        cells=cells,
        bootstrap={"n_boot": n_boot, "seed": seed, "level": 0.95, "unit": chosen.unit},
        cap_aware=cap_aware,
        benchmark=DEFAULT_BENCHMARK if kind is None else kind.name,
        extra=extra,
        unit=chosen.unit,
    )


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
    if n_boot < 0:
        raise ConfigError(f"--n-boot: must be >= 0, got {n_boot}")
    paths = [_paths(raw, side) for raw, side in ((results_a, "RESULTS_A"), (results_b, "RESULTS_B"))]
    sides = [read_results(side, skip_bad_lines=skip_bad_lines) for side in paths]
    selection = RecordedSelection(**data.selection())
    scored = load_for_results(paths, sides, data=selection, notify=say_note)
    loaded, cases = scored.loaded, scored.cases
    comparison = compare_results(
        cases, *sides, dataset=loaded.source, cap_aware=cap_aware, n_boot=n_boot, seed=seed
    )
    document = json.dumps(comparison.model_dump(mode="json"), indent=2, ensure_ascii=False)
    if json_out == "-":
        typer.echo(document)
    else:
        _print(comparison)
    known = {case.id for case in loaded.cases}
    for label, results in zip("AB", sides, strict=True):
        unknown = sorted(results.result_ids() - known)
        if unknown:
            warn(f"{label}: {len(unknown)} result id(s) not in the dataset (e.g. {', '.join(unknown[:3])})")
        if results.bad_lines:
            warn(f"{label}: {results.bad_lines} malformed result line(s) skipped")
    if json_out not in (None, "-"):
        target = write_json_report(json_out, document)
        console.print(f"Comparison written to {target}", markup=False, highlight=False)


def _paths(raw: str, side: str) -> list[Path]:
    paths = [Path(part.strip()) for part in raw.split(",") if part.strip()]
    if not paths:
        raise ConfigError(f"{side}: no result file given")
    for path in paths:
        if path.is_dir():
            raise DataError(
                f"{side}: {path}: a directory, not a result file (name the results_*.jsonl in it)"
            )
        if not path.is_file():
            raise DataError(f"{side}: {path}: no such file")
    return paths


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
