"""What the runner's ``manifest_<RUN_ID>.json`` files say about a result file.

``sp-dspy eval`` writes a manifest beside its results with the wall time of each
model's run and the hash of the dataset it ran on. The report reads them to show
wall time (which concurrency makes far shorter than summed latency) and to warn
when results were produced on a different dataset than the one they are scored on.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Generation settings worth showing beside the numbers (from the manifest's ``lm`` entry).
LM_KEYS: tuple[str, ...] = ("model", "temperature", "max_tokens", "reasoning_effort", "json_schema")
#: Run settings that explain wall time and the case selection.
RUN_KEYS: tuple[str, ...] = ("concurrency",)


@dataclass
class ManifestInfo:
    """Wall time summed over the variant's files (``None`` if none had a manifest), dataset hashes, settings."""

    wall_s: float | None = None
    dataset_hashes: set[str] = field(default_factory=set)
    settings: dict[str, Any] = field(default_factory=dict)

    def _add(self, key: str, value: object) -> None:
        if value is None or isinstance(value, dict | list):
            return
        seen = self.settings.setdefault(key, [])
        if value not in seen:
            seen.append(value)

    def flat_settings(self) -> dict[str, Any]:
        """One value per key, or the list of distinct values when the files disagree."""
        return {k: v[0] if len(v) == 1 else v for k, v in self.settings.items()}


def _load(path: Path) -> dict[str, Any] | None:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None  # a broken manifest only costs the wall-time column
    return raw if isinstance(raw, dict) else None


def _mapping(parent: dict[str, Any], key: str) -> dict[str, Any]:
    value = parent.get(key)
    return value if isinstance(value, dict) else {}


def _runs_for(
    result_file: Path, manifests: Iterable[dict[str, Any]]
) -> Iterable[tuple[dict[str, Any], dict[str, Any]]]:
    """(manifest, run entry) pairs whose ``results_file`` is this file (matched by name: it holds run id and model)."""
    for manifest in manifests:
        runs = manifest.get("runs")
        if not isinstance(runs, dict):
            continue
        for run in runs.values():
            if isinstance(run, dict) and Path(str(run.get("results_file", ""))).name == result_file.name:
                yield manifest, run


def manifest_info(paths: Iterable[str | Path]) -> ManifestInfo:
    """Read every ``manifest_*.json`` next to the files; files of one variant are separate runs, so wall times add up."""
    info = ManifestInfo()
    cache: dict[Path, list[dict[str, Any]]] = {}
    for path in map(Path, paths):
        folder = path.parent
        if folder not in cache:
            cache[folder] = [m for m in map(_load, sorted(folder.glob("manifest_*.json"))) if m is not None]
        for manifest, run in _runs_for(path, cache[folder]):
            wall = run.get("wall_s")
            if isinstance(wall, int | float) and not isinstance(wall, bool) and math.isfinite(wall):
                info.wall_s = round((info.wall_s or 0.0) + float(wall), 3)
            dataset = manifest.get("dataset")
            if isinstance(dataset, dict) and isinstance(dataset.get("sha256"), str):
                info.dataset_hashes.add(dataset["sha256"])
            lm = _mapping(run, "lm")
            for key in LM_KEYS:
                info._add("lm" if key == "model" else key, lm.get(key))
            settings = _mapping(manifest, "settings")
            for key in RUN_KEYS:
                info._add(key, settings.get(key))
            data = _mapping(settings, "data")
            info._add("split", data.get("split"))
            break  # one manifest entry per file
    return info
