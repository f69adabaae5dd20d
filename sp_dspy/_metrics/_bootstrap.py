"""Confidence intervals and paired tests for the official metrics.

The reference harness reports point estimates only; at 100 cases per domain x level
a 5-point RMR gap can be noise. Intervals are percentile bootstraps over the *scored*
cases of a cell (excluded cases are in no denominator, so they are not resampled).
Each resample is a vector of per-case multiplicities, so every statistic is one
matrix product: 1,000 resamples of 3,000 cases cost milliseconds.

Seeding: each cell draws from ``default_rng([seed, crc32(cell name)])``, so adding a
domain or a level filter never shifts another cell's interval.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel

from .._data._schema import Case
from ._official import CELLS, TAUS, CaseOutcome, case_outcomes, compute_cell
from ._records import PolicyRecord

CI_METRICS: tuple[str, ...] = ("rmr_avg", "rmr_exact", "rdr")
#: Below this many discordant pairs McNemar uses the exact binomial test.
EXACT_BELOW = 25


def outcome_matrix(outcomes: Sequence[CaseOutcome]) -> np.ndarray:
    """One row per *scored* case: main-schedule taus matched (0-4), exact, FP+FN, |P union G|.

    Matching is monotone in tau, so the RMR of a resample needs only the per-case
    number of taus matched: ``RMR = 100 * sum / (4 n)``.
    """
    rows = [(sum(o.hits[: len(TAUS)]), o.hits[0], o.fp + o.fn, o.union) for o in outcomes if not o.excluded]
    return np.asarray(rows, dtype=np.int64).reshape(len(rows), 4)


def _weights(n: int, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """(n_boot, n) multiplicities of each case in each resample (one bincount, no gathers)."""
    draws = rng.integers(0, n, size=(n_boot, n), dtype=np.int32)
    offsets = (draws + (np.arange(n_boot, dtype=np.int64) * n)[:, None]).ravel()
    return np.bincount(offsets, minlength=n_boot * n).reshape(n_boot, n)


def _statistics(sums: np.ndarray, n: int) -> dict[str, np.ndarray]:
    """Per-resample RMR, RMR@1.0 and RDR (unrounded) from column sums."""
    sums = sums.astype(np.float64)
    disagreement, union = sums[:, 2], sums[:, 3]
    rdr = np.divide(100.0 * disagreement, union, out=np.zeros_like(union), where=union > 0)
    return {"rmr_avg": 100.0 * sums[:, 0] / (len(TAUS) * n), "rmr_exact": 100.0 * sums[:, 1] / n, "rdr": rdr}


def _interval(values: np.ndarray) -> list[float]:
    low, high = np.percentile(values, [2.5, 97.5])
    return [round(float(low), 2), round(float(high), 2)]


def _rng(seed: int, name: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(name.encode("utf-8"))])


def bootstrap_matrix(
    matrix: np.ndarray, *, name: str, n_boot: int = 1000, seed: int = 0
) -> dict[str, list[float]] | None:
    """95% percentile intervals from an ``outcome_matrix`` (rows = the cell's scored cases)."""
    n = matrix.shape[0]
    if n == 0 or n_boot <= 0:
        return None
    stats = _statistics(_weights(n, n_boot, _rng(seed, name)) @ matrix, n)
    return {metric: _interval(stats[metric]) for metric in CI_METRICS}


def bootstrap_cell(
    outcomes: Sequence[CaseOutcome], *, name: str, n_boot: int = 1000, seed: int = 0
) -> dict[str, list[float]] | None:
    """95% percentile intervals of ``rmr_avg``, ``rmr_exact`` and ``rdr``; None if nothing scored."""
    return bootstrap_matrix(outcome_matrix(outcomes), name=name, n_boot=n_boot, seed=seed)


def confidence_intervals(outcomes: Sequence[CaseOutcome], *, n_boot: int, seed: int) -> dict[str, Any]:
    """Intervals for the cells ``L0``..``ALL`` and, under ``domains``, every domain's cells.

    The outcome matrix is built once; each cell is a row mask of it.
    """
    scored = [o for o in outcomes if not o.excluded]
    matrix = outcome_matrix(scored)
    levels = np.array([o.level for o in scored], dtype=object)
    domains = np.array([o.domain for o in scored], dtype=object)
    everything = np.ones(len(scored), dtype=bool)

    def cells(prefix: str, base: np.ndarray) -> dict[str, Any]:
        return {
            name: bootstrap_matrix(
                matrix[base & (everything if name == "ALL" else levels == name)],
                name=f"{prefix}{name}",
                n_boot=n_boot,
                seed=seed,
            )
            for name in CELLS
        }

    intervals: dict[str, Any] = cells("", everything)
    intervals["domains"] = {d: cells(f"{d}/", domains == d) for d in sorted({o.domain for o in outcomes})}
    return intervals


class PairedDiff(BaseModel):
    """B minus A on the cases both scored, with a paired bootstrap interval per metric."""

    n_pairs: int
    a: dict[str, float | None]
    b: dict[str, float | None]
    diff: dict[str, float | None]
    ci: dict[str, list[float] | None]


class McNemarResult(BaseModel):
    """McNemar's test on exact match: ``a_only`` = A right and B wrong, ``b_only`` the reverse."""

    n_pairs: int
    a_only: int
    b_only: int
    statistic: float | None
    p_value: float
    method: str


def _paired(
    cases: Iterable[Case],
    records_a: Mapping[str, PolicyRecord],
    records_b: Mapping[str, PolicyRecord],
    cap_aware: bool,
) -> tuple[list[CaseOutcome], list[CaseOutcome]]:
    """Outcomes of the cases that both result sets scored, in the same order."""
    cases = list(cases)
    out_a = case_outcomes(cases, records_a, cap_aware=cap_aware)
    out_b = case_outcomes(cases, records_b, cap_aware=cap_aware)
    keep = [i for i, (x, y) in enumerate(zip(out_a, out_b, strict=True)) if not x.excluded and not y.excluded]
    return [out_a[i] for i in keep], [out_b[i] for i in keep]


def paired_bootstrap_diff(
    cases: Iterable[Case],
    records_a: Mapping[str, PolicyRecord],
    records_b: Mapping[str, PolicyRecord],
    *,
    cap_aware: bool = False,
    n_boot: int = 1000,
    seed: int = 0,
) -> PairedDiff:
    """Difference (B - A) of RMR, RMR@1.0 and RDR with a 95% paired bootstrap interval.

    Only cases scored by both sides enter (so a refusal on one side cannot masquerade
    as an accuracy difference); both sides are resampled with the same case draws.
    """
    out_a, out_b = _paired(cases, records_a, records_b, cap_aware)
    cell_a, cell_b = compute_cell(out_a), compute_cell(out_b)
    a = {m: cell_a[m] for m in CI_METRICS}
    b = {m: cell_b[m] for m in CI_METRICS}
    diff: dict[str, float | None] = {
        m: None if a[m] is None or b[m] is None else round(b[m] - a[m], 2) for m in CI_METRICS
    }
    n = len(out_a)
    ci: dict[str, list[float] | None] = dict.fromkeys(CI_METRICS)
    if n and n_boot > 0:
        weights = _weights(n, n_boot, _rng(seed, "paired"))
        stats_a = _statistics(weights @ outcome_matrix(out_a), n)
        stats_b = _statistics(weights @ outcome_matrix(out_b), n)
        ci = {m: _interval(stats_b[m] - stats_a[m]) for m in CI_METRICS}
    return PairedDiff(n_pairs=n, a=a, b=b, diff=diff, ci=ci)


def mcnemar_test(a_only: int, b_only: int) -> tuple[float | None, float, str]:
    """(statistic, two-sided p, method) for the discordant counts of a paired test.

    Fewer than ``EXACT_BELOW`` discordant pairs: the exact binomial test,
    ``p = min(1, 2 * P[X <= min(b, c)])`` with ``X ~ Bin(b + c, 1/2)`` in exact
    integer arithmetic. Otherwise the chi-square statistic with continuity correction,
    ``(|b - c| - 1)^2 / (b + c)``, whose 1-df tail is ``erfc(sqrt(stat / 2))``.
    """
    n = a_only + b_only
    if n == 0:
        return None, 1.0, "exact"
    if n < EXACT_BELOW:
        tail = sum(math.comb(n, i) for i in range(min(a_only, b_only) + 1))
        return None, min(1.0, 2 * tail / 2**n), "exact"
    statistic = (abs(a_only - b_only) - 1) ** 2 / n
    return statistic, math.erfc(math.sqrt(statistic / 2)), "chi2"


def mcnemar(
    cases: Iterable[Case],
    records_a: Mapping[str, PolicyRecord],
    records_b: Mapping[str, PolicyRecord],
    *,
    cap_aware: bool = False,
) -> McNemarResult:
    """McNemar's test of exact match (RMR@1.0) on the cases both result sets scored."""
    out_a, out_b = _paired(cases, records_a, records_b, cap_aware)
    a_only = sum(1 for x, y in zip(out_a, out_b, strict=True) if x.exact and not y.exact)
    b_only = sum(1 for x, y in zip(out_a, out_b, strict=True) if y.exact and not x.exact)
    statistic, p_value, method = mcnemar_test(a_only, b_only)
    return McNemarResult(
        n_pairs=len(out_a), a_only=a_only, b_only=b_only, statistic=statistic, p_value=p_value, method=method
    )
