"""A user's own policy cases as a benchmark: RMR/RDR over all cases and per tag, and what a
deployer asks first: over-blocking and recall per conversation, precision/recall/F1 per rule."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

from rich.console import RenderableType

from .._data import Benchmark, Case, load_custom
from .._errors import DataError
from .._metrics import (
    PolicyView,
    ResultSet,
    ScoreReport,
    binary_table,
    case_outcomes,
    cell_text,
    interval_text,
    per_rule_table,
    policy_view,
    resolve_records,
    rule_table,
)
from .._report._custom import custom_html_section, custom_variants_table
from .._report._model import ComparisonSummary
from .._table import FitTable
from ._kind import BenchmarkKind, first_json_line


class CustomKind(BenchmarkKind):
    """A user's own policy cases as JSONL (``_custom``): RMR/RDR over all cases and per tag."""

    name: ClassVar[str] = "custom"
    unit: ClassVar[str] = "group"
    title: ClassVar[str] = "custom"
    task: ClassVar[str] = "name every rule of your application's policy that a conversation violates"
    breakdown: ClassVar[Literal["tag"]] = "tag"

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
        """``binary`` (over-blocking, recall, precision per conversation) and ``rules`` (P/R/F1 per rule)."""
        records = resolve_records(cases, results, per_rule=per_rule)
        return policy_view(cases, case_outcomes(cases, records, cap_aware=cap_aware)).to_json_dict()

    def score_tables(self, report: ScoreReport, extra: dict[str, Any]) -> list[RenderableType]:
        """All cases, then each tag; the binary view and the per-rule scores; then (per-rule
        runs) the judgment stats."""
        title = "Per-rule case-level metrics" if report.mode == "per_rule" else "Per-policy metrics"
        table = FitTable(
            title=f"{title}: your policy" + (" (cap-aware)" if report.cap_aware else ""),
            caption="RMR = mean RMR@{1.0,.9,.8,.7}; RDR lower is better; Strict = RMR with excluded cases as misses",
        )
        for column in ("Cases", "N", "Scored", "RMR", "95% CI", "RMR@1.0", "RDR", "Excl.%", "Strict"):
            table.add_column(column, justify="left" if column == "Cases" else "right")
        keys = ("total", "n_eval", "rmr_avg", "rmr_exact", "rdr", "refusal", "rmr_avg_strict")
        for name in ("ALL", *report.breakdown_cells()):
            # The columns after "Cases", but the CI.
            texts = [cell_text(report.cells[name][key]) for key in keys]
            label = "all" if name == "ALL" else name
            table.add_row(label, *texts[:3], interval_text(report.ci.get(name)), *texts[3:])
        tables: list[RenderableType] = [table]
        if "binary" in extra:
            view = PolicyView.model_validate(extra)
            tables += [binary_table(view), rule_table(view)]
        if report.per_rule is not None:
            tables.append(per_rule_table(report))
        return tables

    def variant_report(
        self, cases: Sequence[Case], results: ResultSet, *, cap_aware: bool = False
    ) -> dict[str, Any] | None:
        return self.extra_scores(cases, results, cap_aware=cap_aware)

    def report_terminal(self, variants: Sequence[tuple[str, dict[str, Any] | None]]) -> RenderableType | None:
        return custom_variants_table(variants)

    def report_html(self, summary: ComparisonSummary) -> str:
        return custom_html_section(summary)

    def case_facts(self, case: Case) -> dict[str, list[str]]:
        """The case's group (its split unit) when the file names one; tags are the breakdown's column."""
        return {"group": [case.group]} if case.group else {}
