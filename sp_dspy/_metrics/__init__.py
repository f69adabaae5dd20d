"""Result records and the official SafePyramid metrics, digit for digit with the reference scorer.

The bootstrap, paired and seed-gain names load on first use: they need numpy, which a score
without intervals (``--n-boot 0``), a report or a run never imports; so do the ``--fail-under``
gate's, which only the commands that take the flag use.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_getattr
from ._official import (
    CELLS,
    LEVELS,
    TAUS,
    TAUS_FULL,
    Breakdown,
    CaseOutcome,
    case_outcomes,
    cell_names,
    cells_of,
    classify_failure,
    compute_cell,
    error_types,
    grouped,
    level_cells,
    rmr_match,
    tau_key,
    tolerance,
)
from ._per_rule import TARGET_TYPES
from ._policy_view import PolicyView, RuleCounts, percent, policy_view
from ._pvalues import format_p, holm, paired_test_name
from ._reader import read_result_files
from ._records import JudgmentRecord, PolicyRecord, ResultSet
from ._render import (
    binary_table,
    cell_text,
    headline_table,
    interval_text,
    per_rule_table,
    render_score_table,
    rule_table,
)
from ._score import ScoreReport, resolve_records, score

if TYPE_CHECKING:
    from ._bootstrap import CI_METRICS, bootstrap_matrix, outcome_matrix, unit_matrix
    from ._gate import EXIT_BELOW_THRESHOLD, Threshold, check_cells, parse_threshold, unmet
    from ._paired import CellComparison, PairedDiff, PairedTest, compare_cells, sign_flip_p
    from ._seed_gain import SeedGain, seed_gain

__getattr__ = lazy_getattr(
    __name__,
    {
        **dict.fromkeys(["CI_METRICS", "bootstrap_matrix", "outcome_matrix", "unit_matrix"], "._bootstrap"),
        **dict.fromkeys(
            ["CellComparison", "PairedDiff", "PairedTest", "compare_cells", "sign_flip_p"], "._paired"
        ),
        **dict.fromkeys(["SeedGain", "seed_gain"], "._seed_gain"),
        **dict.fromkeys(
            ["EXIT_BELOW_THRESHOLD", "Threshold", "check_cells", "parse_threshold", "unmet"], "._gate"
        ),
    },
    globals(),
)

__all__ = [
    "CELLS",
    "CI_METRICS",
    "EXIT_BELOW_THRESHOLD",
    "LEVELS",
    "TARGET_TYPES",
    "TAUS",
    "TAUS_FULL",
    "Breakdown",
    "CaseOutcome",
    "CellComparison",
    "JudgmentRecord",
    "PairedDiff",
    "PairedTest",
    "PolicyRecord",
    "PolicyView",
    "ResultSet",
    "RuleCounts",
    "ScoreReport",
    "SeedGain",
    "Threshold",
    "binary_table",
    "bootstrap_matrix",
    "case_outcomes",
    "cell_names",
    "cell_text",
    "cells_of",
    "check_cells",
    "classify_failure",
    "compare_cells",
    "compute_cell",
    "error_types",
    "format_p",
    "grouped",
    "headline_table",
    "holm",
    "interval_text",
    "level_cells",
    "outcome_matrix",
    "paired_test_name",
    "parse_threshold",
    "per_rule_table",
    "percent",
    "policy_view",
    "read_result_files",
    "render_score_table",
    "resolve_records",
    "rmr_match",
    "rule_table",
    "score",
    "seed_gain",
    "sign_flip_p",
    "tau_key",
    "tolerance",
    "unit_matrix",
    "unmet",
]
