"""The student of a compile: the DSPy module an optimizer trains, with its examples and metrics.

The per-rule student is the judge alone, wrapped so its state keys are exactly
``PerRuleGuard``'s. This module imports DSPy (through the programs and optimizers), so a
compile imports it when it starts, not when ``sp_dspy._compile`` is imported.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import dspy

from sp_dspy import optimizers
from sp_dspy._data import Case
from sp_dspy.programs import make_program


class JudgeProgram(dspy.Module):
    """A per-rule judge on its own: inputs of one target, output its verdict."""

    def __init__(self, judge: Any) -> None:
        super().__init__()
        self.judge = judge

    def forward(self, **inputs: Any) -> Any:
        return self.judge(**inputs)

    async def aforward(self, **inputs: Any) -> Any:
        return await self.judge.acall(**inputs)


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

    def guard(self, state: dict[str, Any]) -> Any:
        """A fresh guard program (``make_program``) loaded with ``state``."""
        guard: Any = make_program(self.name, self.protocol)
        guard.load_state(state)
        return guard


def build_student(protocol: str, cot: bool, train: Sequence[Case], dev: Sequence[Case]) -> Student:
    """The student of ``protocol`` (``dspy-cot`` programs when ``cot``) with its examples.

    Per-rule, only the judge trains, on single judgments; the compile still selects whole guards.
    """
    name = "dspy-cot" if cot else "dspy"
    guard: Any = make_program(name, protocol)
    if protocol == "per-policy":
        module, examples = guard, optimizers.policy_examples
        metric, feedback = optimizers.case_metric, optimizers.policy_feedback
    else:
        module, examples = JudgeProgram(guard.judge), optimizers.judgment_examples
        metric, feedback = optimizers.judgment_metric, optimizers.judgment_feedback
    return Student(name, protocol, module, examples(train), examples(dev), metric, feedback)
