"""``--fail-under`` on ``score`` and ``eval``: the flag, and what a met or unmet threshold prints."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from ._console import err_console

if TYPE_CHECKING:
    from .._metrics import ScoreReport, Threshold

FailUnder = Annotated[
    list[str] | None,
    typer.Option(
        "--fail-under",
        help="METRIC=VALUE or METRIC:CELL=VALUE (repeatable): exit 4 unless the score meets it; rmr and "
        "rmr_exact at least VALUE, rdr at most; CELL (L0, L2, 'tag NAME') ALL by default.",
        show_default=False,
    ),
]


def parse_fail_under(values: list[str] | None) -> list[Threshold]:
    """The flags' thresholds, each checked now (a bad one is one ``ConfigError`` line, before any work)."""
    from .._metrics import parse_threshold

    return [parse_threshold(value) for value in values or []]


def meets(report: ScoreReport, thresholds: list[Threshold], *, label: str = "") -> bool:
    """Print each unmet threshold (``fail-under:`` lines on stderr) or that all are met; whether they are."""
    if not thresholds:
        return True
    from .._metrics import unmet

    lines = unmet(report, thresholds)
    prefix = f"{label}: " if label else ""
    for line in lines:
        err_console.print(f"fail-under: {prefix}{line}", markup=False, highlight=False, soft_wrap=True)
    if not lines:
        met = ", ".join(threshold.describe() for threshold in thresholds)
        err_console.print(f"fail-under: {prefix}met ({met})", markup=False, highlight=False, soft_wrap=True)
    return not lines


def check_known_cells(thresholds: list[Threshold], benchmark: str) -> None:
    """Refuse, before any work, a threshold on a cell this benchmark never has (a tag's is known later)."""
    from .._benchmarks import benchmark_kind
    from .._metrics import cell_names, check_cells

    breakdown = benchmark_kind(benchmark).breakdown
    if breakdown != "tag":
        check_cells(thresholds, cell_names(breakdown))
