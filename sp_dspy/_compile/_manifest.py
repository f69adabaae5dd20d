"""``manifest.json`` of a compiled artifact: what produced it, what it scored, what it cost.

``program`` and ``protocol`` are the two fields ``programs.load_program`` reads to
rebuild the right program class; everything else is the record a reader needs to
trust, reproduce or compare the artifact. No secrets: LM settings are
``LMConfig.public_dict()`` (key variable *names*, redacted URLs) and the command line
is redacted.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from sp_dspy._compile._evaluate import DevScore

SCHEMA_VERSION = 1


class OptimizerRecord(BaseModel):
    name: str
    dspy_class: str
    parameters: dict[str, Any]
    settings_file: str | None
    overrides: dict[str, Any]
    seed_note: str
    sampling_note: str


class SplitRecord(BaseModel):
    source: str
    file: str = "splits.json"
    seed: int
    ratios: tuple[float, float, float]
    train: list[str]
    dev: list[str]
    test_count: int
    test_hash: str
    split_dataset_hash: str


class CandidateRecord(BaseModel):
    origin: str
    state_hash: str
    dev: DevScore


class DevRecord(BaseModel):
    metric: str = "mean case score x 100 over dev, excluded cases = 0 (unrounded rmr_avg_strict)"
    before: DevScore
    after: DevScore
    selected: str
    reason: str = ""
    candidates: list[CandidateRecord] = Field(default_factory=list)
    recorded_candidates: int = 0


class BudgetRecord(BaseModel):
    max_calls: int | None
    max_tokens: int | None
    max_usd: float | None
    refusals: int
    refused_by: str | None


class CompileManifest(BaseModel):
    schema_version: int = SCHEMA_VERSION
    kind: str = "sp-dspy-compiled-guard"
    program: str
    protocol: str
    optimizer: OptimizerRecord
    seed: int
    lms: dict[str, dict[str, Any] | None]
    temperatures: dict[str, Any]
    dataset: dict[str, Any]
    split: SplitRecord
    dev: DevRecord
    usage: dict[str, Any]
    budget: BudgetRecord
    budget_limited: bool
    started_at: str
    finished_at: str
    wall_s: float
    versions: dict[str, str | None]
    git_commit: str | None
    command: list[str]
    warnings: list[str] = Field(default_factory=list)
