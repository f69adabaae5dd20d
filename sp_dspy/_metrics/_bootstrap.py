"""Confidence intervals and paired tests for the official metrics.

The reference harness reports point estimates only; at 100 cases per domain x level
a 5-point RMR gap can be noise. Intervals are percentile bootstraps over the *scored*
cases of a cell (excluded cases are in no denominator, so they are not resampled).
Every statistic is a function of per-resample column sums of a small integer
matrix (one row per case); ``resample_sums`` computes them without materialising
the resamples.

Seeding: each cell draws from ``default_rng([seed, crc32(cell name)])``, so adding a
domain or a level filter never shifts another cell's interval. The draws are the
same ``integers(0, n, (n_boot, n), int32)`` stream whether they are taken at once or
chunk by chunk, so the intervals do not depend on the chunk size.
"""

from __future__ import annotations

import math
import os
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from ._official import TAUS, Breakdown, CaseOutcome, case_outcomes, cell_names, compute_cell, grouped

if TYPE_CHECKING:
    from .._data import Case
    from ._records import PolicyRecord

CI_METRICS: tuple[str, ...] = ("rmr_avg", "rmr_exact", "rdr")
#: Below this many discordant pairs McNemar uses the exact binomial test.
EXACT_BELOW = 25

#: Fewer paired cases than this in a cell and a paired interval says nothing (a handful of
#: cases resamples to a few distinct values, often to one: a zero-width interval), so a
#: comparison withholds it and says why (``PairedDiff.ci_note``): compare's table and JSON
#: and the report all read that one field.
MIN_CI_PAIRS = 10

#: Draws taken per chunk (small enough for the CPU cache).
_CHUNK_DRAWS = 1 << 16
_WORD_BITS = 63


