"""One variant's results as ``sp-dspy score`` sees them, the input of every export.

An export never scores on its own: the per-case outcomes come from ``case_outcomes`` and the
cells from ``score``, the functions ``score`` itself runs, on the cases the same loader selects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .._data import Case
from .._metrics import (
    CaseOutcome,
    JudgmentRecord,
    PolicyRecord,
    ResultSet,
    ScoreReport,
    case_outcomes,
    resolve_records,
)
from .._run_manifest import RecordedRun


@dataclass(frozen=True)
class ScoredRun:
    """A variant's cases with its records, their outcomes and its score report.

    ``records`` are per-policy records (a per-rule run's judgments aggregated the way ``score``
    aggregates them); ``judgments`` are a per-rule run's verdicts by case id.
    """

    label: str
    files: tuple[Path, ...]
    benchmark: str
    dataset_source: str
    cases: tuple[Case, ...]
    records: dict[str, PolicyRecord]
    outcomes: tuple[CaseOutcome, ...]
    report: ScoreReport
    recorded: RecordedRun | None
    cap_aware: bool = False
    judgments: dict[str, list[JudgmentRecord]] = field(default_factory=dict)

    @property
    def per_rule(self) -> bool:
        return bool(self.judgments)


def scored_run(
    label: str,
    files: tuple[Path, ...],
    results: ResultSet,
    *,
    benchmark: str,
    dataset_source: str,
    cases: tuple[Case, ...],
    report: ScoreReport,
    recorded: RecordedRun | None,
    cap_aware: bool = False,
) -> ScoredRun:
    """The outcomes of ``cases`` under ``results``, as ``score`` computed ``report`` from them."""
    records = resolve_records(cases, results)
    judgments: dict[str, list[JudgmentRecord]] = {}
    for judgment in results.judgments:
        judgments.setdefault(judgment.cid, []).append(judgment)
    return ScoredRun(
        label=label,
        files=files,
        benchmark=benchmark,
        dataset_source=dataset_source,
        cases=cases,
        records=records,
        outcomes=tuple(case_outcomes(cases, records, cap_aware=cap_aware)),
        report=report,
        recorded=recorded,
        cap_aware=cap_aware,
        judgments=judgments,
    )
