"""Compiling guard programs with DSPy optimizers: the library behind ``sp-dspy compile``.

- :func:`compile_guard`: load data and split, plan, run an optimizer recipe under
  budget caps, select on dev, write the artifact (``program.json``,
  ``manifest.json``, ``prompt.md``, ``splits.json``).
- :class:`CompileConfig`, :class:`BudgetCaps`: what to compile and the caps.
- :class:`Budget`, :func:`budgeted`, :class:`BudgetExceeded`: per-call cap enforcement
  on any ``dspy.LM``.
- :class:`CompilePlan`: the estimated calls, tokens and dollars (``--dry-run``).
- :class:`CompileStatus`: a running compile's phase, spend and best scores (progress).
- :func:`evaluate_on_dev`, :class:`DevScore`: dev scoring with excluded cases as wrong.

Modules, by concept: ``_types`` (every data type of a compile), ``_budget`` (caps,
budget, budgeted LM, plan), ``_data`` (train/dev cases and the student),
``_evaluate`` (dev scoring and the candidate recorder), ``_artifact`` (the artifact
directory), ``_run`` (the orchestration and the library log).

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
