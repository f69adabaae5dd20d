"""A user's own policy cases as a benchmark: RMR/RDR over all cases and per tag."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from rich.console import RenderableType

from .._data._custom import load_custom
from .._data._loader import Benchmark
from .._data._schema import Case
from .._errors import DataError
from .._metrics import ResultSet, ScoreReport, case_outcomes, compute_cell, resolve_records
from .._metrics._render import cell_text, interval_text, per_rule_table
from .._table import FitTable
from ._kind import BenchmarkKind, first_json_line


class CustomKind(BenchmarkKind):
    """A user's own policy cases as JSONL (``_custom``): RMR/RDR over all cases and per tag."""

    name: ClassVar[str] = "custom"
    task: ClassVar[str] = "name every rule of your application's policy that a conversation violates"

    def load(self, dataset: str | None, *, with_evidence: bool = False, lenient: bool = False) -> Benchmark:
        if with_evidence:
            raise DataError(
                "--with-evidence: only SafePyramid has an evidence file; drop it for --benchmark custom"
            )
        return load_custom(dataset, lenient=lenient)

    def recognises(self, path: Path) -> bool:
        first = first_json_line(path)
        return isinstance(first, dict) and {"policy", "violated_rules"} <= set(first)

    def extra_scores(
        self, cases: Sequence[Case], results: ResultSet, *, cap_aware: bool = False, per_rule: bool = False
    ) -> dict[str, Any]:
        """``{"tags": {tag: cell}}``: the official cell over the cases carrying each tag."""
        outcomes = case_outcomes(
            cases, resolve_records(cases, results, per_rule=per_rule), cap_aware=cap_aware
        )
        by_tag: dict[str, list[Any]] = {}
        for case, outcome in zip(cases, outcomes, strict=True):
            for tag in case.tags:
                by_tag.setdefault(tag, []).append(outcome)
        return {"tags": {tag: compute_cell(by_tag[tag]) for tag in sorted(by_tag)}}

    def score_tables(self, report: ScoreReport, extra: dict[str, Any]) -> list[RenderableType]:
        """One table: all cases, then each tag; then (per-rule runs) the judgment stats."""
        title = "Per-rule case-level metrics" if report.mode == "per_rule" else "Per-policy metrics"
        table = FitTable(
            title=f"{title}: your policy" + (" (cap-aware)" if report.cap_aware else ""),
            caption="RMR = mean RMR@{1.0,.9,.8,.7}; RDR lower is better; Strict = RMR with excluded cases as misses",
        )
        for column in ("Cases", "N", "Scored", "RMR", "95% CI", "RMR@1.0", "RDR", "Excl.%", "Strict"):
            table.add_column(column, justify="left" if column == "Cases" else "right")
        rows = [
            ("all", report.cells["ALL"], report.ci.get("ALL")),
            *((f"tag {t}", c, None) for t, c in extra.get("tags", {}).items()),
        ]
        keys = ("total", "n_eval", "rmr_avg", "rmr_exact", "rdr", "refusal", "rmr_avg_strict")
        for label, cell, interval in rows:
            texts = [cell_text(cell[key]) for key in keys]  # the columns after "Cases", but the CI
            table.add_row(label, *texts[:3], interval_text(interval), *texts[3:])
        tables: list[RenderableType] = [table]
        if report.per_rule is not None:
            tables.append(per_rule_table(report))
        return tables
