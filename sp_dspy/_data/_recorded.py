"""What data a run was scored on, read back from its manifest when the user names no dataset."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from pydantic import BaseModel

from .._errors import DataError
from .._run_manifest import manifest_path, read_run_manifest


class RecordedData(BaseModel):
    """The dataset a run recorded: where it was loaded from and which benchmark kind it is."""

    source: str
    benchmark: str | None = None
    manifest: Path


def recorded_data(results_files: Sequence[Path], run_ids: Iterable[str]) -> RecordedData | None:
    """The first readable ``manifest_<RUN_ID>.json`` beside ``results_files`` naming a dataset, or None."""
    ids = sorted({str(run_id) for run_id in run_ids})
    for results_file in results_files:
        for run_id in ids:
            path = manifest_path(Path(results_file).parent, run_id)
            manifest = read_run_manifest(path)  # a missing one or not a manifest: as if there were none
            recorded = manifest.dataset if manifest is not None else None
            if recorded is not None and isinstance(recorded.get("source"), str):
                benchmark = recorded.get("benchmark")
                return RecordedData(
                    source=recorded["source"],
                    benchmark=benchmark if isinstance(benchmark, str) else None,
                    manifest=path,
                )
    return None


def check_results_belong(result_ids: set[str], dataset_ids: set[str], *, where: str, source: str) -> None:
    """Refuse results none of whose ids is a case of the dataset (they would score as 100% excluded).

    A partial overlap (a run on a subset) is left to the caller's warning.
    """
    if result_ids and not result_ids & dataset_ids:
        examples = ", ".join(sorted(result_ids)[:3])
        raise DataError(
            f"{where}: none of its {len(result_ids)} case id(s) is in the dataset {source} (e.g. {examples}); "
            "pass the run's --dataset and --benchmark"
        )
