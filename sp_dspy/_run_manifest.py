"""A run's manifest, ``manifest_<RUN_ID>.json``: what produced the run (no secrets), with totals
over its whole results files. The one model, the one reader (eval's resume, score/show/report
finding the dataset, the report's wall times and settings) and the writer.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Hashable, Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from pydantic import BaseModel, Field, model_serializer, model_validator

from ._errors import OutputError
from ._regular import read_regular
from ._usage import Usage

#: The error class of a prompt over the model's context window (``sp_dspy._lm.classify_error``).
CONTEXT_LENGTH = "context_length"
#: How providers state the window in a context-length error (OpenAI, vLLM, llama.cpp).
_STATED_WINDOW = re.compile(r"(?:context length|context window|context size)\D{0,20}?(\d[\d,]*) tokens", re.I)

#: A run's status from its start until it ends (a run killed outright keeps it).
RUNNING = "running"

#: Every run's manifest in a folder.
MANIFEST_GLOB = "manifest_*.json"


def manifest_path(folder: Path, run_id: str) -> Path:
    """Where run ``run_id``'s manifest lies: beside its results files, one per run id."""
    return folder / f"manifest_{run_id}.json"


class RecordFacts(Protocol):
    """What totals and error summaries read of a result record (``PolicyRecord``/``JudgmentRecord``)."""

    @property
    def usage(self) -> Usage | None: ...
    @property
    def cache_hits(self) -> int: ...
    @property
    def batched(self) -> int: ...
    @property
    def error(self) -> str | None: ...
    @property
    def error_class(self) -> str | None: ...


class ErrorClassCount(BaseModel):
    """Units of one error class: how many, and the first one's message."""

    error_class: str
    count: int
    first_error: str
    prompt_tokens: int | None = None  # the largest estimated prompt among them, where it is known


class ErrorSummary(BaseModel):
    """Units of a run whose latest record is an error (what ``--retry-errors`` would re-send)."""

    units: int = 0
    errors: int = 0
    classes: list[ErrorClassCount] = Field(default_factory=list)

    @classmethod
    def of(cls, latest: Mapping[Hashable, RecordFacts], units: int) -> ErrorSummary:
        """Summarise the latest record of each unit (``units``: how many the run has)."""
        counts: dict[str, ErrorClassCount] = {}
        for record in latest.values():
            if kind := record.error_class:
                first = record.error or kind
                entry = counts.setdefault(kind, ErrorClassCount(error_class=kind, count=0, first_error=first))
                entry.count += 1
        classes = sorted(counts.values(), key=lambda c: (-c.count, c.error_class))
        return cls(units=units, errors=sum(c.count for c in classes), classes=classes)

    def lines(self, retry: str, *, window: int | None = None, what: str = "unit(s)") -> list[str]:
        """The summary a command prints (empty when none failed); ``retry`` re-sends them, except
        prompts over the context window (``window``: the model's, when known), which would fail again."""
        if not self.errors:
            return []
        head = f"errors: {self.errors} of {self.units} {what} ended in error"
        rows = [f"  {c.error_class}: {c.count} (first: {c.first_error})" for c in self.classes]
        overflow = self.lasting_notes(window)
        if len(overflow) < len(self.classes):
            rows.append(f"  re-send {'the others' if overflow else 'them'} with {retry}")
        return [head, *rows, *overflow]

    def lasting_notes(self, window: int | None = None) -> list[str]:
        """What to change for prompts the model's context window refused: sending them again fails."""
        notes = []
        for c in self.classes:
            if c.error_class == CONTEXT_LENGTH:
                size = f" (the largest ~{c.prompt_tokens:,} tokens)" if c.prompt_tokens else ""
                stated = _STATED_WINDOW.search(c.first_error)  # "maximum context length is 4096 tokens"
                known = window or (int(stated.group(1).replace(",", "")) if stated else None)
                limit = f" of {known:,} tokens" if known else ""
                notes.append(
                    f"  {c.count} prompt(s){size} do not fit the model's context window{limit}; sending "
                    "them again fails the same way: shrink them with fewer demonstrations (a smaller "
                    "max_bootstrapped_demos/max_labeled_demos when compiling), a smaller --max-tokens, "
                    "or use a model with a larger context window"
                )
        return notes


