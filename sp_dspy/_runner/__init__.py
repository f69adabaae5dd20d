"""The evaluation runner: durable JSONL results, resume, concurrency, manifests."""

from ._config import DataSelection, EvalConfig, build_eval_config
from ._cost import EvalPlan
from ._eval import first_request, plan_run, run_eval
from ._paths import new_run_id
from ._store import read_run_results

__all__ = [
    "DataSelection",
    "EvalConfig",
    "EvalPlan",
    "build_eval_config",
    "first_request",
    "new_run_id",
    "plan_run",
    "read_run_results",
    "run_eval",
]
