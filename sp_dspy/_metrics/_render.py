"""Rich tables for a ``ScoreReport`` (the console view; ``--json`` has everything)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.table import Table
from rich.text import Text

from .._table import FitTable
from ._official import RULE_TYPES, TAUS_FULL, tau_key
from ._policy_view import PolicyView
from ._score import ScoreReport


def _add_row(table: Table, *cells: str) -> None:
    """A row of plain ``Text`` cells: domains and ids are not console markup (and parsing it is slow)."""
    table.add_row(*(Text(cell) for cell in cells))


def cell_text(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def interval_text(ci: Any) -> str:
    if not isinstance(ci, dict) or ci.get("rmr_avg") is None:
        return "-"
    low, high = ci["rmr_avg"]
    return f"{low:.2f}–{high:.2f}"


def _present(report: ScoreReport) -> list[str]:
    """Cells that hold cases (``ALL`` always), so a ``--level`` run shows no empty rows."""
    return [*report.breakdown_cells(), "ALL"]


def _table(title: str, columns: Iterable[str], left: int = 1, caption: str | None = None) -> Table:
    """A table whose first ``left`` columns are left-justified and the rest right-justified."""
    table = FitTable(title=title, caption=caption)
    for i, name in enumerate(columns):
        table.add_column(name, justify="left" if i < left else "right", no_wrap=name == "95% CI")
    return table


def headline_table(report: ScoreReport) -> Table:
    per_rule = report.mode == "per_rule"
    title = "Per-rule case-level metrics" if per_rule else "Per-policy metrics"
    title += " (cap-aware)" if report.cap_aware else ""
    caption = "RMR = mean RMR@{1.0,.9,.8,.7}; RDR lower is better; Strict = RMR with excluded cases as misses"
    columns = ["Cell", "N", "Scored", "RMR", "95% CI", "RMR@1.0", "RDR", "Excl.%", "Strict"]
    table = _table(title, [*columns, "Judg. refusal %"] if per_rule else columns, caption=caption)
    for name in _present(report):
        cell = report.cells[name]
        row = [
            name,
            *(cell_text(cell[key]) for key in ("total", "n_eval", "rmr_avg")),
            interval_text(report.ci.get(name)),
        ]
        row += [cell_text(cell[key]) for key in ("rmr_exact", "rdr", "refusal", "rmr_avg_strict")]
        _add_row(table, *row, *([cell_text(cell.get("per_rule_refusal_rate"))] if per_rule else []))
    return table


def tau_table(report: ScoreReport) -> Table:
    table = _table("RMR@tau breakdown", ["Cell", *(f"@{tau:.1f}" for tau, _ in TAUS_FULL)])
    for name in _present(report):
        _add_row(table, name, *(cell_text(report.cells[name][tau_key(tau)]) for tau, _ in TAUS_FULL))
    return table


def failure_table(report: ScoreReport) -> Table:
    modes = ("FM-V1", "FM-D1", "FM-C1", "FM-C3")
    title = "Failure modes (scored cases failing exact match; % of the level's cases)"
    table = _table(title, ("Level", "Failed", *modes))
    for level, entry in report.failure_modes.items():
        if not entry["total"]:
            continue
        cells = [
            f"{entry[m]['count']} ({cell_text(entry[m]['pct'])}%)" if m in entry else "n/a" for m in modes
        ]
        _add_row(table, level, cell_text(entry["failed"]), *cells)
    return table


def attribution_table(report: ScoreReport) -> Table:
    table = _table("Errors by rule type (FP / FN counts)", ("Cell", *RULE_TYPES))
    for name in (name for name in _present(report) if name in report.error_attribution):
        entry = report.error_attribution[name]
        _add_row(table, name, *(f"{entry['fp'][b]} / {entry['fn'][b]}" for b in RULE_TYPES))
    return table


def domain_table(report: ScoreReport) -> Table:
    # Short headers keep the table within 80 columns beside a long domain name.
    names = list(next(iter(report.domains.values()), {"ALL": None}))
    caption = "L0-ALL: RMR per level; RMR@1.0 and RDR: all levels" if len(names) > 1 else None
    table = _table("Per-domain RMR", ("Domain", *names, "RMR@1.0", "RDR"), caption=caption)
    for domain, cells in report.domains.items():
        rmr = [cell_text(cells[name]["rmr_avg"]) for name in names]
        _add_row(table, domain, *rmr, cell_text(cells["ALL"]["rmr_exact"]), cell_text(cells["ALL"]["rdr"]))
    return table


def per_rule_table(report: ScoreReport) -> Table:
    title = "Per-rule judgments (no verdict counts as wrong / not flagged)"
    columns = ("Cell", "Target type", "N", "Acc", "P", "R", "F1", "TP/FP/FN/TN", "No verdict %")
    table = _table(title, columns, left=2)
    for cell, stats in (report.per_rule or {}).items():
        if not stats["n_judgments"]:
            continue
        for rule_type, s in [("all", stats), *stats["by_rule_type"].items()]:
            numbers = [cell_text(s[key]) for key in ("n_judgments", "accuracy", "precision", "recall", "f1")]
            confusion = f"{s['tp']}/{s['fp']}/{s['fn']}/{s['tn']}"
            _add_row(table, cell, rule_type, *numbers, confusion, cell_text(s["per_rule_refusal_rate"]))
    return table


def render_score_table(report: ScoreReport) -> list[Table]:
    """The console tables in reading order: headline, tau breakdown, diagnostics, domains."""
    tables = [headline_table(report), tau_table(report), failure_table(report), attribution_table(report)]
    if len(report.domains) > 1:
        tables.append(domain_table(report))
    if report.per_rule is not None:
        tables.append(per_rule_table(report))
    return tables


def binary_table(view: PolicyView) -> Table:
    """Violation or not, per conversation: over-blocking among clean ones, recall among violating ones."""
    b = view.binary
    caption = (
        f"flagged = the guard names any rule; over {b.scored} scored case(s), {b.excluded} excluded; "
        "over-blocking lower is better"
    )
    table = _table("Violation or not (per conversation, %)", ("Measure", "Value", "Of"), caption=caption)
    _add_row(
        table,
        "over-blocking (clean flagged)",
        cell_text(b.over_blocking_rate),
        f"{b.flagged_clean} / {b.clean}",
    )
    _add_row(table, "recall (violating caught)", cell_text(b.recall), f"{b.caught} / {b.violating}")
    _add_row(
        table,
        "precision (flags on violating)",
        cell_text(b.precision),
        f"{b.caught} / {b.caught + b.flagged_clean}",
    )
    return table


def rule_table(view: PolicyView) -> Table:
    """Per rule of the policy: named when, and only when, violated? (The rule's text wraps, so
    this table is never stacked: its numbers stay in columns.)"""
    table = Table(title="Per rule of your policy (%)")
    for name in ("Rule", "Support", "Named", "P", "R", "F1"):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("Text", overflow="fold", ratio=1)
    for s in view.rules:
        numbers = [str(s.support), str(s.predicted), *(cell_text(v) for v in (s.precision, s.recall, s.f1))]
        _add_row(table, str(s.rule), *numbers, s.text or "(not a rule of the policy)")
    return table
