"""``score()``: one call from cases + result files to the full, serialisable report."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel

from .._data import Case, gc_paused
from .._errors import DataError
from ._official import (
    TAG_CELL,
    Breakdown,
    case_outcomes,
    domain_cells,
    error_attribution,
    failure_modes,
    level_cells,
)
from ._per_rule import Key, diagnostics, judgment_pass
from ._records import PolicyRecord, ResultSet

Mode = Literal["per_policy", "per_rule"]


class UnknownIds(BaseModel):
    """Result ids that name no case of the dataset (a wrong ``--dataset`` shows up here)."""

    count: int = 0
    examples: list[str] = []


class ScoreReport(BaseModel):
    """Official cells plus diagnostics; ``to_json_dict`` is the ``--json`` document.

    ``cells``: each cell of the benchmark's ``breakdown`` in display order, ``ALL`` last
    (SafePyramid's ``L0``-``L2``; a custom benchmark's ``tag NAME``; none), so a benchmark
    without levels has no level cell anywhere.
    """

    mode: Mode
    cap_aware: bool
    breakdown: Breakdown = "level"
    cells: dict[str, dict[str, Any]]
    domains: dict[str, dict[str, dict[str, Any]]]
    failure_modes: dict[str, dict[str, Any]]
    error_attribution: dict[str, dict[str, Any]]
    ci: dict[str, Any]
    per_rule: dict[str, Any] | None = None
    unknown_ids: UnknownIds = UnknownIds()
    bad_lines: int = 0
    n_boot: int = 0
    seed: int = 0
    #: What the intervals resampled (``BenchmarkKind.unit``: conversation, prompt, group).
    unit: str = "conversation"

    def breakdown_cells(self) -> list[str]:
        """The cells besides ``ALL`` that hold cases (so a ``--level`` run shows no empty rows)."""
        return [name for name, cell in self.cells.items() if name != "ALL" and cell["total"]]

    def to_json_dict(self) -> dict[str, Any]:
        """One object: the level cells (``L0``, ``L1``, ``L2``: the reference cell schema) and ``ALL``
        at the top, a custom benchmark's tag cells under ``tags``, then the rest."""
        tagged = self.breakdown == "tag"
        document: dict[str, Any] = {
            name: dict(cell) for name, cell in self.cells.items() if not (tagged and name != "ALL")
        }
        ci = dict(self.ci)
        if tagged:
            document["tags"] = {
                name.removeprefix(TAG_CELL): dict(cell) for name, cell in self.cells.items() if name != "ALL"
            }
            ci = {name: value for name, value in ci.items() if not name.startswith(TAG_CELL)}
            ci["tags"] = {
                name.removeprefix(TAG_CELL): value
                for name, value in self.ci.items()
                if name.startswith(TAG_CELL)
            }
        document.update(
            mode=self.mode,
            cap_aware=self.cap_aware,
            domains=self.domains,
            failure_modes=self.failure_modes,
            error_attribution=self.error_attribution,
            ci=ci,
            bootstrap={"n_boot": self.n_boot, "seed": self.seed, "level": 0.95, "unit": self.unit},
            unknown_ids=self.unknown_ids.model_dump(),
            bad_lines=self.bad_lines,
        )
        if self.per_rule is not None:
            document["per_rule"] = self.per_rule
        return document


def resolve_records(
    cases: Sequence[Case],
    results: ResultSet | Mapping[str, PolicyRecord],
    *,
    per_rule: bool = False,
) -> dict[str, PolicyRecord]:
    """Per-policy records for ``cases``, aggregating judgments when the input holds them
    (``per_rule`` insists on them). A mix of both kinds is refused: merging a per-policy
    run with a per-rule run would score neither protocol.
    """
    return _resolve(cases, results, per_rule=per_rule)[0]


def _resolve(
    cases: Sequence[Case], results: ResultSet | Mapping[str, PolicyRecord], *, per_rule: bool
) -> tuple[dict[str, PolicyRecord], Counter[Key] | None]:
    """Per-policy records and, for judgments, their per-rule counts (one walk over them)."""
    if not isinstance(results, ResultSet):
        if per_rule:
            raise DataError("--per-rule: the results hold per-policy records, not per-rule judgments")
        return dict(results), None
    where = ", ".join(results.files) or "the results"
    if results.has_judgments and results.records:
        raise DataError(
            f"{where}: mixes {len(results.records)} per-policy records with "
            f"{len(results.judgments)} per-rule judgments; score each protocol separately"
        )
    if results.has_judgments:
        return judgment_pass(cases, results.judgments)
    if per_rule:
        raise DataError(f'--per-rule: no judgment records (kind == "judgment") in {where}')
    return dict(results.records), None


def score(
    cases: Sequence[Case],
    results: ResultSet | Mapping[str, PolicyRecord],
    *,
    cap_aware: bool = False,
    per_rule: bool = False,
    ci: bool = True,
    seed: int = 0,
    n_boot: int = 1000,
    all_ids: Collection[str] | None = None,
    by: Breakdown = "level",
    unit: str = "conversation",
) -> ScoreReport:
    """Score result records (or per-rule judgments) against ``cases``.

    ``all_ids`` are ids that are known but filtered out of ``cases`` (e.g. other levels under
    ``--level``); results for them are not reported as unknown. ``by``: the benchmark's cells
    beside ``ALL`` (``BenchmarkKind.breakdown``; SafePyramid's levels by default); ``unit``: the
    name of ``Case.unit`` the intervals resample (``BenchmarkKind.unit``), as the report says it.
    """
    with gc_paused():
        records, counts = _resolve(cases, results, per_rule=per_rule)
        outcomes = case_outcomes(cases, records, cap_aware=cap_aware)
        # The bootstrap runs on worker threads (numpy releases the GIL) meanwhile.
        intervals = None
        if ci:
            from ._bootstrap import start_intervals  # numpy: imported only when intervals are asked for

            intervals = start_intervals(outcomes, n_boot=n_boot, seed=seed, by=by)
        cells = level_cells(outcomes, by)
        per_rule_report = None if counts is None else diagnostics(counts, by)
        if per_rule_report is not None:
            for name, stats in per_rule_report.items():
                cells[name]["per_rule_refusal_rate"] = stats["per_rule_refusal_rate"]
        result_ids = results.result_ids() if isinstance(results, ResultSet) else set(results)
        known = {case.id for case in cases} | set(all_ids or ())
        unknown = sorted(result_ids - known)
        return ScoreReport(
            mode="per_policy" if counts is None else "per_rule",
            cap_aware=cap_aware,
            breakdown=by,
            cells=cells,
            domains=domain_cells(outcomes, by),
            failure_modes=failure_modes(cases, outcomes, by),
            error_attribution=error_attribution(cases, outcomes, by),
            ci={} if intervals is None else intervals(),
            per_rule=per_rule_report,
            unknown_ids=UnknownIds(count=len(unknown), examples=unknown[:5]),
            bad_lines=results.bad_lines if isinstance(results, ResultSet) else 0,
            n_boot=n_boot if ci else 0,
            seed=seed,
            unit=unit,
        )
