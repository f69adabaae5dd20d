"""Result records and the official SafePyramid metrics, digit for digit with the reference scorer.

The bootstrap names load on first use: they need numpy, which a score without
intervals (``--n-boot 0``), a report or a run never imports.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_getattr
from ._official import (
    CELLS,
    TAUS,
    CaseOutcome,
    case_outcomes,
    classify_failure,
    compute_cell,
    level_cells,
    rmr_match,
    tolerance,
)
from ._pvalues import format_p, holm, paired_test_name
from ._reader import read_result_files
from ._records import JudgmentRecord, PolicyRecord, ResultSet
from ._render import render_score_table
from ._score import ScoreReport, resolve_records, score

if TYPE_CHECKING:
    from ._bootstrap import bootstrap_matrix, outcome_matrix, unit_matrix
    from ._paired import CellComparison, PairedDiff, PairedTest, compare_cells, sign_flip_p

__getattr__ = lazy_getattr(
    __name__,
    {
        **dict.fromkeys(["bootstrap_matrix", "outcome_matrix", "unit_matrix"], "._bootstrap"),
        **dict.fromkeys(
            ["CellComparison", "PairedDiff", "PairedTest", "compare_cells", "sign_flip_p"], "._paired"
        ),
    },
    globals(),
)

__all__ = [
    "CELLS",
    "TAUS",
    "CaseOutcome",
    "CellComparison",
    "JudgmentRecord",
    "PairedDiff",
    "PairedTest",
    "PolicyRecord",
    "ResultSet",
    "ScoreReport",
    "bootstrap_matrix",
    "case_outcomes",
    "classify_failure",
    "compare_cells",
    "compute_cell",
    "format_p",
    "holm",
    "level_cells",
    "outcome_matrix",
    "paired_test_name",
    "read_result_files",
    "render_score_table",
    "resolve_records",
    "rmr_match",
    "score",
    "sign_flip_p",
    "tolerance",
    "unit_matrix",
]
