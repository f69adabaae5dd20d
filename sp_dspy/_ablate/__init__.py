"""Ablations: one LM, the same cases, several guard variants, one report (``summary.json``, ``report.html``).

Importing this package does not import DSPy.
"""

from ._plan import PLAN_FILE, build_plan, read_plan_file
from ._run import RESULTS_DIR, AblationOutcome, run_ablation

__all__ = ["PLAN_FILE", "RESULTS_DIR", "AblationOutcome", "build_plan", "read_plan_file", "run_ablation"]
