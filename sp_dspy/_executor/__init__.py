"""Plans and the one executor that runs them: evaluation and compile steps, locks, resume, admission."""

from ._eval import run_eval
from ._executor import LedgerFor, Plan, PlanOutcome, execute
from ._steps import (
    CapReached,
    CompileStep,
    EvaluateStep,
    Status,
    Step,
    StepContext,
    caps_left,
    finished_compile,
    finished_results,
)

__all__ = [
    "CapReached",
    "CompileStep",
    "EvaluateStep",
    "LedgerFor",
    "Plan",
    "PlanOutcome",
    "Status",
    "Step",
    "StepContext",
    "caps_left",
    "execute",
    "finished_compile",
    "finished_results",
    "run_eval",
]
