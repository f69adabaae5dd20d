"""``sp-dspy compare``'s job from Python: is B better than A on the same cases, beyond noise?

Per cell of the benchmark's breakdown (SafePyramid's levels, a custom benchmark's tags, none
for PKU-SafeRLHF) and pooled (``ALL``), over the cases both sides have results for: ``B - A`` with
paired bootstrap intervals over the benchmark's units (SafePyramid conversations, PKU-SafeRLHF
prompts, custom groups), and a paired randomization test of exact match over the same units,
a case a side excluded counting as wrong for it (a guard must not win by declining the hard cases).
``compare_results(CompareConfig(results_a=[...], results_b=[...]))`` gives the very document
``compare --json`` writes and the warnings the command prints after its tables.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .._benchmarks import DEFAULT_BENCHMARK, benchmark_kind, kind_of_cases
from .._errors import DataError
from .._scoring import (
    NBoot,
    Note,
    Notify,
    RecordedSelection,
    config_from_flags,
    load_for_results,
    read_results,
)

if TYPE_CHECKING:
    from .._data import Case
    from .._metrics import CellComparison, ResultSet

NOTE_PAIRED = (
    "B - A over the cases both sides scored; 95% paired bootstrap interval resampling whole units "
    "(both sides the same draws; none where too few units are paired for it to be informative); "
    "RDR: lower is better."
)
NOTE_TEST = (
    "Exact paired randomization test of exact match: each unit's sign (its cases exact only in B minus "
    "only in A) flipped at random; a case a side excluded (refused, unparseable, errored) counts as "
    "wrong for that side. A only: A exact and B not; B only: the reverse."
)


class Comparison(BaseModel):
    """The ``--json`` document of ``sp-dspy compare``."""

    dataset: str
    files_a: list[str]
    files_b: list[str]
    compared: int
    only_a: int
    only_b: int
    in_neither: int
    direction: str = "B - A"
    cells: dict[str, CellComparison]
    bootstrap: dict[str, Any]
    cap_aware: bool = False
    benchmark: str = "safepyramid"  # the benchmark kind the cases belong to
    #: The kind's own metrics per side on the compared cases (PKU-SafeRLHF: A and B PkuReports;
    #: custom: each side's binary view and per-rule scores).
    extra: dict[str, dict[str, Any]] = Field(default_factory=dict)
    unit: str = "conversation"  # what the bootstrap and the test resample (the benchmark's unit)
    notes: list[str] = Field(default_factory=lambda: [NOTE_PAIRED, NOTE_TEST])


class CompareConfig(BaseModel):
    """What ``sp-dspy compare RESULTS_A RESULTS_B`` compares, and how (each field is the flag of its
    name; ``results_a``/``results_b``: the files of each side, parts of one run)."""

    model_config = ConfigDict(extra="forbid")

    results_a: list[Path]
    results_b: list[Path]
    data: RecordedSelection = Field(default_factory=RecordedSelection)
    cap_aware: bool = False  # also exclude completions of >= 65,000 tokens
    skip_bad_lines: bool = False  # count malformed result lines instead of failing
    seed: int = 0
    n_boot: NBoot = 1000  # bootstrap resamples for the 95% intervals (0: none)

    @field_validator("results_a", "results_b")
    @classmethod
    def _files(cls, value: list[Path]) -> list[Path]:
        if not value:
            raise ValueError("no result file given")
        return value


def build_compare_config(settings: dict[str, Any]) -> CompareConfig:
    """``settings`` (the flags' values by field name) as a ``CompareConfig``; a bad value is one
    ``ConfigError`` naming its flag or argument (``--n-boot: ...``, ``RESULTS_A: ...``)."""
    return config_from_flags(
        CompareConfig, settings, arguments={"results_a": "RESULTS_A", "results_b": "RESULTS_B"}
    )


@dataclass(frozen=True)
class ComparedResults:
    """The two sides compared: ``comparison`` (the ``--json`` document), the ``notes`` said while the
    data loaded, and the ``warnings`` the command prints after its tables (result ids the dataset
    does not hold, malformed result lines skipped)."""

    comparison: Comparison
    notes: list[Note] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        """The ``--json`` document as the command writes it."""
        return json.dumps(self.comparison.model_dump(mode="json"), indent=2, ensure_ascii=False)


def compare_results(config: CompareConfig, *, notify: Notify | None = None) -> ComparedResults:
    """Compare ``config.results_b`` with ``config.results_a`` as ``sp-dspy compare`` does: on the cases
    both have results for, among those their runs selected (or ``config.data``'s). ``notify`` gets
    each note as the data loads (the command prints it on stderr); the notes are kept in the result."""
    notes: list[Note] = []

    def say(note: Note) -> None:
        notes.append(note)
        if notify is not None:
            notify(note)

    paths = [_checked(config.results_a, "RESULTS_A"), _checked(config.results_b, "RESULTS_B")]
    sides = [read_results(side, skip_bad_lines=config.skip_bad_lines) for side in paths]
    scored = load_for_results(paths, sides, data=config.data, notify=say)
    loaded = scored.loaded
    comparison = compare_sets(
        scored.cases, *sides, dataset=loaded.source, cap_aware=config.cap_aware, n_boot=config.n_boot,
        seed=config.seed,
    )  # fmt: skip
    known = {case.id for case in loaded.cases}
    warnings = []
    for label, results in zip("AB", sides, strict=True):
        unknown = sorted(results.result_ids() - known)
        if unknown:
            warnings.append(
                f"{label}: {len(unknown)} result id(s) not in the dataset (e.g. {', '.join(unknown[:3])})"
            )
        if results.bad_lines:
            warnings.append(f"{label}: {results.bad_lines} malformed result line(s) skipped")
    return ComparedResults(comparison, notes, warnings)


def _checked(paths: list[Path], side: str) -> list[Path]:
    """``paths`` when each is a file; else one ``DataError`` naming the side and the path."""
    for path in paths:
        if path.is_dir():
            raise DataError(
                f"{side}: {path}: a directory, not a result file (name the results_*.jsonl in it)"
            )
        if not path.is_file():
            raise DataError(f"{side}: {path}: no such file")
    return paths


def compare_sets(
    cases: Sequence[Case],
    results_a: ResultSet,
    results_b: ResultSet,
    *,
    dataset: str = "",
    cap_aware: bool = False,
    n_boot: int = 1000,
    seed: int = 0,
) -> Comparison:
    """Compare two result sets on the cases both have results for (see the module docstring)."""
    from .._metrics import CellComparison, compare_cells, resolve_records

    # The model's metric types resolve now: the metrics (numpy) load only when a comparison runs.
    Comparison.model_rebuild(_types_namespace={"CellComparison": CellComparison})
    records_a = resolve_records(cases, results_a)
    records_b = resolve_records(cases, results_b)
    in_a, in_b = {c.id for c in cases if c.id in records_a}, {c.id for c in cases if c.id in records_b}
    compared = [case for case in cases if case.id in in_a and case.id in in_b]
    if not compared:
        raise DataError(
            f"{dataset or 'the dataset'}: no case has results on both sides (A: {len(in_a)}, B: {len(in_b)}); "
            "wrong --dataset or result files?"
        )
    kind = kind_of_cases(compared)
    chosen = kind or benchmark_kind(DEFAULT_BENCHMARK)
    cells = compare_cells(
        compared, records_a, records_b, cap_aware=cap_aware, n_boot=n_boot, seed=seed, by=chosen.breakdown,
        unit=chosen.unit,
    )  # fmt: skip
    extra = {}
    for side, results in (("A", results_a), ("B", results_b)):
        report = None if kind is None else kind.variant_report(compared, results, cap_aware=cap_aware)
        if report is not None:
            extra[side] = report
    return Comparison(
        dataset=dataset,
        files_a=list(results_a.files),
        files_b=list(results_b.files),
        compared=len(compared),
        only_a=len(in_a - in_b),
        only_b=len(in_b - in_a),
        in_neither=len(cases) - len(in_a | in_b),
        cells=cells,
        bootstrap={"n_boot": n_boot, "seed": seed, "level": 0.95, "unit": chosen.unit},
        cap_aware=cap_aware,
        benchmark=DEFAULT_BENCHMARK if kind is None else kind.name,
        extra=extra,
        unit=chosen.unit,
    )
