"""Compiling guard programs with DSPy optimizers: the library behind ``sp-dspy compile``.

Importing this package does not import DSPy; the functions that need it do.
"""

from sp_dspy._budget import BudgetCaps
from sp_dspy._compile._budget import CompilePlan
from sp_dspy._compile._data import DEFAULT_RATIOS
from sp_dspy._compile._run import compile_guard
from sp_dspy._compile._types import CompileConfig, CompileOutcome, CompileStatus

__all__ = [
    "DEFAULT_RATIOS",
    "BudgetCaps",
    "CompileConfig",
    "CompileOutcome",
    "CompilePlan",
    "CompileStatus",
    "compile_guard",
]
