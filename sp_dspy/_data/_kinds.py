"""Benchmarks as plug-ins: the ``BenchmarkKind`` interface and its registry.

A kind loads its data into :class:`Case` objects, states its task, and adds its own
metrics and tables to every command. Commands ask the registry (:func:`benchmark_kind`)
for a kind by name; no other module compares benchmark names.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Protocol

from pydantic import AfterValidator
from pydantic_core import PydanticCustomError

from .._errors import DataError
from ._builtin_kinds import CustomKind, PkuSafeRlhfKind, SafePyramidKind
from ._filters import filter_cases
from ._loader import Benchmark
from ._schema import Case

if TYPE_CHECKING:
    from rich.console import RenderableType

    from .._metrics import ResultSet, ScoreReport
    from .._report._model import ComparisonSummary


class BenchmarkKind(Protocol):
    """What a benchmark brings to every command (see the module docstring)."""

    @property
    def name(self) -> str:
        """The ``--benchmark`` value and what manifests record."""

    @property
    def task(self) -> str:
        """One line: what the guard is asked to do on this benchmark's cases."""

    @property
    def full_note(self) -> str:
        """How large the full published benchmark is, for a small-sample note ('' when not fixed)."""

    @property
    def has_leaderboard(self) -> bool:
        """Whether SafePyramid's published leaderboard and failure modes apply."""

    @property
    def extra_metrics(self) -> bool:
        """Whether ``extra_scores`` adds anything (callers skip re-reading results when not)."""

    def load(self, dataset: str | None, *, with_evidence: bool = False, lenient: bool = False) -> Benchmark:
        """Load and validate every case of ``dataset`` (``None``: this kind's default data)."""

    def recognises(self, path: Path) -> bool:
        """Whether the local file ``path`` looks like this kind's format (for hints, never decisions)."""

    def extra_scores(
        self, cases: Sequence[Case], results: ResultSet, *, cap_aware: bool = False, per_rule: bool = False
    ) -> dict[str, Any]:
        """JSON sections added to ``score --json`` beside the official cells (may be empty)."""

    def score_tables(self, report: ScoreReport, extra: dict[str, Any]) -> list[RenderableType]:
        """The console tables of ``score`` and ``eval``, in reading order."""

    def variant_report(
        self, cases: Sequence[Case], results: ResultSet, *, cap_aware: bool = False
    ) -> dict[str, Any] | None:
        """A comparison variant's own metrics (``VariantResult.pku`` today), or None."""

    def published(self) -> dict[str, Any] | None:
        """Published reference figures a comparison shows beside its variants, or None."""

    def report_terminal(self, variants: Sequence[tuple[str, dict[str, Any] | None]]) -> RenderableType | None:
        """This kind's table of ``(label, variant_report)`` rows (``report``, ``compare``), or None."""

    def report_html(self, summary: ComparisonSummary) -> str:
        """This kind's section of the HTML report ('' for none)."""


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
