"""What the optimizer compiles for each protocol, and how the result becomes a guard again.

Per-policy: the guard itself (one predictor, one call per case), on case examples
with the case score.

Per-rule: only the judge. Target building and aggregation are fixed by the
protocol, so optimizing the whole ``PerRuleGuard`` on case examples would spend
15-20 judge calls per example to learn about one predictor, and bootstrapped demos
would mix judgments of different rules. Instead the judge is wrapped in a
one-predictor ``JudgeProgram`` whose attribute is also called ``judge``: its state
keys (``judge``, or ``judge.predict`` with chain of thought) are exactly those of
``PerRuleGuard``, so a compiled judge's state loads into a fresh guard as it is.
It trains on single judgments (``target_examples`` plus interaction labels) with the
judgment score; the compile still scores and selects whole guards on dev cases.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sp_dspy._data import Case


@functools.cache
def judge_program_class() -> type[Any]:
    import dspy

    class JudgeProgram(dspy.Module):
        """A per-rule judge on its own: inputs of one target, output its verdict."""

        def __init__(self, judge: Any) -> None:
            super().__init__()
            self.judge = judge

        def forward(self, **inputs: Any) -> Any:
            return self.judge(**inputs)

        async def aforward(self, **inputs: Any) -> Any:
            return await self.judge.acall(**inputs)

    return JudgeProgram


@dataclass
class Student:
    """The module an optimizer compiles, its training data and its metrics."""

    name: str
    protocol: str
    module: Any
    train: list[Any]
    dev: list[Any]
    metric: Callable[..., Any]
    feedback: Callable[..., Any]

    def guard(self, state: dict[str, Any] | None = None) -> Any:
        """A fresh guard program (``make_program``), loaded with ``state`` when given."""
        from programs import make_program

        guard: Any = make_program(self.name, self.protocol)
        if state is not None:
            guard.load_state(state)
        return guard


def build_student(protocol: str, cot: bool, train: Sequence[Case], dev: Sequence[Case]) -> Student:
    """The student of ``protocol`` (``dspy-cot`` programs when ``cot``) with its examples."""
    from optimizers import (
        case_metric,
        judgment_examples,
        judgment_feedback,
        judgment_metric,
        policy_examples,
        policy_feedback,
    )
    from programs import make_program

    name = "dspy-cot" if cot else "dspy"
    guard: Any = make_program(name, protocol)
    if protocol == "per-policy":
        return Student(
            name, protocol, guard, policy_examples(train), policy_examples(dev), case_metric, policy_feedback
        )
    module = judge_program_class()(guard.judge)
    return Student(
        name,
        protocol,
        module,
        judgment_examples(train),
        judgment_examples(dev),
        judgment_metric,
        judgment_feedback,
    )
