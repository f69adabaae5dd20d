"""An optimizer's gain over a baseline across its seeds: the figure an experiment's verdict states.

One compile is one draw of the optimizer's randomness, and the test cases are one draw of the
benchmark's units, so the mean gain has two sources of noise. The interval comes from a
two-level (hierarchical) bootstrap: each resample draws the units (the same draws for the
baseline and every seed, so the comparison stays paired), then draws the seeds with
replacement, and takes the mean gain of the drawn seeds. The between-seed spread is thus in
the interval, not only the test-set noise of one lucky compile. The p-value is the bootstrap's
two-sided tail at 0, so the interval excludes 0 exactly when p < 0.05 (up to the resolution of
the draws); across optimizers an experiment adjusts it (``holm``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
from pydantic import BaseModel, Field

from ._bootstrap import cell_rng, outcome_matrix, percentile, resample_sums, unit_matrix, unit_statistics
from ._official import case_outcomes
from ._paired import MIN_CI_PAIRS

if TYPE_CHECKING:
    from .._data import Case
    from ._records import PolicyRecord

#: The metric the verdict is about (RMR, higher is better).
GAIN_METRIC = "rmr_avg"


class SeedGain(BaseModel):
    """The mean RMR gain of an optimizer's seeds over the baseline, with its hierarchical interval."""

    n_seeds: int
    n_pairs: int = Field(description="Cases the baseline and every seed scored (the gain's cases).")
    n_units: int = Field(description="The independent units those cases form (what is resampled).")
    unit: str
    mean: float | None = Field(description="Mean over seeds of seed RMR minus baseline RMR on those cases.")
    ci: list[float] | None = Field(
        description="95% interval: units and seeds resampled (None: nothing to draw)."
    )
    p_value: float | None = Field(description="Two-sided bootstrap p-value of a zero mean gain.")
    p_holm: float | None = Field(
        default=None, description="Holm-adjusted across the experiment's optimizers."
    )
    ci_note: str | None = Field(
        default=None, description=f"Why ``ci`` is empty: fewer than {MIN_CI_PAIRS} units."
    )
    method: str = ""


def seed_gain(
    cases: Sequence[Case],
    baseline: Mapping[str, PolicyRecord],
    seeds: Sequence[Mapping[str, PolicyRecord]],
    *,
    unit: str = "conversation",
    cap_aware: bool = False,
    n_boot: int = 1000,
    seed: int = 0,
) -> SeedGain:
    """The mean gain of ``seeds`` (each a run's records) over ``baseline`` on the cases all scored."""
    sides = [baseline, *seeds]
    outcomes = [case_outcomes(cases, records, cap_aware=cap_aware) for records in sides]
    keep = [i for i in range(len(cases)) if all(not side[i].excluded for side in outcomes)]
    units = [outcomes[0][i].unit for i in keep]
    method = f"hierarchical bootstrap: {unit}s (paired) and seeds resampled, {n_boot} draws"
    empty = SeedGain(
        n_seeds=len(seeds), n_pairs=len(keep), n_units=len(set(units)), unit=unit,
        mean=None, ci=None, p_value=None, method=method,
    )  # fmt: skip
    if not seeds or not keep:
        return empty
    matrices = [unit_matrix(outcome_matrix([side[i] for i in keep]), units) for side in outcomes]
    full = [unit_statistics(matrix.sum(axis=0, keepdims=True))[GAIN_METRIC][0] for matrix in matrices]
    mean = float(np.mean([value - full[0] for value in full[1:]]))
    if len(set(units)) < MIN_CI_PAIRS:  # as a paired comparison withholds it, with the same words
        note = f"not informative ({len(set(units))} {unit}s < {MIN_CI_PAIRS})"
        return empty.model_copy(update={"mean": round(mean, 2), "ci_note": note})
    if n_boot <= 0:
        return empty.model_copy(update={"mean": round(mean, 2)})
    rng = cell_rng(seed, "seed gain")
    sums = resample_sums(matrices, n_boot, rng)
    rmr = np.stack([unit_statistics(s)[GAIN_METRIC] for s in sums])  # (1 + seeds, n_boot)
    gains = rmr[1:] - rmr[0]
    drawn = rng.integers(0, len(seeds), size=(n_boot, len(seeds)))
    means = np.sort(gains[drawn, np.arange(n_boot)[:, None]].mean(axis=1))
    ci = [round(percentile(means, 2.5), 2), round(percentile(means, 97.5), 2)]
    below, above = int((means <= 0).sum()), int((means >= 0).sum())
    p_value = min(1.0, 2 * (min(below, above) + 1) / (n_boot + 1))
    return empty.model_copy(update={"mean": round(mean, 2), "ci": ci, "p_value": p_value})
