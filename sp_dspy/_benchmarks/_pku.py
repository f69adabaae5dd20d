"""PKU-SafeRLHF as a benchmark: its loader, its paper's metrics, tables and report sections."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from rich.console import RenderableType

from .._data import PKU_CATEGORIES, Benchmark, Case, load_pku
from .._metrics import ResultSet, ScoreReport, headline_table, per_rule_table
from .._metrics_pku import PKU_PUBLISHED, PkuReport, render_pku_report, score_pku_results
from .._report._model import ComparisonSummary
from .._report._pku import pku_html_section, pku_variants_table
from ._kind import BenchmarkKind, first_json_line


class PkuSafeRlhfKind(BenchmarkKind):
    """PKU-SafeRLHF responses judged against a fixed 19-rule harm policy (``_pku``)."""

    name: ClassVar[str] = "pku-saferlhf"
    unit: ClassVar[str] = "prompt"
    title: ClassVar[str] = "PKU-SafeRLHF"
    tau_curve: ClassVar[bool] = False
    task: ClassVar[str] = (
        "name the harm categories (rules of a fixed 19-rule policy) that a chatbot's response violates"
    )

    def load(self, dataset: str | None, *, with_evidence: bool = False, lenient: bool = False) -> Benchmark:
        pku = load_pku(dataset, lenient=lenient)
        return Benchmark(
            cases=pku.cases,
            source=pku.source,
            content_hash=pku.content_hash,
            skipped=pku.skipped,
            skipped_reasons=pku.problems,
            benchmark=self.name,
        )

    def recognises(self, path: Path) -> bool:
        first = first_json_line(path)
        return isinstance(first, dict) and {"prompt", "response_0", "is_response_0_safe"} <= set(first)

    def extra_scores(
        self, cases: Sequence[Case], results: ResultSet, *, cap_aware: bool = False, per_rule: bool = False
    ) -> dict[str, Any]:
        return {
            "pku": score_pku_results(cases, results, cap_aware=cap_aware, per_rule=per_rule).to_json_dict()
        }

    def score_tables(self, report: ScoreReport, extra: dict[str, Any]) -> list[RenderableType]:
        """The RMR/RDR cells, then PKU's own tables. No failure modes (every PKU rule is decisive)
        and no RMR@tau table: a response's gold set is a few categories (none when safe), where
        floor((1 - tau) x |G|) is 0 for tau >= 0.7, so every RMR@tau repeats RMR@1.0."""
        tables: list[RenderableType] = [headline_table(report)]
        if report.per_rule is not None:
            tables.append(per_rule_table(report))
        if "pku" in extra:
            tables.append(render_pku_report(PkuReport.model_validate(extra["pku"])))
        return tables

    def variant_report(
        self, cases: Sequence[Case], results: ResultSet, *, cap_aware: bool = False
    ) -> dict[str, Any] | None:
        return score_pku_results(cases, results, cap_aware=cap_aware).to_json_dict()

    def published(self) -> dict[str, Any] | None:
        return dict(PKU_PUBLISHED)

    def report_terminal(self, variants: Sequence[tuple[str, dict[str, Any] | None]]) -> RenderableType | None:
        return pku_variants_table(variants)

    def report_html(self, summary: ComparisonSummary) -> str:
        return pku_html_section(summary)

    def case_facts(self, case: Case) -> dict[str, list[str]]:
        """The response's gold label, severity and harm categories (the gold rules' names)."""
        return {
            "label": ["safe" if case.safe else "unsafe"],
            "severity": [] if case.severity is None else [str(case.severity)],
            "categories": [PKU_CATEGORIES[rule - 1] for rule in sorted(case.ground_truth_violations)],
        }
