"""How p-values are named, adjusted and printed, one way for every command and report.

Kept apart from the tests themselves (``_paired``) so that printing a saved summary needs no numpy.
"""

from __future__ import annotations

from collections.abc import Sequence


def paired_test_name(unit: str) -> str:
    """The paired test's name as every table and report prints it (``unit``: ``BenchmarkKind.unit``)."""
    return f"paired randomization test over {unit}s"


def format_p(p_value: float | None) -> str:
    """A p-value as every table, report and verdict prints it: three decimals, ``<0.001`` below that."""
    if p_value is None:
        return "–"
    return "<0.001" if p_value < 0.001 else f"{p_value:.3f}"


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjustment of a family of p-values (``None``: not tested, left out).

    Sorted ascending, the i-th of m is multiplied by (m - i), made monotone, capped at 1: the
    family-wise error stays at most alpha when several optimizers are each tested against the
    same baseline, without Bonferroni's loss of power.
    """
    tested = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    m = len(tested)
    adjusted: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, index) in enumerate(tested):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[index] = running
    return adjusted
