"""Scoring a candidate on dev as ``sp-dspy eval`` would: the runner's records, the official metrics.

The dev score is the strict RMR (``rmr_avg_strict`` before its per-tau rounding: excluded and
budget-refused cases at 0) to two decimals, with a 95% bootstrap interval resampling the cases' units (``Case.unit``: conversations,
prompts, groups), as every other interval does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sp_dspy._budget import BudgetExceeded
from sp_dspy._compile._types import DevScore
from sp_dspy._data import Case
from sp_dspy._metrics import TAUS, PolicyRecord, bootstrap_matrix, case_outcomes, compute_cell, outcome_matrix
from sp_dspy._runner import evaluate_cases

N_BOOT = 1000


def evaluate_on_dev(
    program: Any, cases: Sequence[Case], lm: Any, *, concurrency: int = 8, seed: int = 0
) -> DevScore:
    """Run ``program`` on ``cases`` with ``lm`` and score it (see the module docstring).

    A case the budget refused has no record: it scores 0 and leaves the evaluation incomplete.
    """
    records = evaluate_cases(program, cases, lm, concurrency=concurrency, skip_on=(BudgetExceeded,))
    outcomes = case_outcomes(cases, {r.id: r for r in records if isinstance(r, PolicyRecord)})
    matched = sum(sum(o.hits[: len(TAUS)]) for o in outcomes if not o.excluded)
    interval = bootstrap_matrix(
        outcome_matrix(outcomes, strict=True),
        name="dev",
        n_boot=N_BOOT,
        seed=seed,
        units=[outcome.unit for outcome in outcomes],
    )
    cell = compute_cell(outcomes)
    return DevScore(
        score=round(100 * matched / (len(TAUS) * len(outcomes)), 2) if outcomes else 0.0,
        ci95=None if interval is None else interval["rmr_avg"],
        n=len(cases),
        excluded=sum(outcome.excluded for outcome in outcomes),
        complete=len(records) == len(cases),
        **{metric: cell[metric] for metric in ("rmr_avg_strict", "rmr_avg", "rmr_exact", "rdr")},
    )
