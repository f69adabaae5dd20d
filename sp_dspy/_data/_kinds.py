"""Benchmarks as plug-ins: the ``BenchmarkKind`` interface, its registry and the built-in kinds.

A kind loads its data into :class:`Case` objects, states its task, and adds its own
metrics and tables to every command. Commands ask the registry (:func:`benchmark_kind`)
for a kind by name; no other module compares benchmark names. A new kind is a class
satisfying :class:`BenchmarkKind` plus one :func:`register_benchmark` call. The built-in
kinds import metrics and tables inside their methods, so loading data never pays for them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Protocol

from pydantic import AfterValidator
from pydantic_core import PydanticCustomError

from .._errors import DataError
from ._filters import filter_cases
from ._loader import Benchmark, load_file
from ._schema import Case
from ._source import resolve_dataset

if TYPE_CHECKING:
    from rich.console import RenderableType

    from .._metrics import ResultSet, ScoreReport
    from .._report._model import ComparisonSummary


class BenchmarkKind(Protocol):
    """What a benchmark brings to every command; a subclass inherits the defaults given here."""

    @property
    def name(self) -> str:
        """The ``--benchmark`` value and what manifests record."""

    @property
    def task(self) -> str:
        """One line: what the guard is asked to do on this benchmark's cases."""

    @property
    def full_note(self) -> str:
        """How large the full published benchmark is, for a small-sample note ('' when not fixed)."""
        return ""

    @property
    def has_leaderboard(self) -> bool:
        """Whether SafePyramid's published leaderboard and failure modes apply."""
        return False

    @property
    def extra_metrics(self) -> bool:
        """Whether ``extra_scores`` adds anything (callers skip re-reading results when not)."""
        return False

    def load(self, dataset: str | None, *, with_evidence: bool = False, lenient: bool = False) -> Benchmark:
        """Load and validate every case of ``dataset`` (``None``: this kind's default data)."""

    def recognises(self, path: Path) -> bool:
        """Whether the local file ``path`` looks like this kind's format (for hints, never decisions)."""

    def extra_scores(
        self, cases: Sequence[Case], results: ResultSet, *, cap_aware: bool = False, per_rule: bool = False
    ) -> dict[str, Any]:
        """JSON sections added to ``score --json`` beside the official cells (may be empty)."""
        return {}

    def score_tables(self, report: ScoreReport, extra: dict[str, Any]) -> list[RenderableType]:
        """The console tables of ``score`` and ``eval``, in reading order."""

    def variant_report(
        self, cases: Sequence[Case], results: ResultSet, *, cap_aware: bool = False
    ) -> dict[str, Any] | None:
        """A comparison variant's own metrics (``VariantResult.pku`` today), or None."""
        return None

    def published(self) -> dict[str, Any] | None:
        """Published reference figures a comparison shows beside its variants, or None."""
        return None

    def report_terminal(self, variants: Sequence[tuple[str, dict[str, Any] | None]]) -> RenderableType | None:
        """This kind's table of ``(label, variant_report)`` rows (``report``, ``compare``), or None."""
        return None

    def report_html(self, summary: ComparisonSummary) -> str:
        """This kind's section of the HTML report ('' for none)."""
        return ""


def _first_line(path: Path) -> object:
    try:
        with path.open("rb") as handle:
            line = handle.readline(1 << 20)
        return json.loads(line)
    except (OSError, ValueError, RecursionError):  # unreadable, not JSON, nested too deeply: not this format
        return None


