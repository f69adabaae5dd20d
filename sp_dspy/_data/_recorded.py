"""What data a run was scored on, read back from its manifest: the dataset and the cases it selected."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ValidationError

from .._errors import DataError
from .._run_manifest import RunManifest, run_of
from ._selection import CaseSelection


class RecordedData(BaseModel):
    """What a results file's run manifest says about its data.

    ``source``: the dataset as the run resolved it (older manifests: as typed); ``selection``:
    the cases the run took of it (None when the manifest predates recording it).
    """

    source: str
    benchmark: str | None = None
    manifest: Path
    selection: CaseSelection | None = None


def recorded_data(
    results_file: Path, beside: dict[Path, list[tuple[Path, RunManifest]]]
) -> RecordedData | None:
    """The data recorded by the manifest of the run that wrote ``results_file`` (``run_of``), or None
    when it has no readable manifest naming a dataset. ``beside`` caches each folder's manifests."""
    entry = run_of(results_file, beside)
    if entry is None:
        return None
    recorded = entry.manifest.dataset
    if not isinstance(recorded.get("source"), str):
        return None
    benchmark = recorded.get("benchmark")
    data = entry.manifest.settings.get("data")
    try:
        selection = CaseSelection.model_validate(data) if isinstance(data, dict) else None
    except ValidationError:  # a hand-edited manifest: its selection is unknown, its dataset still holds
        selection = None
    return RecordedData(
        source=recorded["source"],
        benchmark=benchmark if isinstance(benchmark, str) else None,
        manifest=entry.path,
        selection=selection,
    )


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
