"""One variant's results as ``sp-dspy score`` sees them, the input of every export.

An export never scores on its own: a file is scored by ``score``'s own job (``score_results``,
``scored_file``), the per-case outcomes come from ``case_outcomes`` and the cells from ``score``,
on the cases the same loader selects.
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
from .._run_manifest import RecordedRun, run_of
from .._scoring import Note, Notify, RecordedSelection, build_score_config, score_results


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


def scored_file(
    file: Path,
    *,
    data: RecordedSelection | None = None,
    cap_aware: bool = False,
    skip_bad_lines: bool = False,
    seed: int = 0,
    n_boot: int = 1000,
    label: str | None = None,
    notify: Notify | None = None,
) -> ScoredRun:
    """One results file scored by ``sp-dspy score FILE``'s own job (``score_results``: refused the same
    way); ``notify`` gets the notes said as the data loads, then a warning of the malformed lines skipped."""
    config = build_score_config(
        {"files": [file], "data": data or RecordedSelection(), "cap_aware": cap_aware,
         "skip_bad_lines": skip_bad_lines, "seed": seed, "n_boot": n_boot}
    )  # fmt: skip
    scored = score_results(config, notify=notify)
    if scored.results.bad_lines and notify is not None:
        notify(Note(f"{file}: {scored.results.bad_lines} malformed result line(s) skipped", warning=True))
    return scored_run(
        label or file.stem,
        (file,),
        scored.results,
        benchmark=scored.dataset.benchmark,
        dataset_source=str(scored.dataset.source),
        cases=tuple(scored.cases),
        report=scored.report,
        recorded=run_of(file),
        cap_aware=cap_aware,
    )