class SafePyramidKind(BenchmarkKind):
    """The SafePyramid benchmark: a JSON file, a Hub id, or the bundled sample."""

    name: ClassVar[str] = "safepyramid"
    task: ClassVar[str] = (
        "name every rule of an application's policy (with exceptions, conditionals and regulatory "
        "frameworks) that a multi-turn conversation violates"
    )
    full_note: ClassVar[str] = "the full SafePyramid benchmark has 3,000"
    has_leaderboard: ClassVar[bool] = True

    def load(self, dataset: str | None, *, with_evidence: bool = False, lenient: bool = False) -> Benchmark:
        return load_file(resolve_dataset(dataset, with_evidence=with_evidence), lenient=lenient)

    def recognises(self, path: Path) -> bool:
        try:
            with path.open("rb") as handle:
                head = handle.read(1 << 16)
        except OSError:
            return False
        return head.lstrip()[:1] in (b"[", b"{") and b'"ground_truth_violations"' in head

    def score_tables(self, report: ScoreReport, extra: dict[str, Any]) -> list[RenderableType]:
        from .._metrics import render_score_table

        return list(render_score_table(report))


class PkuSafeRlhfKind(BenchmarkKind):
    """PKU-SafeRLHF responses judged against a fixed 19-rule harm policy (``_pku``)."""

    name: ClassVar[str] = "pku-saferlhf"
    task: ClassVar[str] = (
        "name the harm categories (rules of a fixed 19-rule policy) that a chatbot's response violates"
    )
    extra_metrics: ClassVar[bool] = True

    def load(self, dataset: str | None, *, with_evidence: bool = False, lenient: bool = False) -> Benchmark:
        from ._pku import load_pku

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
        first = _first_line(path)
        return isinstance(first, dict) and {"prompt", "response_0", "is_response_0_safe"} <= set(first)

    def extra_scores(
        self, cases: Sequence[Case], results: ResultSet, *, cap_aware: bool = False, per_rule: bool = False
    ) -> dict[str, Any]:
        from .._metrics_pku import score_pku_results

        return {
            "pku": score_pku_results(cases, results, cap_aware=cap_aware, per_rule=per_rule).to_json_dict()
        }

    def score_tables(self, report: ScoreReport, extra: dict[str, Any]) -> list[RenderableType]:
        """The RMR/RDR cells, then PKU's own tables (every PKU rule is decisive: no failure modes)."""
        from .._metrics._render import headline_table, per_rule_table, tau_table
        from .._metrics_pku import PkuReport, render_pku_report

        tables: list[RenderableType] = [headline_table(report), tau_table(report)]
        if report.per_rule is not None:
            tables.append(per_rule_table(report))
        if "pku" in extra:
            tables.append(render_pku_report(PkuReport.model_validate(extra["pku"])))
        return tables

    def variant_report(
        self, cases: Sequence[Case], results: ResultSet, *, cap_aware: bool = False
    ) -> dict[str, Any] | None:
        from .._metrics_pku import score_pku_results

        return score_pku_results(cases, results, cap_aware=cap_aware).to_json_dict()

    def published(self) -> dict[str, Any] | None:
        from .._metrics_pku import PKU_PUBLISHED

        return dict(PKU_PUBLISHED)

    def report_terminal(self, variants: Sequence[tuple[str, dict[str, Any] | None]]) -> RenderableType | None:
        from .._report._pku import pku_variants_table

        return pku_variants_table(variants)

    def report_html(self, summary: ComparisonSummary) -> str:
        from .._report._pku import pku_html_section

        return pku_html_section(summary)


class CustomKind(BenchmarkKind):
    """A user's own policy cases as JSONL (``_custom``): RMR/RDR over all cases and per tag."""

    name: ClassVar[str] = "custom"
    task: ClassVar[str] = "name every rule of your application's policy that a conversation violates"
    extra_metrics: ClassVar[bool] = True

    def load(self, dataset: str | None, *, with_evidence: bool = False, lenient: bool = False) -> Benchmark:
        from ._custom import load_custom

        if with_evidence:
            raise DataError(
                "--with-evidence: only SafePyramid has an evidence file; drop it for --benchmark custom"
            )
        return load_custom(dataset, lenient=lenient)

    def recognises(self, path: Path) -> bool:
        first = _first_line(path)
        return isinstance(first, dict) and {"policy", "violated_rules"} <= set(first)

    def extra_scores(
        self, cases: Sequence[Case], results: ResultSet, *, cap_aware: bool = False, per_rule: bool = False
    ) -> dict[str, Any]:
        """``{"tags": {tag: cell}}``: the official cell over the cases carrying each tag."""
        from .._metrics import case_outcomes, compute_cell, resolve_records

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
        from .._metrics._render import cell_text, interval_text, per_rule_table
        from .._table import FitTable

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


