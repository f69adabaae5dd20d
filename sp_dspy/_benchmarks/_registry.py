"""The benchmark registry: ``--benchmark NAME`` -> its kind, and loading a benchmark by name.

Commands ask here for a kind (:func:`benchmark_kind`); no other module compares benchmark
names. A new kind is one :func:`register_benchmark` call. The built-in kinds are imported
here, and only here, on first use: each imports its own metrics, tables and report sections,
which loading another kind's data never pays for.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator
from pydantic_core import PydanticCustomError

from .._data import Benchmark, Case, filter_cases
from .._errors import DataError
from ._kind import BenchmarkKind, looks_like_results


def _safepyramid() -> BenchmarkKind:
    from ._safepyramid import SafePyramidKind

    return SafePyramidKind()


def _pku_saferlhf() -> BenchmarkKind:
    from ._pku import PkuSafeRlhfKind

    return PkuSafeRlhfKind()


def _custom() -> BenchmarkKind:
    from ._custom import CustomKind

    return CustomKind()


_REGISTRY: dict[str, Callable[[], BenchmarkKind]] = {
    "safepyramid": _safepyramid,
    "pku-saferlhf": _pku_saferlhf,
    "custom": _custom,
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


def dataset_kind(path: Path) -> BenchmarkKind | None:
    """The kind whose dataset format the local file ``path`` looks like, or None (for naming a
    dataset given where results are expected)."""
    if not path.is_file():
        return None
    return next((kind for kind in map(benchmark_kind, benchmark_names()) if kind.recognises(path)), None)


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
        if looks_like_results(path):
            raise DataError(
                f"{path}: is a results file, not a {kind.title} dataset: give it as RESULTS, "
                "and as --dataset the data the run was made on"
            ) from None
        for other in benchmark_names():
            if other != benchmark and benchmark_kind(other).recognises(path):
                raise DataError(
                    f"{path}: not a {benchmark} file, it looks like a {other} file: pass --benchmark {other} ({exc})"
                ) from None
        raise
    cases = filter_cases(loaded.cases, level=level, domain=domain, limit=limit, start_idx=start_idx)
    return loaded.model_copy(update={"cases": cases})
