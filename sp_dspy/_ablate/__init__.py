"""Ablations: one LM, the same cases, several guard variants, one honest comparison.

- :class:`AblationPlan`: what to run (LM, variants, case selection), from flags or a
  YAML ``--plan`` file; saved as ``OUTDIR/plan.json`` and checked on ``--resume``.
- :func:`resolve_variants`: variant names (``official-per-policy``, ``dspy-per-rule``,
  ...) and compiled artifact directories -> :class:`PlannedVariant` rows.
- :func:`run_ablation`: every variant through the eval runner (durable results,
  resume, manifests), then ``summary.json`` and ``report.html`` via the report package.

Importing this package does not import DSPy; running an ablation does.
"""

from ._plan import PLAN_FILE, AblationPlan, build_plan, load_saved_plan, read_plan_file, reconcile, save_plan
from ._run import (
    REPORT_FILE,
    RESULTS_DIR,
    SUMMARY_FILE,
    AblationOutcome,
    VariantRun,
    run_ablation,
    summarise,
    variant_config,
)
from ._variants import DEFAULT_VARIANTS, NAMED_VARIANTS, PlannedVariant, check_artifacts, resolve_variants

__all__ = [
    "DEFAULT_VARIANTS",
    "NAMED_VARIANTS",
    "PLAN_FILE",
    "REPORT_FILE",
    "RESULTS_DIR",
    "SUMMARY_FILE",
    "AblationOutcome",
    "AblationPlan",
    "PlannedVariant",
    "VariantRun",
    "build_plan",
    "check_artifacts",
    "load_saved_plan",
    "read_plan_file",
    "reconcile",
    "resolve_variants",
    "run_ablation",
    "save_plan",
    "summarise",
    "variant_config",
]
