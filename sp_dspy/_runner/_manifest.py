"""``manifest_<RUN_ID>.json``: what produced a run (no secrets), with totals over its whole results files."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, model_serializer, model_validator

from .._errors import OutputError
from .._metrics import JudgmentRecord, PolicyRecord
from .._usage import Usage
from ._failures import ErrorSummary


class RunTotals(BaseModel):
    """Totals over every record of a result file; answers replayed from the cache count too.

    Stored flat (``prompt_tokens``, ``completion_tokens``, ``cost_usd`` beside the counts), as
    manifests have always stored them.
    """

    records: int = 0
    errors: int = 0
    usage: Usage = Field(default_factory=Usage)
    cache_hits: int = 0

    @model_validator(mode="before")
    @classmethod
    def _nest_usage(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "usage" not in data:
            flat = dict(data)
            usage = {key: flat.pop(key) for key in ("prompt_tokens", "completion_tokens") if key in flat}
            usage["cost"] = flat.pop("cost_usd", None)
            return {**flat, "usage": usage}
        return data

    @model_serializer
    def _flat(self) -> dict[str, Any]:
        return {
            "records": self.records,
            "errors": self.errors,
            "prompt_tokens": self.usage.prompt_tokens,
            "completion_tokens": self.usage.completion_tokens,
            "cost_usd": self.usage.cost,
            "cache_hits": self.cache_hits,
        }

    def add(self, record: PolicyRecord | JudgmentRecord) -> None:
        """Count one record in the totals."""
        self.records += 1
        if record.usage is not None:
            self.usage = self.usage + record.usage
        if record.error_class:
            self.errors += 1
        self.cache_hits += record.cache_hits


class ModelRun(BaseModel):
    """One model's part of a run."""

    model: str
    lm: dict[str, Any]
    results_file: str
    status: str
    started_at: str
    finished_at: str | None = None
    wall_s: float | None = None
    units_total: int
    units_skipped_on_resume: int
    totals: RunTotals
    #: Units whose latest record is an error, by class (what ``--retry-errors`` re-sends).
    errors: ErrorSummary = Field(default_factory=ErrorSummary)
    endpoint_requests: dict[str, int] = Field(default_factory=dict)
    #: The LM's engine: ``direct`` (sp-dspy's HTTP engine) or ``dspy`` (DSPy's own, a replica
    #: router or the fake); every call goes through DSPy's execution (cache, retries) either way.
    transport: str = "dspy"
    metrics: dict[str, Any] | None = None


class RunManifest(BaseModel):
    """The manifest file: shared settings plus one entry per model."""

    run_id: str
    command: list[str]
    settings: dict[str, Any]
    dataset: dict[str, Any]
    split: dict[str, Any] | None = None
    versions: dict[str, str | None]
    git_commit: str | None
    runs: dict[str, ModelRun] = Field(default_factory=dict)


def totals_of(records: Iterable[PolicyRecord | JudgmentRecord]) -> RunTotals:
    """Totals over ``records`` (every line of a results file: replaced ones used the LM too)."""
    totals = RunTotals()
    for record in records:
        totals.add(record)
    if totals.usage.cost is not None:
        totals.usage.cost = round(totals.usage.cost, 6)
    return totals


def _read_manifest(path: Path) -> RunManifest | None:
    """The manifest file, or None when there is none or it is unreadable (then it is replaced)."""
    try:
        return RunManifest.model_validate_json(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return None


def previous_run(path: Path, model: str) -> ModelRun | None:
    """This model's entry in an existing manifest (a resumed run adds to it)."""
    previous = _read_manifest(path)
    return previous.runs.get(model) if previous is not None else None


def write_manifest(path: Path, manifest: RunManifest) -> None:
    """Merge this invocation's entries into the manifest file (other models are kept), atomically.

    A failed write (a full disk) leaves the previous manifest whole and raises ``OutputError``.
    """
    previous = _read_manifest(path)
    if previous is not None:
        manifest.runs = {**previous.runs, **manifest.runs}
    tmp = path.with_suffix(".json.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(manifest.model_dump(mode="json"), indent=2) + "\n", encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise OutputError(f"cannot write the manifest {path}: {exc.strerror or exc}") from None
