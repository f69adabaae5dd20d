"""B against A on the same cases: paired differences with intervals, and a paired test of exact match.

Both sides are resampled by the same draws of the benchmark's units (``Case.unit``), so a
conversation drawn twice counts twice on both sides. The test of exact match (RMR@1.0) is a
paired randomization test over those units: under "A and B are exchangeable", the sign of
each unit's difference (its exact matches only B has, minus those only A has) is a fair coin,
and the p-value is the exact share of the 2^k sign patterns whose total is at least as far
from 0 as the observed one. When each unit is one case it is McNemar's exact test; when a
conversation's three levels move together it does not count them as three independent pairs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ._bootstrap import (
    CI_METRICS,
    cell_rng,
    outcome_matrix,
    percentile_intervals,
    resample_sums,
    unit_matrix,
    unit_statistics,
)
from ._official import Breakdown, CaseOutcome, case_outcomes, compute_cell, grouped
from ._pvalues import paired_test_name

if TYPE_CHECKING:
    from .._data import Case
    from ._records import PolicyRecord

#: Fewer paired units than this in a cell and a paired interval says nothing (a handful of
#: units resamples to a few distinct values, often to one: a zero-width interval), so a
#: comparison withholds it and says why (``PairedDiff.ci_note``): compare's table and JSON
#: and the report all read that one field.
MIN_CI_PAIRS = 10

#: Each side's official cell as a comparison shows it.
CELL_KEYS: tuple[str, ...] = ("total", "n_eval", "excluded", "rmr_avg", "rmr_exact", "rdr")


class PairedDiff(BaseModel):
    """B minus A on the cases both scored, with a paired bootstrap interval per metric."""

    # Built on first use: ``sp-dspy score`` imports this module but never compares.
    model_config = ConfigDict(defer_build=True)

    n_pairs: int
    n_units: int = Field(default=0, description="The independent units (conversations...) those pairs form.")
    a: dict[str, float | None]
    b: dict[str, float | None]
    diff: dict[str, float | None]
    ci: dict[str, list[float] | None]
    ci_note: str | None = Field(
        default=None,
        description=f"Why ``ci`` is empty although cases were paired: fewer than {MIN_CI_PAIRS} units.",
    )


class PairedTest(BaseModel):
    """The paired randomization test of exact match: ``a_only`` = A right and B wrong, ``b_only``
    the reverse, ``n_units`` the units whose sign it flips (``method`` names them)."""

    model_config = ConfigDict(defer_build=True)

    n_pairs: int
    n_units: int
    a_only: int
    b_only: int
    p_value: float
    method: str


class CellComparison(BaseModel):
    """B against A in one cell (a level or ALL): each side's official cell, the paired differences
    and the paired test."""

    model_config = ConfigDict(defer_build=True)

    n: int = Field(description="Compared cases in this cell (results on both sides).")
    a: dict[str, Any] = Field(description="A's official cell on the compared cases.")
    b: dict[str, Any] = Field(description="B's official cell on the compared cases.")
    paired: PairedDiff = Field(description="a, b and diff (B - A) on the cases both scored, with CIs.")
    test: PairedTest = Field(description="The paired randomization test of exact match over the units.")


def compare_cells(
    cases: Iterable[Case],
    records_a: Mapping[str, PolicyRecord],
    records_b: Mapping[str, PolicyRecord],
    *,
    cap_aware: bool = False,
    n_boot: int = 1000,
    seed: int = 0,
    excluded_wrong: bool = True,
    by: Breakdown = "level",
    unit: str = "conversation",
) -> dict[str, CellComparison]:
    """B against A in the cells of ``by`` (``L0``..``ALL``; each ``tag NAME`` and ``ALL``; ``ALL``
    alone), over the ``cases`` both sides have a record for; ``unit`` names ``Case.unit`` in output.

    The paired differences (RMR, RMR@1.0, RDR, B - A, 95% paired bootstrap interval) use only
    the cases both sides scored, so a refusal on one side cannot masquerade as an accuracy
    difference; both sides are resampled with the same unit draws. The paired test of exact
    match runs over every compared case, an excluded one counting as wrong for its side
    (``excluded_wrong``: a guard must not win by declining the hard cases), or else over the
    cases both scored, beside the paired differences.
    """
    compared = [case for case in cases if case.id in records_a and case.id in records_b]
    out_a = case_outcomes(compared, records_a, cap_aware=cap_aware)
    out_b = case_outcomes(compared, records_b, cap_aware=cap_aware)
    cells: dict[str, CellComparison] = {}
    position = {id(x): i for i, x in enumerate(out_a)}
    for name, members in grouped(out_a, by).items():
        pairs = [(x, out_b[position[id(x)]]) for x in members]
        scored = [(x, y) for x, y in pairs if not x.excluded and not y.excluded]
        cell_a, cell_b = compute_cell([x for x, _ in pairs]), compute_cell([y for _, y in pairs])
        cells[name] = CellComparison(
            n=len(pairs),
            a={key: cell_a[key] for key in CELL_KEYS},
            b={key: cell_b[key] for key in CELL_KEYS},
            paired=paired_diff(scored, n_boot=n_boot, seed=seed, unit=unit),
            test=paired_test(pairs if excluded_wrong else scored, unit=unit),
        )
    return cells


def paired_diff(
    scored: Sequence[tuple[CaseOutcome, CaseOutcome]], *, n_boot: int, seed: int, unit: str = "conversation"
) -> PairedDiff:
    """B - A of RMR, RMR@1.0 and RDR on pairs both sides scored, with 95% paired bootstrap intervals
    over their units (none, and ``ci_note`` saying so, below ``MIN_CI_PAIRS`` units)."""
    out_a, out_b = [x for x, _ in scored], [y for _, y in scored]
    cell_a, cell_b = compute_cell(out_a), compute_cell(out_b)
    a = {m: cell_a[m] for m in CI_METRICS}
    b = {m: cell_b[m] for m in CI_METRICS}
    diff: dict[str, float | None] = {
        m: None if a[m] is None or b[m] is None else round(b[m] - a[m], 2) for m in CI_METRICS
    }
    n, units = len(scored), [x.unit for x in out_a]
    k = len(set(units))
    ci: dict[str, list[float] | None] = dict.fromkeys(CI_METRICS)
    if 0 < k < MIN_CI_PAIRS:
        note = f"not informative ({k} {unit}s < {MIN_CI_PAIRS})"  # short: it stands in the interval's column
        return PairedDiff(n_pairs=n, n_units=k, a=a, b=b, diff=diff, ci=ci, ci_note=note)
    if n and n_boot > 0:
        matrices = [unit_matrix(outcome_matrix(out), units) for out in (out_a, out_b)]
        sums_a, sums_b = resample_sums(matrices, n_boot, cell_rng(seed, "paired"))
        stats_a, stats_b = unit_statistics(sums_a), unit_statistics(sums_b)
        ci = dict(percentile_intervals({m: stats_b[m] - stats_a[m] for m in CI_METRICS}))
    return PairedDiff(n_pairs=n, n_units=k, a=a, b=b, diff=diff, ci=ci)


def paired_test(
    pairs: Sequence[tuple[CaseOutcome, CaseOutcome]], *, unit: str = "conversation"
) -> PairedTest:
    """The paired randomization test of exact match (RMR@1.0) over ``pairs`` of outcomes (A's, B's)."""
    per_unit: dict[str, int] = {}
    for x, y in pairs:
        per_unit[x.unit] = per_unit.get(x.unit, 0) + int(y.exact) - int(x.exact)
    return PairedTest(
        n_pairs=len(pairs),
        n_units=len(per_unit),
        a_only=sum(1 for x, y in pairs if x.exact and not y.exact),
        b_only=sum(1 for x, y in pairs if y.exact and not x.exact),
        p_value=sign_flip_p(list(per_unit.values())),
        method=paired_test_name(unit),
    )


def sign_flip_p(differences: Sequence[int]) -> float:
    """Two-sided exact p-value of the sign-flip randomization test of integer per-unit differences.

    The null distribution of ``sum(s_i * |d_i|)`` over the 2^k sign patterns is built by
    convolution (each unit: half its mass moved +|d|, half -|d|), exact up to float rounding
    and linear in k, so no Monte Carlo draws and no seed. With every ``|d| <= 1`` this is
    McNemar's exact binomial test.
    """
    sizes = [abs(d) for d in differences if d]
    if not sizes:
        return 1.0
    total = sum(sizes)
    dist = np.zeros(2 * total + 1)
    dist[total] = 1.0
    for size in sizes:
        shifted = np.zeros_like(dist)
        shifted[size:] += dist[:-size]
        shifted[:-size] += dist[size:]
        dist = shifted * 0.5
    observed = abs(sum(differences))
    values = np.abs(np.arange(-total, total + 1))
    return float(min(1.0, dist[values >= observed].sum()))
