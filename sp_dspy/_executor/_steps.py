"""The two kinds of step a plan is made of: evaluate a guard on a selection of cases, compile a guard.

A step answers the executor's four questions: did a resumed plan finish it (``finished``), what must
hold before it runs and which lock it holds meanwhile (``start``: fails fast, nothing written or
sent), what it prints as it starts (``head``), and how it runs with the ledger its calls are admitted
by (``run``). How an evaluation sends its units, one at a time or through a provider's batch API,
is the runner's business (``sp_dspy._runner``); what a compile does, the compiler's.
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from rich.console import Console

from .._budget import BudgetCaps, Ledger
from .._run_manifest import ErrorSummary, previous_run
from .._runner import (
    EvalConfig,
    EvalInvocation,
    EvalOutcome,
    RunLock,
    RunPaths,
    StepInputs,
    prepare_evaluation,
    read_run_results,
    unit_errors,
)

if TYPE_CHECKING:
    from .._compile import CompileConfig
    from .._data import Case
    from .._lm import LMConfig
    from .._metrics import ResultSet

Status = Literal["complete", "skipped", "interrupted", "capped"]


@dataclass
class StepContext:
    """What every step of one execution shares: where it prints, the ready ``dspy.LM`` objects by role
    (tests pass the fake; by default each step builds its own), and the resume and display choices."""

    console: Console
    lms: dict[str, Any] = field(default_factory=dict)
    retry_errors: bool = False
    log_requests: bool = False
    show_progress: bool = True
    window: int | None = None  # the task LM's context window for compiles (a local server's n_ctx)


class Step(Protocol):
    """One step of a plan (see the module's docstring)."""

    @property
    def kind(self) -> Literal["evaluate", "compile"]:
        """Head lines are numbered within a kind (``[2/4]``, ``[compile 1/2]``)."""
        ...

    @property
    def capped_by(self) -> str | None:
        """The cap that stopped the step while it ran (None: none did)."""
        ...

    def finished(self, *, retry_errors: bool) -> bool: ...

    def head(self, number: int, total: int) -> str | None: ...

    def announce(self, head: str) -> str:
        """The head line printed as the step starts."""
        ...

    def start(self) -> AbstractContextManager[object]: ...

    def run(self, context: StepContext, ledger: Ledger | None, head: str) -> Status: ...


class CapReached(Exception):
    """A cap is spent (or, ``why``, a batched step would overrun it): the step may not start."""

    def __init__(self, cap: str, why: str | None = None) -> None:
        super().__init__(cap)
        self.cap = cap
        self.why = why


def caps_left(ledger: Ledger) -> BudgetCaps:
    """The caps a step may spend up to (for its warnings and manifest); ``CapReached`` when one is spent."""
    left: dict[str, Any] = {}
    for cap, remaining in ledger.left().items():
        if remaining <= 0 or (cap != "max_usd" and remaining < 1):
            raise CapReached(cap)
        left[cap] = remaining if cap == "max_usd" else int(remaining)
    return BudgetCaps(**left)


# --- evaluate -----------------------------------------------------------------------------------


@dataclass
class EvaluateStep:
    """Evaluate one guard on the selected cases as an eval run of its own (run id, results, manifest).

    ``label``/``description``: how the plan names it (an ablation's variant; ``None`` for ``eval``'s
    one step, which prints no head line). ``paths``: where a plan put it (``None``: the runner picks
    the run id, the newest of this model on ``--resume``). ``cases``: the plan's cases, for the error
    count of a step finished earlier.
    """

    config: EvalConfig
    lm_config: LMConfig
    label: str | None = None
    description: str = ""
    paths: RunPaths | None = None
    cases: list[Case] = field(default_factory=list)
    kind: Literal["evaluate"] = "evaluate"
    status: Status = "skipped"
    errors: ErrorSummary = field(default_factory=ErrorSummary)
    outcome: EvalOutcome | None = None
    inputs: StepInputs | None = None

    @property
    def results_file(self) -> Path:
        """The step's results file (known once a plan placed it, or it started)."""
        paths, config = (
            (self.paths, self.config) if self.inputs is None else (self.inputs.paths, self.inputs.config)
        )
        assert paths is not None and config.protocol is not None
        return paths.results_for(config.protocol)

    def finished(self, *, retry_errors: bool) -> bool:
        """Its manifest says this model's run completed and its results file is as the run left it
        (with ``retry_errors``: and none of its units ended in error)."""
        if self.paths is None:
            return False
        earlier = finished_results(self.paths, self.results_file, self.lm_config.display_name())
        if earlier is None:
            return False
        self.errors = unit_errors(earlier, self.cases, str(self.config.protocol))
        return not (retry_errors and self.errors.errors)

    @property
    def capped_by(self) -> str | None:
        return None if self.outcome is None or self.status != "capped" else self.outcome.capped_by

    def head(self, number: int, total: int) -> str | None:
        return None if self.label is None else f"[{number}/{total}] {self.label}: {self.description}"

    def announce(self, head: str) -> str:
        return head

    def start(self) -> AbstractContextManager[object]:
        """Resolve the cases, program and paths (fails fast), then the run's lock: one writer per run."""
        self.inputs = prepare_evaluation(self.config, self.lm_config)
        return RunLock(self.inputs.paths)

    def run(self, context: StepContext, ledger: Ledger | None, head: str) -> Status:
        assert self.inputs is not None, "start() first"
        invocation = EvalInvocation(
            self.inputs, self.lm_config, console=context.console, retry_errors=context.retry_errors,
            log_requests=context.log_requests, ledger=ledger,
        )  # fmt: skip
        self.outcome = result = invocation.run(context.lms.get("task"), show_progress=context.show_progress)
        self.status = "interrupted" if result.interrupted else "complete"
        if result.capped_by is not None and not result.interrupted:
            self.status = "capped"
        self.errors = result.errors
        return self.status


def finished_results(paths: RunPaths, results_file: Path, model: str) -> ResultSet | None:
    """The run's results when the manifest says this model's run completed and the file is as it left it."""
    run = previous_run(paths.manifest, model)
    if run is None or run.status != "complete" or not results_file.exists():
        return None
    results = read_run_results(results_file)
    return results if run.totals.records == len(results.lines) else None


# --- compile ------------------------------------------------------------------------------------


def finished_compile(out: Path) -> dict[str, Any] | None:
    """The artifact manifest in ``out`` when its compile finished, else None: none saved, or a cap cut
    it short (a limited compile is compiled again, so it is not finished)."""
    manifest = out / "manifest.json"
    if not manifest.exists():
        return None
    document: dict[str, Any] = json.loads(manifest.read_text(encoding="utf-8"))
    return None if document.get("budget_limited") else document


@dataclass
class CompileStep:
    """Compile one optimizer seed on a split into ``config.out`` (an experiment's step).

    ``lm_configs``: the task, prompt and reflection LMs to call with (the last two may be None).
    The caps in ``config`` are set when the step starts, to what its ledger leaves.
    """

    optimizer: str
    seed: int
    config: CompileConfig
    lm_configs: tuple[LMConfig, LMConfig | None, LMConfig | None]
    kind: Literal["compile"] = "compile"
    status: Literal["compiled", "finished earlier", "capped", "not started"] = "not started"
    capped_by: str | None = None  # the cap that cut the compile short
    warnings: list[str] = field(default_factory=list)

    @property
    def out(self) -> Path:
        return self.config.out

    def finished(self, *, retry_errors: bool) -> bool:
        """Compiled earlier, not cut short by a cap (``finished_compile``)."""
        done = finished_compile(self.out) is not None
        if done:
            self.status = "finished earlier"
        return done

    def head(self, number: int, total: int) -> str | None:
        return f"[compile {number}/{total}] {self.optimizer} seed {self.seed}"

    def announce(self, head: str) -> str:
        return f"{head} -> {self.out}"

    def start(self) -> AbstractContextManager[object]:
        return nullcontext()  # the experiment's lock covers its artifact directories

    def run(self, context: StepContext, ledger: Ledger | None, head: str) -> Status:
        from .._compile import compile_guard

        config = self.config
        if ledger is not None:
            config = config.model_copy(update={"caps": caps_left(ledger)})
        task, prompt, reflection = self.lm_configs
        compiled = compile_guard(
            config, task, prompt, reflection, lms=context.lms or None, window=context.window, ledger=ledger
        )
        self.warnings = compiled.warnings
        for warning in compiled.warnings:  # capped demos, failed calls: the manifest keeps them too
            context.console.print(
                f"{head}: warning: {warning}", highlight=False, markup=False, soft_wrap=True
            )
        assert compiled.manifest is not None
        if compiled.manifest.budget_limited:
            self.status, self.capped_by = "capped", compiled.manifest.budget.refused_by or "max_calls"
            return "capped"
        self.status = "compiled"
        dev = compiled.manifest.dev
        context.console.print(
            f"{head}: dev {dev.before.score:.2f} -> {dev.after.score:.2f}", highlight=False, markup=False
        )
        return "complete"
