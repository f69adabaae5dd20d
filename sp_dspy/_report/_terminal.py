"""The terminal version of the report: one rich table, one row per variant."""

from __future__ import annotations

from rich import box
from rich.table import Table
from rich.text import Text

from .._table import FitTable
from ._html_tables import DASH, num
from ._model import CellStats, ComparisonSummary, DiffRow


def _cost(cell: CellStats) -> str:
    if cell.dollars_per_case is not None:
        return f"${cell.dollars_per_case:.4g}"
    if cell.prompt_tokens_per_case is not None:
        return f"{cell.prompt_tokens_per_case + (cell.completion_tokens_per_case or 0):,.0f} tok"
    return DASH


def _delta(row: DiffRow | None) -> Text:
    if row is None:
        return Text("baseline", style="dim")
    value = row.diff.get("rmr_avg")
    if value is None:
        return Text(DASH)
    interval = row.ci.get("rmr_avg")
    withheld = f" {row.ci_note}" if row.ci_note else ""
    text = f"{value:+.1f}" + (f" [{interval[0]:+.1f}, {interval[1]:+.1f}]" if interval else withheld)
    style = "" if not row.significant("rmr_avg") else "green" if value > 0 else "red"
    return Text(text, style=style)


def render_terminal(summary: ComparisonSummary) -> Table:
    """Per variant: scored cases, exclusions, RMR by level (or tag: the benchmark's breakdown; no
    level columns for a benchmark without levels), ΔRMR vs the baseline, cost per case."""
    table = FitTable(
        title=f"{summary.benchmark}: {summary.n_cases} cases, baseline {summary.baseline}",
        title_justify="left",
        box=box.SIMPLE_HEAD,
    )
    table.add_column("Variant", min_width=12)
    groups = [cell for cell in summary.cases_per_cell if cell != "ALL"]
    headers = ("Scored", "Excl %", "RMR ALL [95% CI]", *groups, "RMR@1.0", "RDR")
    for header in (*headers, "Δ RMR vs baseline", "Cost / case"):
        table.add_column(header, justify="right")
    by_label = {row.label: row for row in summary.diffs_for("ALL")}
    for entry in summary.variants:
        cells = entry.cells
        total = cells["ALL"]
        interval = f" [{total.rmr_ci[0]:.1f}, {total.rmr_ci[1]:.1f}]" if total.rmr_ci else ""
        name = Text(entry.label)
        if entry.variant not in entry.label:
            name.append(f"\n{entry.variant}", style="dim")
        table.add_row(
            name,
            f"{total.n_eval}/{total.total}",
            num(total.excluded_pct, 1),
            Text(num(total.rmr, 1) + interval, style="bold"),
            *(num(cells[group].rmr, 1) for group in groups),
            num(total.rmr_exact, 1),
            num(total.rdr, 1),
            _delta(by_label.get(entry.label)),
            _cost(total),
        )
    return table
