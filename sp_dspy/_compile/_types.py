"""The data types of a compile: settings, setup, progress, candidates, outcome, manifest."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from sp_dspy._benchmarks import BenchmarkName
from sp_dspy._budget import BudgetCaps, Ledger
from sp_dspy._compile._budget import CompilePlan
from sp_dspy._compile._data import DEFAULT_RATIOS, CompileData
from sp_dspy._lm import LMConfig
from sp_dspy._run_manifest import ErrorSummary
from sp_dspy.programs import ARTIFACT_KIND

if TYPE_CHECKING:
    from sp_dspy._compile._failures import CallFailures
    from sp_dspy._compile._student import Student

SCHEMA_VERSION = 1


class CompileConfig(BaseModel):
    """What to compile, on which data, under which caps, into which directory.

    ``top_k``: how many of the optimizer's candidates are scored on dev at the end (its
    own pick first); the starting program always competes too, so a compile never ships
    a program worse on dev than where it started.
    """

    model_config = ConfigDict(extra="forbid")

    protocol: Literal["per-policy", "per-rule"] = "per-policy"
    cot: bool = False
    optimizer: str
    optimizer_config: Path | None = None
    overrides: dict[str, Any] = Field(default_factory=dict)
    dataset: str | None = None
    benchmark: BenchmarkName = "safepyramid"
    splits: Path | None = None
    ratios: tuple[float, float, float] = DEFAULT_RATIOS
    lenient: bool = False
    seed: int = 0
    out: Path
    caps: BudgetCaps = Field(default_factory=BudgetCaps)
    top_k: int = Field(default=1, ge=1)
    concurrency: int = Field(default=8, ge=1)
    dry_run: bool = False
    force: bool = False  # replace an artifact already in ``out``


@dataclass
class CompileStatus:
    """Live state of one compile for a progress display (read from another thread, or told via ``on_phase``).

    ``best_score`` is the best complete dev score so far; ``recorder`` the optimizer's
    candidate recorder while it runs.
    """

    caps: BudgetCaps = field(default_factory=BudgetCaps)
    phase: str = "starting"
    budget: Ledger | None = None
    start_score: float | None = None
    best_score: float | None = None
    recorder: Any = None
    failures: CallFailures | None = None
    on_phase: Callable[[CompileStatus], None] | None = None

    def enter(self, phase: str) -> None:
        """Start a new phase and tell the display."""
        self.phase = phase
        if self.on_phase is not None:
            self.on_phase(self)

    def scored(self, dev: DevScore, *, start: bool = False) -> None:
        """Record a dev score (the starting program's when ``start``) if its evaluation completed."""
        if not dev.complete:
            return
        if start:
            self.start_score = dev.score
        if self.best_score is None or dev.score > self.best_score:
            self.best_score = dev.score

    def tried(self) -> tuple[int, float | None]:
        """Candidates the optimizer has tried so far, and the best one's mean metric (x 100)."""
        if self.recorder is None:
            return 0, None
        return len(self.recorder.states), self.recorder.best_mean()


class DevScore(BaseModel):
    """A program's dev-split result."""

    score: float
    ci95: list[float] | None
    n: int
    excluded: int
    complete: bool
    rmr_avg_strict: float | None
    rmr_avg: float | None
    rmr_exact: float | None
    rdr: float | None

    def describe(self) -> str:
        """``"33.33 (95% CI 0.00-66.67)"``, marked when some cases were not run."""
        text = f"{self.score:.2f}"
        if self.ci95 is not None:
            text += f" (95% CI {self.ci95[0]:.2f}-{self.ci95[1]:.2f})"
        return text if self.complete else text + " [incomplete: a cap stopped it]"


@dataclass
class Contender:
    """A program state that competes on dev: ``origin`` is ``start``, ``optimizer`` or ``recorded``."""

    origin: str
    state: dict[str, Any]
    dev: DevScore | None = None


@dataclass(frozen=True)
class Selection:
    """The program kept, and why, in words the summary and the manifest show."""

    chosen: Contender
    reason: str


@dataclass
class CompileSetup:
    """Everything a compile decided before its first LM call (``prepare``)."""

    config: CompileConfig
    recipe: Any
    settings: Any
    data: CompileData
    student: Student
    configs: dict[str, LMConfig]
    pricing: dict[str, Any]
    plan: CompilePlan
    warnings: list[str]


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


class BudgetRecord(BudgetCaps):
    refusals: int
    refused_by: str | None


class CompileManifest(BaseModel):
    """``manifest.json`` of a compiled artifact: what produced it, what it scored, what it cost.

    ``programs.load_program`` reads ``program`` and ``protocol``; the rest is the record.
    No secrets: LM settings are ``LMConfig.public_dict()`` and the command line is redacted.
    """

    schema_version: int = SCHEMA_VERSION
    kind: str = ARTIFACT_KIND
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


@dataclass
class CompileOutcome:
    """What ``compile_guard`` did: the plan always; the rest unless it was a dry run."""

    plan: CompilePlan
    config: CompileConfig
    score_command: str  # the eval of the artifact's test part, with the task LM it was compiled for
    window: int | None = None  # the task LM's context window, where it is known
    manifest: CompileManifest | None = None
    warnings: list[str] = field(default_factory=list)
    errors: ErrorSummary = field(default_factory=ErrorSummary)  # the failed LM calls, by class
