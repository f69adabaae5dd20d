"""``sp-dspy score``'s job from Python: ``score_results(ScoreConfig(files=[...]))``.

The result files are read, the dataset and cases their runs selected loaded (``load_for_results``),
and the official metrics computed with the benchmark kind's cells, unit and extra scores. What the
command prints and writes (its tables, its ``--json`` document, its warnings) is data here, so a
Python caller gets the very numbers the command shows. ``export`` scores each file through it too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from .._benchmarks import benchmark_kind
from .._metrics import score
from ._config import NBoot, config_from_flags
from ._recorded import Note, Notify, RecordedSelection, load_for_results, read_results

if TYPE_CHECKING:
    from .._benchmarks import BenchmarkKind
    from .._data import Benchmark, Case
    from .._metrics import ResultSet, ScoreReport


class ScoreConfig(BaseModel):
    """What ``sp-dspy score FILES`` scores, and how (each field is the flag of its name)."""

    model_config = ConfigDict(extra="forbid")

    files: list[Path] = Field(min_length=1)  # a later file wins on the same case id
    data: RecordedSelection = Field(default_factory=RecordedSelection)
    per_rule: bool = False  # require per-rule judgment files (auto-detected otherwise)
    cap_aware: bool = False  # also exclude completions of >= 65,000 tokens
    skip_bad_lines: bool = False  # count malformed result lines instead of failing
    seed: int = 0
    n_boot: NBoot = 1000  # bootstrap resamples for the 95% CIs (0: none)


def build_score_config(settings: dict[str, Any]) -> ScoreConfig:
    """``settings`` (the flags' values by field name) as a ``ScoreConfig``; a bad value is one
    ``ConfigError`` naming its flag (``--n-boot: ...``)."""
    return config_from_flags(ScoreConfig, settings, arguments={"files": "RESULTS"})


@dataclass(frozen=True)
class ScoredResults:
    """The result files scored: ``report`` (the official cells), ``extra`` (the benchmark kind's own
    sections of the JSON document: PKU-SafeRLHF's ``pku``, custom's ``tags``), the ``dataset`` loaded
    and the ``cases`` scored (``described`` in words), the ``results`` read, the ``notes`` said while
    the data loaded, and the ``warnings`` the command prints after its tables."""

    report: ScoreReport
    extra: dict[str, Any]
    dataset: Benchmark
    cases: list[Case]
    described: str
    results: ResultSet
    notes: list[Note] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def kind(self) -> BenchmarkKind:
        """The benchmark kind the cases belong to (its tables render ``report`` and ``extra``)."""
        return benchmark_kind(self.dataset.benchmark)

    def document(self) -> dict[str, Any]:
        """The ``--json`` document: the report's JSON with the kind's sections."""
        return {**self.report.to_json_dict(), **self.extra}

    def to_json(self) -> str:
        """The ``--json`` document as the command writes it."""
        return json.dumps(self.document(), indent=2, ensure_ascii=False)


def score_results(config: ScoreConfig, *, notify: Notify | None = None) -> ScoredResults:
    """Score ``config.files`` as ``sp-dspy score`` does: on the dataset and cases their runs recorded
    (or ``config.data``'s), with the benchmark kind's cells and unit. ``notify`` gets each note as
    the data loads (the command prints it on stderr); the notes are kept in the result too."""
    notes: list[Note] = []

    def say(note: Note) -> None:
        notes.append(note)
        if notify is not None:
            notify(note)

    results = read_results(config.files, skip_bad_lines=config.skip_bad_lines, allow_empty=False)
    data = load_for_results([config.files], [results], data=config.data, notify=say)
    loaded, cases = data.loaded, data.cases
    kind = benchmark_kind(loaded.benchmark)
    report = score(
        cases, results, cap_aware=config.cap_aware, per_rule=config.per_rule, ci=config.n_boot > 0,
        seed=config.seed, n_boot=config.n_boot, all_ids=[c.id for c in loaded.cases], by=kind.breakdown,
        unit=kind.unit,
    )  # fmt: skip
    extra = kind.extra_scores(cases, results, cap_aware=config.cap_aware, per_rule=config.per_rule)
    return ScoredResults(
        report, extra, loaded, cases, data.described, results, notes, _warnings(loaded, results, report)
    )


def _warnings(loaded: Benchmark, results: ResultSet, report: ScoreReport) -> list[str]:
    """What the scores leave out: dataset cases ``--lenient`` skipped, result lines
    ``--skip-bad-lines`` skipped, result ids the dataset does not hold."""
    found = []
    if loaded.skipped:
        found.append(f"{loaded.skipped} malformed dataset case(s) skipped (--lenient)")
    if results.bad_lines:
        first = results.bad_line_messages[0] if results.bad_line_messages else ""
        found.append(f"{results.bad_lines} malformed result line(s) skipped; first: {first}")
    if report.unknown_ids.count:
        examples = ", ".join(report.unknown_ids.examples)
        found.append(f"{report.unknown_ids.count} result id(s) not in the dataset (e.g. {examples})")
    return found
