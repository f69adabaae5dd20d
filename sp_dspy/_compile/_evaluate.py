"""Scoring candidates: on dev as ``sp-dspy eval`` would, and as the optimizer tries them.

The dev score is the unrounded ``rmr_avg_strict`` (excluded and budget-refused cases at 0). The
recorder keeps the candidates an optimizer tried, which DSPy keeps in locals a budget stop loses.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from sp_dspy._compile._artifact import program_state, state_key
from sp_dspy._compile._budget import BudgetExceeded
from sp_dspy._compile._types import DevScore
from sp_dspy._data import Case
from sp_dspy._lm import closing_transports

N_BOOT = 1000
PRIOR_WEIGHT = 2  # how many examples' worth of the overall mean a candidate's mean is shrunk with


def bootstrap_mean(values: Sequence[float], *, seed: int) -> list[float] | None:
    """95% percentile interval of the mean of ``values`` (x 100, two decimals)."""
    if not values:
        return None
    data = np.asarray(values, dtype=np.float64)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(data), size=(N_BOOT, len(data)))
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

    outputs = asyncio.run(closing_transports(_outputs(program, cases, lm, concurrency)))
    fields = {"id", "violated_rules", "refused", "parse_failed", "error"}
    records = {
        case.id: PolicyRecord(**output.model_dump(include=fields))
        for case, output in zip(cases, outputs, strict=True)
        if output is not None
    }
    outcomes = case_outcomes(cases, records)
    scores = [0.0 if outcome.excluded else case_score(outcome.gt, outcome.pred) for outcome in outcomes]
    cell = compute_cell(outcomes)
    return DevScore(
        score=round(100 * sum(scores) / len(scores), 2) if scores else 0.0,
        ci95=bootstrap_mean(scores, seed=seed),
        n=len(cases),
        excluded=sum(outcome.excluded for outcome in outcomes),
        complete=all(output is not None for output in outputs),
        **{metric: cell[metric] for metric in ("rmr_avg_strict", "rmr_avg", "rmr_exact", "rdr")},
    )


def make_recorder(student_type: type[Any]) -> Any:
    """A ``CandidateRecorder`` for modules of exactly ``student_type``, keeping their ``program_state``."""
    from dspy.utils.callback import BaseCallback

    class CandidateRecorder(BaseCallback):
        def __init__(self) -> None:
            self.states: dict[str, dict[str, Any]] = {}
            self.scores: dict[str, dict[str, float]] = defaultdict(dict)
            self.order: list[str] = []
            self._calls: dict[str, str] = {}
            self._predictions: dict[int, tuple[Any, str]] = {}
            self._lock = threading.Lock()

        def on_module_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
            if type(instance) is not student_type:
                return
            state = program_state(instance)
            key = state_key(state)
            with self._lock:
                if key not in self.states:
                    self.states[key] = state
                    self.order.append(key)
                self._calls[call_id] = key

        def on_module_end(
            self, call_id: str, outputs: Any | None, exception: BaseException | None = None
        ) -> None:
            with self._lock:
                key = self._calls.pop(call_id, None)
                if key is not None and exception is None and outputs is not None:
                    # Trace capture (GEPA's reflective minibatches) makes the module return
                    # ``(prediction, trace)`` and scores the prediction inside.
                    if isinstance(outputs, tuple) and outputs:
                        outputs = outputs[0]
                    self._predictions[id(outputs)] = (outputs, key)

        def metric(self, metric: Callable[..., Any]) -> Callable[..., Any]:
            """``metric`` that also records its score against the candidate that made the prediction."""

            @functools.wraps(metric)
            def recorded(example: Any, prediction: Any, *args: Any, **kwargs: Any) -> Any:
                result = metric(example, prediction, *args, **kwargs)
                uid = getattr(example, "uid", None)
                with self._lock:
                    found = self._predictions.get(id(prediction))
                    if found is not None and found[0] is prediction and uid is not None:
                        score = getattr(result, "score", result)
                        self.scores[found[1]][str(uid)] = float(score)
                return result

            return recorded

        def ranked(self) -> list[str]:
            """Candidate keys, best first, by mean score shrunk towards the overall mean.

            Shrinking keeps a candidate lucky on two examples from outranking one that
            scored well on twenty (minibatches differ). Ties keep discovery order.
            """
            with self._lock:
                scored = {key: list(values.values()) for key, values in self.scores.items() if values}
                order = list(self.order)
            everything = [score for values in scored.values() for score in values]
            prior = sum(everything) / len(everything) if everything else 0.0
            mean = {
                key: (sum(v) + PRIOR_WEIGHT * prior) / (len(v) + PRIOR_WEIGHT) for key, v in scored.items()
            }
            return sorted((key for key in order if key in scored), key=lambda key: -mean[key])

        def best_mean(self) -> float | None:
            """The highest mean score (x 100) of any candidate scored so far, for progress displays."""
            with self._lock:
                means = [sum(v.values()) / len(v) for v in self.scores.values() if v]
            return round(100 * max(means), 2) if means else None

    return CandidateRecorder()
