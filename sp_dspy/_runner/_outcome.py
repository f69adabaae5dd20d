"""What one eval invocation produced (``run_eval``'s answer), and the manifest's word for how it ended."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .._budget import Spend
from .._data import Case
from .._metrics import ResultSet
from .._run_manifest import ErrorSummary, RunTotals
from ._paths import RunPaths

if TYPE_CHECKING:
    from .._metrics import ScoreReport


@dataclass
class EvalOutcome:
    """What an eval invocation produced; ``results``: the results file as it stands after the run
    (read once, then scored, counted and summarised from memory)."""

    paths: RunPaths
    results_file: Path
    cases: list[Case]
    results: ResultSet = field(default_factory=ResultSet)
    report: ScoreReport | None = None
    interrupted: bool = False
    capped_by: str | None = None  # the cap (max_calls, max_tokens, max_usd) that stopped the run
    spent: Spend | None = None  # what the capped units used (runs with caps only)
    failed: bool = False  # a results write failed (a full disk): the run stopped
    stopped: bool = False  # a lasting failure ended the run early (run_eval raised RunStopped)
    skipped_on_resume: int = 0
    skipped_errors: int = 0  # of those skipped, units whose record is an error
    units_run: int = 0
    errors: ErrorSummary = field(default_factory=ErrorSummary)  # units whose latest record is an error
    totals: RunTotals = field(default_factory=RunTotals)  # over the whole results file


def status_of(outcome: EvalOutcome) -> str:
    """The manifest's word for how the invocation ended."""
    if outcome.failed:
        return "failed"
    if outcome.interrupted:
        return "interrupted"
    if outcome.stopped:
        return "stopped"
    return "capped" if outcome.capped_by else "complete"
