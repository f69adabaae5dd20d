"""The evaluation runner: durable JSONL results, resume, concurrency, manifests."""

from ._config import DataSelection, EvalConfig, build_eval_config
from ._cost import EvalPlan
from ._eval import first_request, plan_run, run_eval, select_cases
from ._failures import RunStopped
from ._identity import first_difference, refuse_changed
from ._paths import RunPaths, new_run_id
from ._store import read_run_results
from ._units import unit_errors, units_of

__all__ = [
    "DataSelection",
    "EvalConfig",
    "EvalPlan",
    "RunPaths",
    "RunStopped",
    "build_eval_config",
    "first_difference",
    "first_request",
    "new_run_id",
    "plan_run",
    "read_run_results",
    "refuse_changed",
    "run_eval",
    "select_cases",
    "unit_errors",
    "units_of",
]
