"""A user's own policy cases as a benchmark: RMR/RDR over all cases and per tag."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal

from rich.console import RenderableType

from .._data._custom import load_custom
from .._data._loader import Benchmark
from .._errors import DataError
from .._metrics import ScoreReport
from .._metrics._render import cell_text, interval_text, per_rule_table
from .._table import FitTable
from ._kind import BenchmarkKind, first_json_line


class CustomKind(BenchmarkKind):
    """A user's own policy cases as JSONL (``_custom``): RMR/RDR over all cases and per tag."""

    name: ClassVar[str] = "custom"
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

    def score_tables(self, report: ScoreReport, extra: dict[str, Any]) -> list[RenderableType]:
        """One table: all cases, then each tag; then (per-rule runs) the judgment stats."""
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
        if report.per_rule is not None:
            tables.append(per_rule_table(report))
        return tables