_REGISTRY: dict[str, Callable[[], BenchmarkKind]] = {
    kind.name: kind for kind in (SafePyramidKind, PkuSafeRlhfKind, CustomKind)
}
DEFAULT_BENCHMARK = "safepyramid"
"""The kind every command assumes when neither ``--benchmark`` nor a run's manifest names one."""


def register_benchmark(name: str, factory: Callable[[], BenchmarkKind]) -> None:
    """Make ``factory()`` the kind that ``--benchmark NAME`` selects (a later call replaces it)."""
    _REGISTRY[name] = factory


def benchmark_names() -> tuple[str, ...]:
    """Every registered ``--benchmark`` value, in registration order."""
    return tuple(_REGISTRY)


def benchmark_kind(name: str, *, flag: str = "--benchmark") -> BenchmarkKind:
    """The kind registered as ``name``; ``DataError`` naming ``flag`` and the choices otherwise."""
    factory = _REGISTRY.get(name)
    if factory is None:
        raise DataError(f"{flag}: unknown benchmark {name!r} (choose {', '.join(benchmark_names())})")
    return factory()


def check_benchmark_name(name: str) -> str:
    """A pydantic validator for config fields (its message has no ``Value error,`` prefix)."""
    if name not in _REGISTRY:
        raise PydanticCustomError(
            "unknown_benchmark",
            "unknown benchmark {name} (choose {choices})",
            {"name": repr(name), "choices": ", ".join(benchmark_names())},
        )
    return name


BenchmarkName = Annotated[str, AfterValidator(check_benchmark_name)]
"""A config field holding a registered ``--benchmark`` value."""


def kind_of_cases(cases: Sequence[Case]) -> BenchmarkKind | None:
    """The kind all ``cases`` belong to, or None when they are empty or mixed."""
    names = {case.benchmark for case in cases}
    return benchmark_kind(names.pop()) if len(names) == 1 else None


def load_benchmark(
    dataset: str | Path | None = None,
    *,
    level: str | Sequence[str] | None = None,
    domain: str | Sequence[str] | None = None,
    limit: int | None = None,
    start_idx: int = 0,
    with_evidence: bool = False,
    lenient: bool = False,
    benchmark: str = DEFAULT_BENCHMARK,
) -> Benchmark:
    """Load a benchmark of the kind named ``benchmark`` (safepyramid, pku-saferlhf, custom).

    ``dataset``: a local file, a Hub id, or ``None`` for the kind's default data. Filters
    apply after validation, in this order: level, domain, ``start_idx``, ``limit``; ids
    are given to id-less cases by position *before* filtering.
    """
    kind = benchmark_kind(benchmark)
    try:
        loaded = kind.load(
            None if dataset is None else str(dataset), with_evidence=with_evidence, lenient=lenient
        )
    except DataError as exc:  # on a file another kind recognises, say which
        path = None if dataset is None else Path(dataset).expanduser()
        if path is None or not path.is_file() or kind.recognises(path):
            raise
        for other in benchmark_names():
            if other != benchmark and benchmark_kind(other).recognises(path):
                raise DataError(
                    f"{path}: not a {benchmark} file, it looks like a {other} file: pass --benchmark {other} ({exc})"
                ) from None
        raise
    cases = filter_cases(loaded.cases, level=level, domain=domain, limit=limit, start_idx=start_idx)
    return loaded.model_copy(update={"cases": cases})
