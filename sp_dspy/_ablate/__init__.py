"""Ablations and experiments: one LM, the same cases, several guard variants (an experiment's
include compiles), one report (``summary.json``, ``report.html``).

Importing this package does not import DSPy.
"""

from ._experiment import ExperimentOutcome, run_experiment
from ._plan import (
    EXPERIMENT_DATA_KEYS,
    EXPERIMENT_FILE,
    PLAN_FILE,
    AblationPlan,
    ExperimentPlan,
    build_experiment,
    build_plan,
    read_experiment_file,
    read_plan_file,
)
from ._price import ExperimentPrice, price_experiment
from ._run import RESULTS_DIR, AblationOutcome, run_ablation

__all__ = [
    "EXPERIMENT_DATA_KEYS",
    "EXPERIMENT_FILE",
    "PLAN_FILE",
    "RESULTS_DIR",
    "AblationOutcome",
    "AblationPlan",
    "ExperimentOutcome",
    "ExperimentPlan",
    "ExperimentPrice",
    "build_experiment",
    "build_plan",
    "price_experiment",
    "read_experiment_file",
    "read_plan_file",
    "run_ablation",
    "run_experiment",
]
