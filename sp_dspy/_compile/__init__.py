"""Compiling guard programs with DSPy optimizers: the library behind ``sp-dspy compile``.

Importing this package does not import DSPy; the functions that need it do.
"""

from sp_dspy._compile._budget import Budget, BudgetCaps, BudgetExceeded, CompilePlan, Tally, budgeted
from sp_dspy._compile._data import ids_hash
from sp_dspy._compile._evaluate import evaluate_on_dev
from sp_dspy._compile._run import CompileError, compile_guard
from sp_dspy._compile._types import CompileConfig, CompileOutcome, CompileStatus, DevScore

__all__ = [
    "Budget",
    "BudgetCaps",
    "BudgetExceeded",
    "CompileConfig",
    "CompileError",
    "CompileOutcome",
    "CompilePlan",
    "CompileStatus",
    "DevScore",
    "Tally",
    "budgeted",
    "compile_guard",
    "evaluate_on_dev",
    "ids_hash",
]
