"""Column sums of bootstrap resamples of a small non-negative integer matrix, without
materialising the resamples: the columns are bit-packed into one int64 word per row,
so one gather and one add per draw give all of them, in cache-sized chunks of draws.
The sums equal ``_weights(...) @ matrix`` exactly (the route when columns need more
than 63 bits), and the draw stream does not depend on the chunk size.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: Draws taken per chunk (small enough for the CPU cache).
_CHUNK_DRAWS = 1 << 16
_WORD_BITS = 63


def _weights(n: int, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """(n_boot, n) multiplicities of each case in each resample (one bincount, no gathers)."""
    draws = rng.integers(0, n, size=(n_boot, n), dtype=np.int32)
    offsets = (draws + (np.arange(n_boot, dtype=np.int64) * n)[:, None]).ravel()
    return np.bincount(offsets, minlength=n_boot * n).reshape(n_boot, n)


def _pack(matrix: np.ndarray) -> tuple[list[np.ndarray], list[tuple[int, int, int]]] | None:
    """The columns bit-packed into int64 words, and each column's (word, shift, bits).

    A column gets the bits of ``max * n``, so no resample sum carries into the next
    column; None when a column is negative or needs more than 63 bits.
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
                # Draws lie in [0, n), so "clip" never moves one ("raise" takes a slow buffered cast).
                np.take(word, draws, out=out, mode="clip")
                out.sum(axis=1, out=total[start:stop])
    return [
        np.stack([(sums[w] >> shift) & ((1 << bits) - 1) for w, shift, bits in layout], axis=1)
        for (_, layout), sums in zip(packed, word_sums, strict=True)
    ]
