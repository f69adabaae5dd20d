"""Results where people already look: inspect_ai evaluation logs and MLflow runs.

Both read what a job wrote through the loader ``sp-dspy score`` uses and never score on
their own. inspect_ai and MLflow are optional extras (``sp-dspy[inspect]``,
``sp-dspy[mlflow]``), imported only when an export runs.
"""

from ._inspect import inspect_log, write_inspect_logs
from ._job import ExportConfig, ExportedRun, ExportOutcome, build_export_config, export_results
from ._mlflow import (
    DEFAULT_EXPERIMENT,
    MlflowLogger,
    check_tracking_uri,
    compile_facts,
    log_compile,
    log_variant,
    require_mlflow,
    tracking_uri,
)
from ._scored import ScoredRun, scored_file, scored_run
from ._tracking import (
    LoggedPlan,
    LoggedRun,
    MlflowConfig,
    mlflow_log_compile,
    mlflow_log_eval,
    mlflow_log_plan,
)

__all__ = [
    "DEFAULT_EXPERIMENT",
    "ExportConfig",
    "ExportOutcome",
    "ExportedRun",
    "LoggedPlan",
    "LoggedRun",
    "MlflowConfig",
    "MlflowLogger",
    "ScoredRun",
    "build_export_config",
    "check_tracking_uri",
    "compile_facts",
    "export_results",
    "inspect_log",
    "log_compile",
    "log_variant",
    "mlflow_log_compile",
    "mlflow_log_eval",
    "mlflow_log_plan",
    "require_mlflow",
    "scored_file",
    "scored_run",
    "tracking_uri",
    "write_inspect_logs",
]
