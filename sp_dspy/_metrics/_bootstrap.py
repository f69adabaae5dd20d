"""Confidence intervals and paired tests for the official metrics.

The reference harness reports point estimates only; at 100 cases per domain x level
a 5-point RMR gap can be noise. Intervals are percentile bootstraps over the *scored*
cases of a cell (excluded cases are in no denominator, so they are not resampled),
drawn by the benchmark's independent unit (``Case.unit``: a SafePyramid conversation
with all its levels, a PKU-SafeRLHF prompt with both responses, a custom case's group):
a conversation's L0/L1/L2 cases share one dialogue and mostly one outcome, so drawing
them one by one would count one piece of evidence three times and narrow the ALL
interval by up to sqrt(3). Every statistic is a ratio of per-resample column sums of a
small integer matrix (one row per unit, its first column the unit's case count);
``resample_sums`` computes them without materialising the resamples.

Seeding: each cell draws from ``default_rng([seed, crc32(cell name)])``, so adding a
domain or a level filter never shifts another cell's interval. The draws are the
same ``integers(0, n, (n_boot, n), int32)`` stream whether they are taken at once or
chunk by chunk, so the intervals do not depend on the chunk size.
"""

from __future__ import annotations

import math
import os
import zlib
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from ._official import TAUS, Breakdown, CaseOutcome, cell_names, grouped

CI_METRICS: tuple[str, ...] = ("rmr_avg", "rmr_exact", "rdr")

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


def unit_matrix(matrix: np.ndarray, units: Sequence[str] | None = None) -> np.ndarray:
    """One row per unit (first-seen order): its rows' count, then the sums of their columns.

    ``units[i]`` names row ``i``'s unit; ``None``: every row is its own unit (the case bootstrap).
    Two matrices summed with the same ``units`` list have their unit rows in the same order,
    so the same draws resample the same units on both sides of a paired comparison.
    """
    n = matrix.shape[0]
    if units is None:
        return np.concatenate([np.ones((n, 1), dtype=np.int64), matrix.astype(np.int64)], axis=1)
    if len(units) != n:
        raise ValueError(f"unit_matrix: {len(units)} unit names for {n} rows")
    index: dict[str, int] = {}
    codes = np.fromiter((index.setdefault(unit, len(index)) for unit in units), dtype=np.intp, count=n)
    out = np.zeros((len(index), matrix.shape[1] + 1), dtype=np.int64)
    np.add.at(out[:, 0], codes, 1)
    np.add.at(out[:, 1:], codes, matrix.astype(np.int64))
    return out


def unit_statistics(sums: np.ndarray) -> dict[str, np.ndarray]:
    """Per-resample RMR, RMR@1.0 and RDR (unrounded) from the column sums of a ``unit_matrix``."""
    sums = sums.astype(np.float64)
    n, disagreement, union = sums[:, 0], sums[:, 3], sums[:, 4]
    rdr = np.divide(100.0 * disagreement, union, out=np.zeros_like(union), where=union > 0)
    return {"rmr_avg": 100.0 * sums[:, 1] / (len(TAUS) * n), "rmr_exact": 100.0 * sums[:, 2] / n, "rdr": rdr}


def percentile_intervals(stats: Mapping[str, np.ndarray]) -> dict[str, list[float]]:
    """2.5th and 97.5th percentile of each metric, rounded to 2 decimals."""
    rows = np.sort(np.stack([stats[metric] for metric in CI_METRICS]), axis=1)
    return {
        metric: [round(percentile(rows[i], 2.5), 2), round(percentile(rows[i], 97.5), 2)]
        for i, metric in enumerate(CI_METRICS)
    }


def percentile(ordered: np.ndarray, q: float) -> float:
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


def cell_rng(seed: int, name: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(name.encode("utf-8"))])


def bootstrap_matrix(
    matrix: np.ndarray,
    *,
    name: str,
    n_boot: int = 1000,
    seed: int = 0,
    units: Sequence[str] | None = None,
) -> dict[str, list[float]] | None:
    """95% percentile intervals of ``rmr_avg``, ``rmr_exact`` and ``rdr`` from an ``outcome_matrix``
    (rows = the cell's scored cases), resampling whole ``units`` (row ``i`` belongs to
    ``units[i]``; ``None``: each case alone); None if nothing is scored."""
    if matrix.shape[0] == 0 or n_boot <= 0:
        return None
    (sums,) = resample_sums([unit_matrix(matrix, units)], n_boot, cell_rng(seed, name))
    return percentile_intervals(unit_statistics(sums))


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
            members_of_cell = cells.get(name, [])
            rows = matrix[[rows_of[id(o)] for o in members_of_cell]]
            label = name if domain is None else f"{domain}/{name}"
            units = [o.unit for o in members_of_cell]
            pending[domain, name] = pool.submit(
                bootstrap_matrix, rows, name=label, n_boot=n_boot, seed=seed, units=units
            )
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
