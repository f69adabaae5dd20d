"""Result file names (as the reference harness lays them out), run ids, and the run's one-writer lock."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator

from .._errors import ConfigError, DataError
from .._regular import open_regular
from .._run_manifest import manifest_path
from .._writer_lock import WriterLock, WriterLockedError

UNSAFE_CHARS = re.compile(r"[^A-Za-z0-9._-]+")
#: A run id names files (``results_<RUN_ID>_<model>.jsonl``): no empty one, no ``..``, no dot file.
RUN_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"


def run_id_problem(run_id: str) -> str | None:
    """Why ``run_id`` cannot name a run's files, or None when it can."""
    if re.fullmatch(RUN_ID_PATTERN, run_id):
        return None
    return (
        f"{run_id!r} is not a run id: use letters, digits, '.', '_' and '-', starting with a letter or digit"
    )


def _valid_run_id(run_id: str) -> str:
    if problem := run_id_problem(run_id):
        raise ValueError(problem)
    return run_id


RunId = Annotated[str, AfterValidator(_valid_run_id)]
"""A run id in a settings model (eval's, an ablation plan's): an error names the field."""


def safe_name(text: str) -> str:
    """File-name-safe form of a model's short name."""
    return UNSAFE_CHARS.sub("-", text).strip("-") or "model"


def _prefix(protocol: str) -> str:
    return "per_rule" if protocol == "per-rule" else "results"


def new_run_id() -> str:
    """``RUN_ID`` from the environment, else a UTC timestamp."""
    run_id = os.environ.get("RUN_ID")
    if run_id and (problem := run_id_problem(run_id)):
        raise ConfigError(f"RUN_ID (environment): {problem}")
    return run_id or datetime.now(UTC).strftime("%Y%m%d-%H%M%S")


@dataclass(frozen=True)
class RunPaths:
    """Where one run of one model writes."""

    output_dir: Path
    run_id: str
    model: str

    def results_for(self, protocol: str) -> Path:
        return self.output_dir / f"{_prefix(protocol)}_{self.run_id}_{safe_name(self.model)}.jsonl"

    def batch_dir_for(self, protocol: str) -> Path:
        """Where ``--batch`` logs this results file's batches and their answers (``--resume`` reads it)."""
        return self.results_for(protocol).with_suffix(".batch")

    @property
    def manifest(self) -> Path:
        """One manifest per run id; several models of one run are entries in it."""
        return manifest_path(self.output_dir, self.run_id)

    @property
    def lock(self) -> Path:
        return self.output_dir / f"run_{self.run_id}.lock"


class RunLockedError(WriterLockedError):
    """Another live process writes the run this one was asked to write."""


class RunLock(WriterLock):
    """One run, one writer: ``run_<RUN_ID>.lock`` held while a process writes it.

    Two writers would each send the units the other sends.
    """

    error = RunLockedError

    def __init__(self, paths: RunPaths) -> None:
        super().__init__(
            paths.lock,
            f"run {paths.run_id} in {paths.output_dir}",
            "one run has one writer; wait for it to end (or stop it), then --resume",
        )
        self.paths = paths


def resolve_run(output_dir: Path, model: str, run_id: str | None, *, resume: bool, protocol: str) -> RunPaths:
    """Pick the run id: the given one, or on ``--resume`` the newest run of this model."""
    if run_id is not None:
        if problem := run_id_problem(run_id):
            raise ConfigError(f"--run-id: {problem}")
        return RunPaths(output_dir, run_id, model)
    if resume:
        prefix = _prefix(protocol)
        pattern = f"{prefix}_*_{safe_name(model)}.jsonl"
        found = sorted(output_dir.glob(pattern), key=lambda p: p.stat().st_mtime, reverse=True)
        for path in found:
            run = _run_id_of(path, prefix, model)
            if run is not None:
                return RunPaths(output_dir, run, model)
        raise ConfigError(f"--resume: no earlier run of {model} in {output_dir} (looked for {pattern})")
    return RunPaths(output_dir, new_run_id(), model)


def _run_id_of(path: Path, prefix: str, model: str) -> str | None:
    """The run id of a results file of ``model``, or None when its first record says it is another model's.

    (The glob ``results_*_<model>.jsonl`` also matches a model whose short name ends in ``_<model>``.)
    """
    stem = path.name[len(prefix) + 1 : -len(f"_{safe_name(model)}.jsonl")]
    try:
        with open_regular(path, "result file") as handle:  # a FIFO here must not block the search
            first = handle.readline(1 << 20)
        recorded = json.loads(first).get("run_id") if first.endswith(b"\n") else None
    except (DataError, OSError, ValueError, AttributeError, RecursionError):
        recorded = None  # reading the run's results says what is wrong with the file
    if recorded is None:
        return stem  # an empty or foreign-format file: trust its name
    return stem if recorded == stem else None