class RunTotals(BaseModel):
    """Totals over every record of a result file; answers replayed from the cache count too.

    Stored flat (``prompt_tokens``, ``completion_tokens``, ``cost_usd`` beside the counts), as
    manifests have always stored them.
    """

    records: int = 0
    errors: int = 0
    usage: Usage = Field(default_factory=Usage)
    cache_hits: int = 0
    batched: int = 0  # answers from the run's provider batches (--batch), at the batch rate

    @model_validator(mode="before")
    @classmethod
    def _nest_usage(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "usage" not in data:
            flat = dict(data)
            usage = {key: flat.pop(key, 0) for key in ("prompt_tokens", "completion_tokens")}
            if all(isinstance(count, int) for count in usage.values()):  # else validation says why
                usage["total_tokens"] = sum(usage.values())
            usage["cost"] = flat.pop("cost_usd", None)
            for key in ("cache_read_tokens", "cache_write_tokens"):  # stated when a prompt cache was used
                usage[key] = flat.pop(key, None)
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
            **({"batched": self.batched} if self.batched else {}),
            **{
                key: count
                for key in ("cache_read_tokens", "cache_write_tokens")
                if (count := getattr(self.usage, key))
            },
        }

    def add(self, record: RecordFacts) -> None:
        """Count one record in the totals."""
        self.records += 1
        if (usage := record.usage) is not None:  # the counts a manifest stores, and the dollars
            prompt, completion = usage.prompt_tokens, usage.completion_tokens
            self.usage = self.usage + Usage(
                prompt_tokens=prompt,
                completion_tokens=completion,
                total_tokens=prompt + completion,
                cache_read_tokens=usage.cache_read_tokens,
                cache_write_tokens=usage.cache_write_tokens,
                cost=usage.cost,
            )
        if record.error_class:
            self.errors += 1
        self.cache_hits += record.cache_hits
        self.batched += record.batched

    @classmethod
    def of(cls, records: Iterable[RecordFacts]) -> RunTotals:
        """The totals of these records (dollars rounded to 6 digits, as stored)."""
        totals = cls()
        for record in records:
            totals.add(record)
        if totals.usage.cost is not None:
            totals.usage.cost = round(totals.usage.cost, 6)
        return totals


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
    #: Rate-limit answers (429, "overloaded") the run's calls met and waited out, and the seconds
    #: they waited, summed over calls (sp-dspy's HTTP engine; a resumed run adds its invocations').
    rate_limited: int = 0
    rate_limit_wait_s: float = 0.0
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


def read_run_manifest(path: Path) -> RunManifest | None:
    """The manifest at ``path``, or None when there is none or it is not a manifest (a reader
    then goes on as without one; the next run replaces it).

    It is read as every file is (``read_regular``): a FIFO, a device or a file over
    ``MAX_JSON_FILE_BYTES`` there is one ``DataError``, not a hang.
    """
    if not path.exists():
        return None
    try:
        return RunManifest.model_validate_json(read_regular(path, "run manifest"))
    except ValueError:
        return None


class RecordedRun(NamedTuple):
    """A results file's entry in a run manifest beside it, and that manifest."""

    path: Path
    manifest: RunManifest
    run: ModelRun


def run_of(
    results_file: Path, beside: dict[Path, list[tuple[Path, RunManifest]]] | None = None
) -> RecordedRun | None:
    """The manifest beside ``results_file`` whose run wrote a file of that name, or None.

    Matched by file name, so a folder of many runs, copied or moved as a whole, or read from
    another directory, still pairs each file with its own run. ``beside`` caches each folder's
    manifests across calls (a report reads many files of one folder).
    """
    folder = results_file.parent
    found = beside.get(folder) if beside is not None else None
    if found is None:
        manifests = ((path, read_run_manifest(path)) for path in sorted(folder.glob(MANIFEST_GLOB)))
        found = [(path, manifest) for path, manifest in manifests if manifest is not None]
        if beside is not None:
            beside[folder] = found
    for path, manifest in found:
        for run in manifest.runs.values():
            if Path(run.results_file).name == results_file.name:
                return RecordedRun(path, manifest, run)
    return None


def previous_run(path: Path, model: str) -> ModelRun | None:
    """This model's entry in an existing manifest (a resumed run adds to it)."""
    previous = read_run_manifest(path)
    return previous.runs.get(model) if previous is not None else None


def write_manifest(path: Path, manifest: RunManifest) -> None:
    """Merge this invocation's entries into the manifest file (other models are kept), atomically.

    A failed write (a full disk) leaves the previous manifest whole and raises ``OutputError``.
    """
    previous = read_run_manifest(path)
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
