"""Column sums of bootstrap resamples, without materialising the resamples.

A resample of ``n`` rows is ``n`` draws from ``integers(0, n)``; what the intervals
need is each resample's column sums of a small non-negative integer matrix. The
columns are bit-packed into one int64 word per row (as many bits per column as its
largest possible sum needs), so one gather and one add per draw give all of them;
draws are taken in chunks that stay in the CPU cache. The sums are exact integers,
equal to the multiplicity-matrix product ``_weights(...) @ matrix`` they replaced,
which remains the route when the columns do not fit in 63 bits.

The draws are the same ``integers(0, n, (n_boot, n), int32)`` stream whether they
are taken at once or chunk by chunk, so results do not depend on the chunk size
(``tests/test_metrics_bootstrap.py`` checks the equality).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: Draws taken per chunk: 256 kB of indices and 512 kB of gathered words.
_CHUNK_DRAWS = 1 << 16
_WORD_BITS = 63


def _weights(n: int, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """(n_boot, n) multiplicities of each case in each resample (one bincount, no gathers)."""
    draws = rng.integers(0, n, size=(n_boot, n), dtype=np.int32)
    offsets = (draws + (np.arange(n_boot, dtype=np.int64) * n)[:, None]).ravel()
    return np.bincount(offsets, minlength=n_boot * n).reshape(n_boot, n)


def _pack(matrix: np.ndarray) -> tuple[list[np.ndarray], list[tuple[int, int, int]]] | None:
    """The columns bit-packed into int64 words, and each column's (word, shift, bits).

    A column whose resample sum can reach ``max * n`` gets that many bits, so the sum
    of any resample never carries into the next column. None when a column is
    negative or needs more than 63 bits (then the caller multiplies instead).
    """
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
    """Per matrix, its (n_boot, columns) sums over the same ``n_boot`` resamples of its rows."""
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
                # Draws lie in [0, n), so "clip" never moves one; the default "raise"
                # sends int32 indices through a buffered cast, six times slower.
                np.take(word, draws, out=out, mode="clip")
                out.sum(axis=1, out=total[start:stop])
    return [
        np.stack([(sums[w] >> shift) & ((1 << bits) - 1) for w, shift, bits in layout], axis=1)
        for (_, layout), sums in zip(packed, word_sums, strict=True)
    ]
