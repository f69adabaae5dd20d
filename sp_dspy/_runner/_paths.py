"""Result file names and run ids, compatible with the reference harness's layout.

``results_<RUN_ID>_<model>.jsonl`` for per-policy records, ``per_rule_<RUN_ID>_<model>.jsonl``
for per-rule judgments, ``manifest_<RUN_ID>.json`` for what produced them (one entry per model).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from .._errors import ConfigError

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(text: str) -> str:
    """File-name-safe form of a model's short name."""
    return _SAFE.sub("-", text).strip("-") or "model"


def new_run_id() -> str:
    """``RUN_ID`` from the environment, else a UTC timestamp."""
    return os.environ.get("RUN_ID") or datetime.now(UTC).strftime("%Y%m%d-%H%M%S")


@dataclass(frozen=True)
class RunPaths:
    """Where one run of one model writes."""

    output_dir: Path
    run_id: str
    model: str

    @property
    def results(self) -> Path:
        return self.output_dir / f"results_{self.run_id}_{safe_name(self.model)}.jsonl"

    @property
    def per_rule(self) -> Path:
        return self.output_dir / f"per_rule_{self.run_id}_{safe_name(self.model)}.jsonl"

    @property
    def manifest(self) -> Path:
        """One manifest per run id; several models of one run are entries in it."""
        return self.output_dir / f"manifest_{self.run_id}.json"


def resolve_run(output_dir: Path, model: str, run_id: str | None, *, resume: bool, protocol: str) -> RunPaths:
    """Pick the run id: the given one, or on ``--resume`` the newest run of this model."""
    if run_id:
        if not re.fullmatch(r"[A-Za-z0-9._-]+", run_id):
            raise ConfigError(
                f"--run-id: only letters, digits, '.', '_' and '-' are allowed (got {run_id!r})"
            )
        return RunPaths(output_dir, run_id, model)
    if resume:
        prefix = "per_rule" if protocol == "per-rule" else "results"
        pattern = f"{prefix}_*_{safe_name(model)}.jsonl"
        found = sorted(output_dir.glob(pattern), key=lambda p: p.stat().st_mtime, reverse=True)
        for path in found:
            run = _run_id_of(path, prefix, model)
            if run is not None:
                return RunPaths(output_dir, run, model)
        raise ConfigError(f"--resume: no earlier run of {model} in {output_dir} (looked for {pattern})")
    return RunPaths(output_dir, new_run_id(), model)


def _run_id_of(path: Path, prefix: str, model: str) -> str | None:
    """The run id of a results file of ``model``, or None when it belongs to another model.

    The glob ``results_*_<model>.jsonl`` also matches another model whose short name
    ends in ``_<model>``; the run id recorded in the file's first record settles it.
    """
    import json

    stem = path.name[len(prefix) + 1 : -len(f"_{safe_name(model)}.jsonl")]
    try:
        with path.open(encoding="utf-8") as handle:
            first = handle.readline()
        recorded = json.loads(first).get("run_id") if first.endswith("\n") else None
    except (OSError, ValueError, AttributeError):
        recorded = None
    if recorded is None:
        return stem  # an empty or foreign-format file: trust its name
    return stem if recorded == stem else None
