"""What the runner's ``manifest_<RUN_ID>.json`` files say about a result file.

The report shows their wall time (far shorter than summed latency under concurrency)
and warns when results were produced on another dataset than the one scored.
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


def _load(path: Path) -> dict[str, Any]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}  # a broken manifest only costs the wall-time column
    return raw if isinstance(raw, dict) else {}


def _mapping(parent: dict[str, Any], key: str) -> dict[str, Any]:
    value = parent.get(key)
    return value if isinstance(value, dict) else {}


def manifest_info(paths: Iterable[str | Path]) -> ManifestInfo:
    """Read every ``manifest_*.json`` next to the files; files of one variant are separate runs, so wall times add up."""
    info = ManifestInfo()
    cache: dict[Path, list[dict[str, Any]]] = {}
    for path in map(Path, paths):
        if path.parent not in cache:
            cache[path.parent] = [_load(m) for m in sorted(path.parent.glob("manifest_*.json"))]
        # The first run entry whose results file has this name (it holds run id and model).
        manifest, run = next(
            (
                (manifest, run)
                for manifest in cache[path.parent]
                for run in _mapping(manifest, "runs").values()
                if isinstance(run, dict) and Path(str(run.get("results_file", ""))).name == path.name
            ),
            ({}, {}),
        )
        if not run:
            continue
        wall = run.get("wall_s")
        if isinstance(wall, int | float) and not isinstance(wall, bool) and math.isfinite(wall):
            info.wall_s = round((info.wall_s or 0.0) + float(wall), 3)
        sha256 = _mapping(manifest, "dataset").get("sha256")
        if isinstance(sha256, str):
            info.dataset_hashes.add(sha256)
        lm = _mapping(run, "lm")
        for key in LM_KEYS:
            info._add("lm" if key == "model" else key, lm.get(key))
        settings = _mapping(manifest, "settings")
        for key in RUN_KEYS:
            info._add(key, settings.get(key))
        info._add("split", _mapping(settings, "data").get("split"))
    return info
