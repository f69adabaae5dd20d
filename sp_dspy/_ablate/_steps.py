"""The steps of a plan and the executor that runs them in order.

A plan is a list of steps: :class:`EvaluateStep` (a guard variant on the plan's cases, an eval run of
its own through ``run_eval``: one unit at a time or in provider batches) and :class:`CompileStep`
(one optimizer seed compiled on a split, through ``compile_guard``). ``eval`` is one evaluation,
``ablate`` a plan of evaluations, ``experiment`` compiles then evaluations. The executor skips
the steps a resumed plan finished, gives each step the caps it may spend when it starts, prints
one head line per step, and turns a step that stops early into the command that continues the
plan; each evaluation's own resume check, lock, progress and manifest are ``run_eval``'s.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from rich.console import Console

from .._budget import Ledger
from .._run_manifest import ErrorSummary, previous_run
from .._runner import EvalConfig, RunPaths, read_run_results, run_eval, unit_errors
from ._variants import PlannedVariant

if TYPE_CHECKING:
    from .._data import Case
    from .._lm import LMConfig
    from .._metrics import ResultSet

Status = Literal["complete", "skipped", "interrupted", "capped"]


@dataclass
class VariantRun:
    """One variant's part of the ablation: where it wrote and what happened this time."""

    variant: PlannedVariant
    run_id: str
    results_file: Path
    status: Status
    units_run: int = 0
    units_skipped_on_resume: int = 0
    #: Units whose latest record is an error (``--resume --retry-errors`` re-sends them).
    errors: ErrorSummary = field(default_factory=ErrorSummary)
    capped_by: str | None = None  # the cap (max_calls, max_tokens, max_usd) that stopped it


@dataclass
class EvaluateStep:
    """Evaluate one guard variant: its eval settings (caps given when it starts) and where it writes."""

    variant: PlannedVariant
    config: EvalConfig
    paths: RunPaths

    @property
    def results_file(self) -> Path:
        return self.paths.results_for(self.variant.protocol)


@dataclass
class CompileStep:
    """One optimizer seed's compile: what happened to it this time."""

    optimizer: str
    seed: int
    out: Path
    status: Literal["compiled", "finished earlier", "capped", "not started"] = "not started"
    warnings: list[str] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        """Compiled earlier, not cut short by a cap (a limited one is compiled again)."""
        manifest = self.out / "manifest.json"
        return manifest.exists() and not json.loads(manifest.read_text(encoding="utf-8")).get(
            "budget_limited"
        )


@dataclass
class Executor:
    """Runs a plan's evaluation steps in order (see the module's docstring).

    ``ledger``: the ledger a step's calls are admitted by, asked when it starts (an experiment's:
    its caps and what its other steps spent); ``lm``: one ``dspy.LM`` for every step (tests pass the fake).
    """

    console: Console
    cases: list[Case]
    resume: bool = False
    retry_errors: bool = False
    log_requests: bool = False
    show_progress: bool = True
    lm: Any = None
    ledger: Callable[[EvalConfig], Ledger | None] | None = None

    def evaluate(self, steps: list[EvaluateStep], live: LMConfig, runs: list[VariantRun]) -> None:
        """Run ``steps`` one after another on ``live``, appending each one's :class:`VariantRun` to
        ``runs``; the first that does not complete (interrupted, capped) ends the plan there."""
        for number, step in enumerate(steps, 1):
            run = VariantRun(step.variant, step.paths.run_id, step.results_file, "skipped")
            runs.append(run)
            head = f"[{number}/{len(steps)}] {step.variant.label}: {describe(step.variant)}"
            earlier = finished(step.paths, run.results_file, live.display_name()) if self.resume else None
            if earlier is not None:
                run.errors = unit_errors(earlier, self.cases, step.variant.protocol)
                if not (self.retry_errors and run.errors.errors):
                    self.console.print(f"{head}: finished earlier, not run again", highlight=False)
                    continue
            self.console.print(head, highlight=False)
            if not self._evaluate_one(step, live, run):
                return

    def _evaluate_one(self, step: EvaluateStep, live: LMConfig, run: VariantRun) -> bool:
        """Run one evaluation step into ``run``; whether the plan may go on."""
        config = step.config
        result = run_eval(
            config, live, console=self.console, lm=self.lm, show_progress=self.show_progress,
            retry_errors=self.retry_errors, log_requests=self.log_requests,
            ledger=None if self.ledger is None else self.ledger(config),
        )  # fmt: skip
        run.status = "interrupted" if result.interrupted else "complete"
        if result.capped_by is not None and not result.interrupted:
            run.status, run.capped_by = "capped", result.capped_by
        run.units_run = result.units_run
        run.units_skipped_on_resume = result.skipped_on_resume
        run.errors = result.errors
        return run.status == "complete"


def finished(paths: RunPaths, results_file: Path, model: str) -> ResultSet | None:
    """The run's results when the manifest says this model's run completed and the file is as it left it."""
    run = previous_run(paths.manifest, model)
    if run is None or run.status != "complete" or not results_file.exists():
        return None
    results = read_run_results(results_file)
    return results if run.totals.records == len(results.lines) else None


def describe(variant: PlannedVariant) -> str:
    """``official per-policy``, ``mipro-s0 per-rule, prefix layout (not official)``."""
    program = Path(variant.program).name if variant.artifact else variant.program
    layout = f", {variant.layout} layout (not official)" if variant.layout != "official" else ""
    return f"{program} {variant.protocol}{layout}"
