"""The evaluation runner: durable JSONL results, resume, concurrency, manifests."""

from ._config import DataSelection, EvalConfig, build_eval_config
from ._cost import EvalPlan
from ._eval import EvalOutcome, first_request, plan_run, run_eval, select_cases
from ._paths import RunPaths, new_run_id, resolve_run
from ._store import JsonlStore, iter_records, repair_torn_tail

__all__ = [
    "DataSelection",
    "EvalConfig",
    "EvalOutcome",
    "EvalPlan",
    "JsonlStore",
    "RunPaths",
    "build_eval_config",
    "first_request",
    "iter_records",
    "new_run_id",
    "plan_run",
    "repair_torn_tail",
    "resolve_run",
    "run_eval",
    "select_cases",
]
