"""The SafePyramid benchmark: its file, Hub id or bundled sample, and the official tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal

from rich.console import RenderableType

from .._data import Benchmark, load_file, resolve_dataset
from .._errors import DataError
from .._metrics import ScoreReport, render_score_table
from .._regular import open_regular
from ._kind import BenchmarkKind


class SafePyramidKind(BenchmarkKind):
    """The SafePyramid benchmark: a JSON file, a Hub id, or the bundled sample."""

    name: ClassVar[str] = "safepyramid"
    unit: ClassVar[str] = "conversation"
    title: ClassVar[str] = "SafePyramid"
    task: ClassVar[str] = (
        "name every rule of an application's policy (with exceptions, conditionals and regulatory "
        "frameworks) that a multi-turn conversation violates"
    )
    full_note: ClassVar[str] = "the full SafePyramid benchmark has 3,000"
    has_leaderboard: ClassVar[bool] = True
    rule_types: ClassVar[bool] = True
    breakdown: ClassVar[Literal["level"]] = "level"

    def load(self, dataset: str | None, *, with_evidence: bool = False, lenient: bool = False) -> Benchmark:
        return load_file(resolve_dataset(dataset, with_evidence=with_evidence), lenient=lenient)

    def recognises(self, path: Path) -> bool:
        try:
            with open_regular(path, "file") as handle:
                head = handle.read(1 << 16)
        except (DataError, OSError):
            return False
        return head.lstrip()[:1] in (b"[", b"{") and b'"ground_truth_violations"' in head

    def score_tables(self, report: ScoreReport, extra: dict[str, Any]) -> list[RenderableType]:
        return list(render_score_table(report))
