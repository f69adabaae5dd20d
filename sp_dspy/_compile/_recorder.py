"""``CandidateRecorder``: the candidates an optimizer tried, which DSPy keeps in locals a budget stop loses.

A DSPy callback, so this module imports DSPy: ``compile_guard`` imports it when it runs.
"""

from __future__ import annotations

import functools
import threading
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from dspy.utils.callback import BaseCallback

from sp_dspy._compile._artifact import program_state, state_key

PRIOR_WEIGHT = 2  # how many examples' worth of the overall mean a candidate's mean is shrunk with


class CandidateRecorder(BaseCallback):
    """Keeps the ``program_state`` of every module of exactly ``student_type`` that runs, and the
    optimizer metric's score of each of its predictions (through :meth:`metric`)."""

    def __init__(self, student_type: type[Any]) -> None:
        self.student_type = student_type
        self.states: dict[str, dict[str, Any]] = {}
        self.scores: dict[str, dict[str, float]] = defaultdict(dict)
        self.order: list[str] = []
        self._calls: dict[str, str] = {}
        self._predictions: dict[int, tuple[Any, str]] = {}
        self._lock = threading.Lock()

    def on_module_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
        if type(instance) is not self.student_type:
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
        mean = {key: (sum(v) + PRIOR_WEIGHT * prior) / (len(v) + PRIOR_WEIGHT) for key, v in scored.items()}
        return sorted((key for key in order if key in scored), key=lambda key: -mean[key])

    def best_mean(self) -> float | None:
        """The highest mean score (x 100) of any candidate scored so far, for progress displays."""
        with self._lock:
            means = [sum(v.values()) / len(v) for v in self.scores.values() if v]
        return round(100 * max(means), 2) if means else None
