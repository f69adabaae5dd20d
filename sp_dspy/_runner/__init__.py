"""The evaluation runner: durable JSONL results, resume, concurrency, manifests."""

from ._admission import case_worst_case, unit_worst_case
from ._config import DataSelection, EvalConfig, build_eval_config
from ._cost import EvalPlan, run_pricing
from ._engine import UnitEngine
from ._eval import build_program, evaluate_cases, first_request, plan_run, prepare_evaluation, select_cases
from ._failures import EarlyStop, RunStopped, fix_for
from ._fake_gold import teach_fake
from ._identity import first_difference, refuse_changed
from ._invocation import EvalInvocation, StepInputs
from ._listing import list_runs
from ._outcome import EvalOutcome
from ._paths import RunId, RunLock, RunPaths, new_run_id
from ._store import read_run_results
from ._units import unit_errors, units_of

__all__ = [
    "DataSelection",
    "EarlyStop",
    "EvalConfig",
    "EvalInvocation",
    "EvalOutcome",
    "EvalPlan",
    "RunId",
    "RunLock",
    "RunPaths",
    "RunStopped",
    "StepInputs",
    "UnitEngine",
    "build_eval_config",
    "build_program",
    "case_worst_case",
    "evaluate_cases",
    "first_difference",
    "first_request",
    "fix_for",
    "list_runs",
    "new_run_id",
    "plan_run",
    "prepare_evaluation",
    "read_run_results",
    "refuse_changed",
    "run_pricing",
    "select_cases",
    "teach_fake",
    "unit_errors",
    "unit_worst_case",
    "units_of",
]
