"""The evaluation runner: durable JSONL results, resume, concurrency, manifests."""

from ._config import DataSelection, EvalConfig, build_eval_config
from ._cost import EvalPlan
from ._eval import first_request, plan_run, prepare_evaluation, select_cases
from ._failures import RunStopped
from ._identity import first_difference, refuse_changed
from ._invocation import EvalInvocation, StepInputs
from ._outcome import EvalOutcome
from ._paths import RunLock, RunPaths, new_run_id
from ._store import read_run_results
from ._units import unit_errors, units_of

__all__ = [
    "DataSelection",
    "EvalConfig",
    "EvalInvocation",
    "EvalOutcome",
    "EvalPlan",
    "RunLock",
    "RunPaths",
    "RunStopped",
    "StepInputs",
    "build_eval_config",
    "first_difference",
    "first_request",
    "new_run_id",
    "plan_run",
    "prepare_evaluation",
    "read_run_results",
    "refuse_changed",
    "select_cases",
    "unit_errors",
    "units_of",
]
