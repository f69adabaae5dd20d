"""The configuration of an evaluation run, from CLI flags or YAML; it holds no secrets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .._benchmarks import BenchmarkName
from .._budget import BudgetCaps
from .._data import CaseSelection, resolved_path
from .._errors import ConfigError, validation_problem
from .._protocol import Layout, ParseMode, Protocol
from .._yaml_lines import read_yaml_mapping
from ._paths import RunId

#: ``--parser``: the mode the protocol's parsers read an answer in (``Protocol`` and ``Layout`` are the
#: protocol's too, read from ``sp_dspy._protocol`` so each choice is spelled once).
Parser = ParseMode


class DataSelection(CaseSelection):
    """Which cases a run sees: the dataset, how it loads, and which of its cases (``CaseSelection``)."""

    model_config = ConfigDict(extra="forbid")

    dataset: str | None = None
    benchmark: BenchmarkName = "safepyramid"
    lenient: bool = False
    with_evidence: bool = False

    def resolved(self) -> DataSelection:
        """The dataset and split files as absolute paths (a Hub id stays as it is), so the manifest's
        selection means the same cases from any working directory."""
        dataset = None if self.dataset is None else resolved_path(self.dataset)
        return self.model_copy(update={"dataset": dataset, "split": self.resolved_split()})


class EvalConfig(BaseModel):
    """Everything that determines what an eval run sends and where it writes."""

    model_config = ConfigDict(extra="forbid")

    data: DataSelection = Field(default_factory=DataSelection)
    program: str = "official"
    protocol: Protocol | None = None  # per-policy for a named program; an artifact's own
    allow_overlap: bool = False  # score an artifact on cases of its train/dev split
    parser: Parser = "strict"
    per_rule_layout: Layout = "official"
    concurrency: int = Field(default=16, ge=1, le=1024)
    output_dir: Path = Path("output/results")
    run_id: RunId | None = None
    resume: bool = False
    caps: BudgetCaps = Field(default_factory=BudgetCaps)  # --max-calls, --max-total-tokens, --max-usd
    batch: bool = False  # --batch: every request through the provider's batch API, at its rate
    resubmit: bool = False  # --resubmit: send again a batch being created at a kill that cannot be matched


def build_eval_config(flags: dict[str, Any], run_config: Path | None = None) -> EvalConfig:
    """Merge a YAML run config under the CLI flags and validate the result.

    A flag left at its default does not override the YAML value; every error names
    the file (or flag) and the field.
    """
    base: dict[str, Any] = {}
    where = "flags"
    if run_config is not None:
        where = str(run_config)
        base = read_yaml_mapping(run_config, "run config", "a mapping of eval settings")
    defaults = EvalConfig().model_dump()
    for key, value in flags.items():  # a section the flags fill in must be a mapping in the file
        if isinstance(value, dict) and not isinstance(base.get(key), dict | None):
            found = type(base[key]).__name__
            raise ConfigError(f"{where}: field {key}: expected a mapping of {key} settings, got {found}")
    merged = _merge(base, flags, defaults)
    try:
        return EvalConfig.model_validate(merged)
    except ValidationError as exc:
        field, message = validation_problem(exc)
        if run_config is None:  # every value came from a flag: name the flag
            flag = "--" + field.rpartition(".")[2].replace("_", "-")
            raise ConfigError(f"{flag}: {message}") from None
        raise ConfigError(f"{where}: field {field}: {message}") from None


def _merge(base: dict[str, Any], flags: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in flags.items():
        if isinstance(value, dict):
            merged[key] = _merge(dict(base.get(key) or {}), value, dict(defaults.get(key) or {}))
        elif value is not None and (value != defaults.get(key) or key not in base):
            merged[key] = value
    return merged
