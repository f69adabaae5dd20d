"""Rich tables for a :class:`PkuReport`, with the paper's moderator figures alongside."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table

from sp_dspy._metrics_pku._score import PKU_PUBLISHED, PkuReport, SeverityMetrics
from sp_dspy._table import FitTable

CATEGORY_SCOPE = (
    "The paper's category exact match is over unsafe responses only: compare it with ours over "
    "unsafe responses, not over all responses (where a safe response answered with no category matches)."
)
"""Which category exact match the paper's figure compares with (tables and the report say it)."""


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def render_pku_report(report: PkuReport) -> Group:
    """Summary, per-category and (when scored) severity tables, ready for ``Console.print``."""
    cat, binary, sev = report.categories, report.binary, report.severity
    caption = f"{CATEGORY_SCOPE}\npaper moderator: {PKU_PUBLISHED['citation']}"
    summary = FitTable(
        title="PKU-SafeRLHF: summary (%)", title_justify="left", caption=caption, caption_justify="left"
    )
    summary.add_column("metric")
    for name in ("value", "n_eval / excluded", "paper moderator"):
        summary.add_column(name, justify="right")
    n_bin = f"{binary.n_eval} / {binary.excluded}"
    rows: list[tuple[str, float | None, str, float | None]] = [
        ("safe/unsafe accuracy", binary.accuracy, n_bin, PKU_PUBLISHED["binary_accuracy"]),
        ("  strict accuracy", binary.strict_accuracy, n_bin, None),
        ("  unsafe precision", binary.precision, n_bin, None),
        ("  unsafe recall", binary.recall, n_bin, None),
        ("  unsafe F1", binary.f1, n_bin, None),
        ("  false-positive rate", binary.false_positive_rate, n_bin, None),
    ]
    n_cat = f"{cat.n_eval} / {cat.excluded}"
    rows += [
        ("category exact match, all responses", cat.exact_match, n_cat, None),
        (
            "  unsafe responses only",
            cat.exact_match_unsafe,
            f"{cat.n_eval_unsafe} unsafe",
            PKU_PUBLISHED["category_exact_match"],
        ),
        ("  strict exact match", cat.strict_exact_match, n_cat, None),
        ("  micro F1", cat.micro_f1, n_cat, None),
        ("  macro F1", cat.macro_f1, n_cat, None),
    ]
    if sev is not None:
        n_sev = f"{sev.n_eval} / {sev.excluded}"
        rows += [
            ("severity accuracy", sev.accuracy, n_sev, PKU_PUBLISHED["severity_accuracy"]),
            ("  strict accuracy", sev.strict_accuracy, n_sev, None),
            ("  macro F1", sev.macro_f1, n_sev, None),
        ]
    for name, value, counts, paper in rows:
        summary.add_row(name, _fmt(value), counts, "" if paper is None else _fmt(paper))
    parts: list[Table] = [summary, _category_table(report)]
    if sev is not None:
        parts.append(_severity_table(sev))
    return Group(*parts)


def _category_table(report: PkuReport) -> Table:
    table = FitTable(title="PKU-SafeRLHF: harm categories (%)", title_justify="left")
    table.add_column("rule", justify="right")
    table.add_column("category")
    for name in ("support", "predicted", "precision", "recall", "F1"):
        table.add_column(name, justify="right")
    for score in report.categories.per_category:
        counts = (str(score.rule), score.category, str(score.support), str(score.predicted))
        table.add_row(*counts, *(_fmt(value) for value in (score.precision, score.recall, score.f1)))
    if report.categories.out_of_range:
        table.caption = f"{report.categories.out_of_range} predicted rule number(s) outside 1-19"
    return table


def _severity_table(severity: SeverityMetrics) -> Table:
    table = FitTable(title="PKU-SafeRLHF: severity", title_justify="left")
    table.add_column("gold \\ pred")
    for level in range(len(severity.confusion)):
        table.add_column(str(level), justify="right")
    for level, row in enumerate(severity.confusion):
        table.add_row(str(level), *(str(count) for count in row))
    return table
