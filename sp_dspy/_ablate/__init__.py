"""Ablations: one LM, the same cases, several guard variants, one report (``summary.json``, ``report.html``).

Importing this package does not import DSPy.
"""

from ._plan import PLAN_FILE, AblationPlan, build_plan, read_plan_file, reconcile, save_plan
from ._run import RESULTS_DIR, AblationOutcome, run_ablation
from ._variants import DEFAULT_VARIANTS, resolve_variants

__all__ = [
    "DEFAULT_VARIANTS",
    "PLAN_FILE",
    "RESULTS_DIR",
    "AblationOutcome",
    "AblationPlan",
    "build_plan",
    "read_plan_file",
    "reconcile",
    "resolve_variants",
    "run_ablation",
    "save_plan",
]
