"""Compiling guard programs with DSPy optimizers: the library behind ``sp-dspy compile``.

:func:`compile_guard` loads data, plans, runs an optimizer recipe under :class:`BudgetCaps`
(enforced per LM call by :func:`budgeted`), selects on dev and writes the artifact.
Importing this package does not import DSPy; the functions that need it do.
"""

from sp_dspy._compile._budget import (
    Budget,
    BudgetCaps,
    BudgetExceeded,
    CompilePlan,
    OptimizerStopped,
    Pricing,
    RoleEstimate,
    Tally,
    budgeted,
    pricing_for,
)
from sp_dspy._compile._data import DEFAULT_RATIOS, CompileData, ids_hash, load_compile_data
from sp_dspy._compile._evaluate import evaluate_on_dev
from sp_dspy._compile._run import CompileError, compile_guard, prepare
from sp_dspy._compile._types import CompileConfig, CompileManifest, CompileOutcome, CompileStatus, DevScore

__all__ = [
    "DEFAULT_RATIOS",
    "Budget",
    "BudgetCaps",
    "BudgetExceeded",
    "CompileConfig",
    "CompileData",
    "CompileError",
    "CompileManifest",
    "CompileOutcome",
    "CompilePlan",
    "CompileStatus",
    "DevScore",
    "OptimizerStopped",
    "Pricing",
    "RoleEstimate",
    "Tally",
    "budgeted",
    "compile_guard",
    "evaluate_on_dev",
    "ids_hash",
    "load_compile_data",
    "prepare",
    "pricing_for",
]