def _weights(n: int, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """(n_boot, n) multiplicities of each case in each resample (one bincount, no gathers)."""
    draws = rng.integers(0, n, size=(n_boot, n), dtype=np.int32)
    offsets = (draws + (np.arange(n_boot, dtype=np.int64) * n)[:, None]).ravel()
    return np.bincount(offsets, minlength=n_boot * n).reshape(n_boot, n)


def _pack(matrix: np.ndarray) -> tuple[list[np.ndarray], list[tuple[int, int, int]]] | None:
    """The columns bit-packed into int64 words (a column gets the bits of ``max * n``, so no
    sum carries into the next) and each column's (word, shift, bits); None if one cannot."""
    n = matrix.shape[0]
    if n == 0 or matrix.min() < 0:
        return None
    words: list[np.ndarray] = []
    layout: list[tuple[int, int, int]] = []
    used = _WORD_BITS
    for column in matrix.T:
        bits = max(1, (int(column.max()) * n).bit_length())
        if bits > _WORD_BITS:
            return None
        if used + bits > _WORD_BITS:
            words.append(np.zeros(n, dtype=np.int64))
            used = 0
        words[-1] |= column.astype(np.int64) << used
        layout.append((len(words) - 1, used, bits))
        used += bits
    return words, layout


def resample_sums(matrices: Sequence[np.ndarray], n_boot: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Per matrix, its (n_boot, columns) sums over the same ``n_boot`` resamples of its rows.

    Bit-packed columns give all sums with one gather and one add per draw, in cache-sized
    chunks; they equal ``_weights(...) @ matrix`` exactly (the route when a column needs
    more than 63 bits).
    """
    n = matrices[0].shape[0]
    packed = [p for p in (_pack(matrix) for matrix in matrices) if p is not None]
    if len(packed) < len(matrices):
        weights = _weights(n, n_boot, rng)
        return [weights @ matrix for matrix in matrices]
    rows = max(1, _CHUNK_DRAWS // n)
    word_sums = [[np.empty(n_boot, dtype=np.int64) for _ in words] for words, _ in packed]
    gathered = np.empty((min(rows, n_boot), n), dtype=np.int64)
    for start in range(0, n_boot, rows):
        stop = min(start + rows, n_boot)
        draws = rng.integers(0, n, size=(stop - start, n), dtype=np.int32)
        out = gathered[: stop - start]
        for (words, _), sums in zip(packed, word_sums, strict=True):
            for word, total in zip(words, sums, strict=True):
                # Draws lie in [0, n), so "clip" never moves one ("raise" takes a slow buffered cast).
                np.take(word, draws, out=out, mode="clip")
                out.sum(axis=1, out=total[start:stop])
    return [
        np.stack([(sums[w] >> shift) & ((1 << bits) - 1) for w, shift, bits in layout], axis=1)
        for (_, layout), sums in zip(packed, word_sums, strict=True)
    ]


def outcome_matrix(outcomes: Sequence[CaseOutcome], *, strict: bool = False) -> np.ndarray:
    """One row per *scored* case: main-schedule taus matched (0-4), exact, FP+FN, |P union G|;
    ``strict``: an excluded case too, as a row of zeros (a miss, as ``rmr_avg_strict`` counts it).

    Matching is monotone in tau, so the RMR of a resample needs only the per-case
    number of taus matched: ``RMR = 100 * sum / (4 n)``.
    """
    rows = [
        (0, 0, 0, 0) if o.excluded else (sum(o.hits[: len(TAUS)]), o.hits[0], o.fp + o.fn, o.union)
        for o in outcomes
        if strict or not o.excluded
    ]
    return np.asarray(rows, dtype=np.int64).reshape(len(rows), 4)


def _statistics(sums: np.ndarray, n: int) -> dict[str, np.ndarray]:
    """Per-resample RMR, RMR@1.0 and RDR (unrounded) from column sums."""
    sums = sums.astype(np.float64)
    disagreement, union = sums[:, 2], sums[:, 3]
    rdr = np.divide(100.0 * disagreement, union, out=np.zeros_like(union), where=union > 0)
    return {"rmr_avg": 100.0 * sums[:, 0] / (len(TAUS) * n), "rmr_exact": 100.0 * sums[:, 1] / n, "rdr": rdr}


def _intervals(stats: Mapping[str, np.ndarray]) -> dict[str, list[float]]:
    """2.5th and 97.5th percentile of each metric, rounded to 2 decimals."""
    rows = np.sort(np.stack([stats[metric] for metric in CI_METRICS]), axis=1)
    return {
        metric: [round(_percentile(rows[i], 2.5), 2), round(_percentile(rows[i], 97.5), 2)]
        for i, metric in enumerate(CI_METRICS)
    }


def _percentile(ordered: np.ndarray, q: float) -> float:
    """``np.percentile(values, q)`` (default "linear" method) of sorted ``values``, to the bit,
    without its per-call overhead and first-use import of ``numpy.ma``."""
    last = len(ordered) - 1
    position = (q / 100) * last
    lower = min(max(math.floor(position), 0), last)
    upper = min(lower + 1, last)
    gamma = position - lower
    a, b = float(ordered[lower]), float(ordered[upper])
    # numpy's ``_lerp``: measured from the nearer end, so gamma = 1 gives b exactly.
    return b - (b - a) * (1 - gamma) if gamma >= 0.5 else a + (b - a) * gamma


def _rng(seed: int, name: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(name.encode("utf-8"))])


def bootstrap_matrix(
    matrix: np.ndarray, *, name: str, n_boot: int = 1000, seed: int = 0
) -> dict[str, list[float]] | None:
    """95% percentile intervals of ``rmr_avg``, ``rmr_exact`` and ``rdr`` from an ``outcome_matrix``
    (rows = the cell's scored cases); None if nothing is scored."""
    n = matrix.shape[0]
    if n == 0 or n_boot <= 0:
        return None
    (sums,) = resample_sums([matrix], n_boot, _rng(seed, name))
    return _intervals(_statistics(sums, n))


def start_intervals(
    outcomes: Sequence[CaseOutcome], *, n_boot: int, seed: int, by: Breakdown = "level"
) -> Callable[[], dict[str, Any]]:
    """Intervals for the cells of ``by`` (``L0``..``ALL``; ``tag NAME``..``ALL``; ``ALL``) and,
    under ``domains``, every domain's cells (its levels, else ``ALL`` alone).

    Each cell has its own random stream, so cells run on worker threads (numpy releases
    the GIL) while the caller builds the rest of the report; the returned function waits.
    """
    scored = [o for o in outcomes if not o.excluded]
    matrix = outcome_matrix(scored)
    # Each outcome's row: a cell resamples its members' rows, in case order.
    rows_of = {id(o): row for row, o in enumerate(scored)}
    pool = ThreadPoolExecutor(max_workers=min(4, os.cpu_count() or 1))
    pending: dict[tuple[str | None, str], Future[dict[str, list[float]] | None]] = {}
    within: Breakdown = "level" if by == "level" else "none"
    for domain in [None, *sorted({o.domain for o in outcomes})]:
        members = scored if domain is None else [o for o in scored if o.domain == domain]
        names = cell_names(by, (tag for o in outcomes for tag in o.tags)) if domain is None else None
        cells = grouped(members, by if domain is None else within)
        for name in names or cells:
            rows = matrix[[rows_of[id(o)] for o in cells.get(name, [])]]
            label = name if domain is None else f"{domain}/{name}"
            pending[domain, name] = pool.submit(bootstrap_matrix, rows, name=label, n_boot=n_boot, seed=seed)
    pool.shutdown(wait=False)

    def result() -> dict[str, Any]:
        intervals: dict[str, Any] = {
            name: future.result() for (d, name), future in pending.items() if d is None
        }
        intervals["domains"] = {}
        for (domain, name), future in pending.items():
            if domain is not None:
                intervals["domains"].setdefault(domain, {})[name] = future.result()
        return intervals

    return result


class PairedDiff(BaseModel):
    """B minus A on the cases both scored, with a paired bootstrap interval per metric."""

    # Built on first use: ``sp-dspy score`` imports this module but never compares.
    model_config = ConfigDict(defer_build=True)

    n_pairs: int
    a: dict[str, float | None]
    b: dict[str, float | None]
    diff: dict[str, float | None]
    ci: dict[str, list[float] | None]
    ci_note: str | None = Field(
        default=None,
        description=f"Why ``ci`` is empty although cases were paired: fewer than {MIN_CI_PAIRS} of them.",
    )


class McNemarResult(BaseModel):
    """McNemar's test on exact match: ``a_only`` = A right and B wrong, ``b_only`` the reverse."""

    model_config = ConfigDict(defer_build=True)

    n_pairs: int
    a_only: int
    b_only: int
    statistic: float | None
    p_value: float
    method: str


#: Each side's official cell as a comparison shows it.
CELL_KEYS: tuple[str, ...] = ("total", "n_eval", "excluded", "rmr_avg", "rmr_exact", "rdr")


class CellComparison(BaseModel):
    """B against A in one cell (a level or ALL): each side's official cell, the paired differences, McNemar."""

    model_config = ConfigDict(defer_build=True)

    n: int = Field(description="Compared cases in this cell (results on both sides).")
    a: dict[str, Any] = Field(description="A's official cell on the compared cases.")
    b: dict[str, Any] = Field(description="B's official cell on the compared cases.")
    paired: PairedDiff = Field(description="a, b and diff (B - A) on the cases both scored, with CIs.")
    mcnemar: McNemarResult = Field(description="McNemar's test on exact match.")


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
) -> dict[str, CellComparison]:
    """B against A in the cells of ``by`` (``L0``..``ALL``; each ``tag NAME`` and ``ALL``; ``ALL``
    alone), over the ``cases`` both sides have a record for.

    The paired differences (RMR, RMR@1.0, RDR, B - A, 95% paired bootstrap interval) use only
    the cases both sides scored, so a refusal on one side cannot masquerade as an accuracy
    difference; both sides are resampled with the same case draws. McNemar's test of exact
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
            paired=_paired_diff(scored, n_boot=n_boot, seed=seed),
            mcnemar=_mcnemar(pairs if excluded_wrong else scored),
        )
    return cells


def _paired_diff(scored: Sequence[tuple[CaseOutcome, CaseOutcome]], *, n_boot: int, seed: int) -> PairedDiff:
    """B - A of RMR, RMR@1.0 and RDR on pairs both sides scored, with 95% paired bootstrap intervals
    (none, and ``ci_note`` saying so, below ``MIN_CI_PAIRS`` pairs)."""
    out_a, out_b = [x for x, _ in scored], [y for _, y in scored]
    cell_a, cell_b = compute_cell(out_a), compute_cell(out_b)
    a = {m: cell_a[m] for m in CI_METRICS}
    b = {m: cell_b[m] for m in CI_METRICS}
    diff: dict[str, float | None] = {
        m: None if a[m] is None or b[m] is None else round(b[m] - a[m], 2) for m in CI_METRICS
    }
    n = len(scored)
    ci: dict[str, list[float] | None] = dict.fromkeys(CI_METRICS)
    if 0 < n < MIN_CI_PAIRS:
        note = f"not informative (n={n} < {MIN_CI_PAIRS})"  # short: it stands in the interval's column
        return PairedDiff(n_pairs=n, a=a, b=b, diff=diff, ci=ci, ci_note=note)
    if n and n_boot > 0:
        sums_a, sums_b = resample_sums(
            [outcome_matrix(out_a), outcome_matrix(out_b)], n_boot, _rng(seed, "paired")
        )
        stats_a, stats_b = _statistics(sums_a, n), _statistics(sums_b, n)
        ci = dict(_intervals({m: stats_b[m] - stats_a[m] for m in CI_METRICS}))
    return PairedDiff(n_pairs=n, a=a, b=b, diff=diff, ci=ci)


def _mcnemar(pairs: Sequence[tuple[CaseOutcome, CaseOutcome]]) -> McNemarResult:
    """McNemar's test of exact match (RMR@1.0) over ``pairs`` of outcomes (A's, B's)."""
    a_only = sum(1 for x, y in pairs if x.exact and not y.exact)
    b_only = sum(1 for x, y in pairs if y.exact and not x.exact)
    statistic, p_value, method = mcnemar_test(a_only, b_only)
    return McNemarResult(
        n_pairs=len(pairs), a_only=a_only, b_only=b_only, statistic=statistic, p_value=p_value, method=method
    )


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
