"""The dataset that result files are scored on: the flags, else the run's manifest."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .._benchmarks import DEFAULT_BENCHMARK, load_benchmark
from .._data._recorded import check_results_belong, recorded_data
from .._errors import DataError
from ._console import err_console

if TYPE_CHECKING:
    from .._data import Benchmark
    from .._metrics import ResultSet


def run_ids(results: ResultSet) -> set[str]:
    """The ``run_id`` values the records of ``results`` carry (one run, usually)."""
    found = {record.run_id for record in results.records.values()}
    found |= {judgment.run_id for judgment in results.judgments[:1]}
    return {str(run_id) for run_id in found if run_id is not None}


def load_for_results(
    files: Sequence[Path],
    results: Sequence[ResultSet],
    *,
    dataset: str | None,
    benchmark: str | None,
    with_evidence: bool = False,
    lenient: bool = False,
    check: bool = True,
) -> Benchmark:
    """Load the dataset ``results`` are scored on.

    Without ``--dataset``, the manifest of the run that wrote ``files`` names the dataset
    and its benchmark (a dim line on stderr says so), unless ``--benchmark`` names another.
    With ``check``, results none of whose ids is a case are refused, not scored as 100% excluded.
    """
    recorded = None
    if dataset is None:
        recorded = recorded_data(files, set().union(*(run_ids(r) for r in results)))
        if recorded is not None and benchmark is not None and recorded.benchmark not in (None, benchmark):
            recorded = None  # the user asked for another benchmark: its default data, not this run's
    name = benchmark or (recorded.benchmark if recorded else None) or DEFAULT_BENCHMARK
    try:
        loaded = load_benchmark(
            recorded.source if recorded else dataset,
            benchmark=name,
            with_evidence=with_evidence,
            lenient=lenient,
        )
    except DataError as exc:
        if recorded is None:
            raise
        raise DataError(
            f"{recorded.manifest}: the run's dataset does not load ({exc}); pass --dataset"
        ) from None
    if recorded is not None:
        err_console.print(
            f"dataset from {recorded.manifest}: {loaded.source} ({name})",
            style="dim",
            markup=False,
            highlight=False,
        )
    if check:
        ids = {case.id for case in loaded.cases}
        for result_set in results:
            where = ", ".join(result_set.files) or "the results"
            check_results_belong(result_set.result_ids(), ids, where=where, source=loaded.source)
    return loaded
