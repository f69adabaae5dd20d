"""Score a guard on the dev cases exactly as ``sp-dspy eval`` would, excluded cases as wrong.

Each dev case goes through ``programs.run_case`` (the runner's own path: adapter
parse failures become ``failed``, refusals ``refused``, LM errors ``error``) and is
scored with the official case outcome. The selection score is the mean case score
of ``optimizers.case_score`` over *all* dev cases with excluded ones at 0, i.e. the
unrounded ``rmr_avg_strict``; the official cells are reported next to it. The 95%
interval is a percentile bootstrap over dev cases of that same mean.

A case whose calls the budget refused is not run and counts as excluded; the
evaluation is then marked incomplete and is not used to pick a winner.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel

from sp_dspy._compile._budget import BudgetExceeded
from sp_dspy._data import Case

N_BOOT = 1000


class DevScore(BaseModel):
    """A program's dev-split result."""

    score: float
    ci95: list[float] | None
    n: int
    excluded: int
    complete: bool
    rmr_avg_strict: float | None
    rmr_avg: float | None
    rmr_exact: float | None
    rdr: float | None

    def describe(self) -> str:
        """``"33.33 (95% CI 0.00-66.67)"``, marked when some cases were not run."""
        text = f"{self.score:.2f}"
        if self.ci95 is not None:
            text += f" (95% CI {self.ci95[0]:.2f}-{self.ci95[1]:.2f})"
        return text if self.complete else text + " [incomplete: a cap stopped it]"


def bootstrap_mean(values: Sequence[float], *, seed: int, n_boot: int = N_BOOT) -> list[float] | None:
    """95% percentile interval of the mean of ``values`` (x 100, two decimals)."""
    if not values:
        return None
    data = np.asarray(values, dtype=np.float64)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(data), size=(n_boot, len(data)))
    means = data[draws].mean(axis=1) * 100
    low, high = np.percentile(means, [2.5, 97.5])
    return [round(float(low), 2), round(float(high), 2)]


async def _outputs(program: Any, cases: Sequence[Case], lm: Any, concurrency: int) -> list[Any | None]:
    from programs import run_case

    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(case: Case) -> Any | None:
        async with gate:
            try:
                return await run_case(program, case, lm)
            except BudgetExceeded:
                return None

    return list(await asyncio.gather(*(one(case) for case in cases)))


def evaluate_on_dev(
    program: Any, cases: Sequence[Case], lm: Any, *, concurrency: int = 8, seed: int = 0
) -> DevScore:
    """Run ``program`` on ``cases`` with ``lm`` and score it (see the module docstring)."""
    from optimizers import case_score
    from sp_dspy._metrics import PolicyRecord, case_outcomes, compute_cell

    outputs = asyncio.run(_outputs(program, cases, lm, concurrency))
    records = {}
    for case, output in zip(cases, outputs, strict=True):
        if output is not None:
            records[case.id] = PolicyRecord(
                id=case.id,
                violated_rules=output.violated_rules,
                refused=output.refused,
                parse_failed=output.parse_failed,
                error=output.error,
            )
    outcomes = case_outcomes(cases, records)
    scores = [0.0 if outcome.excluded else case_score(outcome.gt, outcome.pred) for outcome in outcomes]
    cell = compute_cell(outcomes)
    return DevScore(
        score=round(100 * sum(scores) / len(scores), 2) if scores else 0.0,
        ci95=bootstrap_mean(scores, seed=seed),
        n=len(cases),
        excluded=sum(outcome.excluded for outcome in outcomes),
        complete=all(output is not None for output in outputs),
        rmr_avg_strict=cell["rmr_avg_strict"],
        rmr_avg=cell["rmr_avg"],
        rmr_exact=cell["rmr_exact"],
        rdr=cell["rdr"],
    )
