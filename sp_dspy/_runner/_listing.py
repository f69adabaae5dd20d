"""The runs in an output directory, one row each, read from their manifests (nothing is rescored).

``sp-dspy runs`` prints them; a row is one model of one run id (a run of several models is
several rows), newest first, with the scores the run recorded when it finished.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from .._errors import DataError
from .._run_manifest import RunManifest, read_run_manifest


class RunRow(BaseModel):
    """One model's run as ``sp-dspy runs`` lists it."""

    run_id: str
    benchmark: str
    protocol: str
    program: str
    model: str
    status: str
    cases: int
    rmr: float | None
    rmr_exact: float | None
    cost_usd: float | None
    started_at: str
    results_file: str
    manifest: str


def _rows(manifest: RunManifest, path: Path) -> list[RunRow]:
    settings = manifest.settings
    rows = []
    for run in manifest.runs.values():
        cell = (run.metrics or {}).get("ALL") or {}
        rows.append(
            RunRow(
                run_id=manifest.run_id,
                benchmark=str(manifest.dataset.get("benchmark") or "safepyramid"),
                protocol=str(settings.get("protocol") or "per-policy"),
                program=str(settings.get("program") or "official"),
                model=str(run.lm.get("model") or run.model),
                status=run.status,
                cases=int(cell.get("total") or run.units_total),
                rmr=cell.get("rmr_avg"),
                rmr_exact=cell.get("rmr_exact"),
                cost_usd=run.totals.usage.cost,
                started_at=run.started_at,
                results_file=run.results_file,
                manifest=str(path),
            )
        )
    return rows


def list_runs(folder: Path) -> list[RunRow]:
    """Every run recorded in ``folder``'s ``manifest_*.json`` files, newest first; a file that is
    not a run manifest is passed over (an output directory may hold other JSON)."""
    if not folder.is_dir():
        raise DataError(f"{folder}: no such directory (pass the --output-dir of the runs)")
    rows: list[RunRow] = []
    for path in sorted(folder.glob("manifest_*.json")):
        manifest = read_run_manifest(path)
        if manifest is not None:
            rows.extend(_rows(manifest, path))
    return sorted(rows, key=lambda row: (row.started_at, row.run_id, row.model), reverse=True)
