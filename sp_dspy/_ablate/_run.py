"""``run_ablation``: a plan of evaluation steps, every variant on the same cases, then one report.

Each variant is an ordinary eval run (run id ``<run-id>-<variant>`` in ``OUTDIR/results``) run by
the executor, so it inherits the runner's durability, resume and manifests.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from sp_dspy.programs import load_program

from .._budget import BudgetCaps
from .._errors import ConfigError
from .._executor import EvaluateStep, Plan, PlanOutcome, Status, Step, StepContext, execute
from .._report import OFFICIAL_PER_POLICY, build_summary, write_html
from .._run_manifest import ErrorSummary
from .._runner import EvalConfig, RunPaths, new_run_id, select_cases
from .._user_dirs import ensure_writable_dir
from ._plan import AblationPlan, ablation_lock, reconcile, save_plan
from ._variants import PlannedVariant, resolve_variants

if TYPE_CHECKING:
    from .._data import Benchmark, Case
    from .._lm import LMConfig
    from .._report import ComparisonSummary

RESULTS_DIR = "results"
SUMMARY_FILE = "summary.json"
REPORT_FILE = "report.html"


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
class AblationOutcome:
    """What ``run_ablation`` produced; ``summary`` is None when it was interrupted."""

    plan: AblationPlan
    out: Path
    cases: list[Case]
    runs: list[VariantRun] = field(default_factory=list)
    summary: ComparisonSummary | None = None
    summary_file: Path | None = None
    report_file: Path | None = None

    @property
    def interrupted(self) -> bool:
        return any(run.status == "interrupted" for run in self.runs)

    @property
    def capped_by(self) -> str | None:
        """The cap that stopped a variant (the ablation stopped there), or None."""
        return next((run.capped_by for run in self.runs if run.status == "capped"), None)

    @property
    def units_failed(self) -> int:
        """Units of every variant that ended in error."""
        return sum(run.errors.errors for run in self.runs)


def variant_config(
    plan: AblationPlan,
    variant: PlannedVariant,
    paths: RunPaths,
    *,
    resume: bool,
    caps: BudgetCaps | None = None,
) -> EvalConfig:
    """The eval settings of one variant: the plan's cases and parser, the variant's program, its caps."""
    return EvalConfig(
        data=plan.data,
        program=variant.program,
        protocol=variant.protocol,
        parser=plan.parser,
        allow_overlap=plan.allow_overlap,
        per_rule_layout=variant.layout,
        concurrency=plan.concurrency,
        batch=plan.batch,
        output_dir=paths.output_dir,
        run_id=paths.run_id,
        resume=resume,
        caps=caps or BudgetCaps(),
    )


def _prepare(plan: AblationPlan) -> tuple[list[PlannedVariant], Benchmark, list[Case]]:
    """Everything that can fail fast, before any LM call or file is written."""
    variants = resolve_variants(plan.variants)
    labels = [variant.label for variant in variants]
    if plan.baseline is not None and plan.baseline not in labels:
        raise ConfigError(
            f"--baseline: {plan.baseline!r} is not a variant of this ablation ({', '.join(labels)})"
        )
    for variant in variants:  # a broken program.json fails before any LM call
        if variant.artifact:
            load_program(variant.program)
    loaded, cases = select_cases(EvalConfig(data=plan.data))
    if not cases:
        raise ConfigError(
            "ablate: the data selection (--dataset, --level, --split, --limit ...) has no cases"
        )
    return variants, loaded, cases


def run_ablation(
    plan: AblationPlan,
    out: Path,
    *,
    resume: bool = False,
    retry_errors: bool = False,
    log_requests: bool = False,
    session: Callable[[LMConfig], AbstractContextManager[LMConfig]] | None = None,
    lm: Any = None,
    console: Console | None = None,
    show_progress: bool = True,
) -> AblationOutcome:
    """Run the plan's variants one after another in ``out`` (skipping finished ones), then write the report.

    A plan of evaluation steps run by the executor under the ablation's lock. ``session`` turns
    ``plan.lm`` into the config to call with, for the whole ablation. ``lm`` is one ``dspy.LM`` for
    every variant (tests pass the fake); by default each variant builds its own. ``retry_errors``
    (with ``resume``) re-sends errored units, also of finished variants; ``log_requests`` keeps each
    unit's requests with its record. A variant that stops early raises ``RunStopped``; one a cap
    stops ends the ablation there (status ``capped``, no summary).
    """
    # The plan saved records its dataset and split files resolved: --resume works from any directory.
    plan = plan.model_copy(update={"data": plan.data.resolved()})
    variants, loaded, cases = _prepare(plan)  # fails fast: nothing written yet
    ensure_writable_dir(out, what="--out")
    outcome = AblationOutcome(plan=plan, out=out, cases=cases)
    with contextlib.ExitStack() as live_lms:

        def steps() -> list[Step]:  # under the ablation's lock: a second --resume would rewrite the plan
            outcome.plan = reconcile(outcome.plan, out, resume=resume, new_run_id=new_run_id())
            save_plan(outcome.plan, out)
            live = live_lms.enter_context((session or nullcontext)(outcome.plan.lm))
            return list(evaluation_steps(outcome.plan, variants, out, live, resume=resume, cases=cases))

        def report(executed: PlanOutcome) -> None:
            outcome.runs = variant_runs(executed, variants)
            write_report(outcome, loaded)

        executed = execute(
            Plan(steps, lock=ablation_lock(out), skip_finished=resume, report=report,
                 continue_command=f"sp-dspy ablate --out {out} --resume --retry-errors"),
            StepContext(console or Console(stderr=True), lms={} if lm is None else {"task": lm},
                        retry_errors=retry_errors, log_requests=log_requests, show_progress=show_progress),
        )  # fmt: skip
        outcome.runs = variant_runs(executed, variants)
    return outcome


def write_report(outcome: AblationOutcome, loaded: Benchmark) -> None:
    """Every variant completed: the summary (``summary.json``) and the HTML report."""
    plan, out = outcome.plan, outcome.out
    outcome.summary = summarise(plan, outcome.runs, loaded, outcome.cases)
    outcome.summary_file = outcome.summary.write_json(out / SUMMARY_FILE)
    title = f"sp-dspy ablation: {plan.lm.display_name()} on {outcome.summary.n_cases} cases"
    outcome.report_file = write_html(
        outcome.summary, out / REPORT_FILE, title=title, command="sp-dspy ablate"
    )


def evaluation_steps(
    plan: AblationPlan,
    variants: list[PlannedVariant],
    out: Path,
    live: LMConfig,
    *,
    resume: bool,
    cases: list[Case],
) -> list[EvaluateStep]:
    """The plan's evaluations: each variant an eval run of its own (run id ``<run-id>-<variant>``)."""
    steps = []
    for variant in variants:
        paths = RunPaths(out / RESULTS_DIR, f"{plan.run_id}-{variant.slug}", live.short_name())
        config = variant_config(plan, variant, paths, resume=resume)
        steps.append(
            EvaluateStep(config, live, label=variant.label, description=describe(variant), paths=paths,
                         cases=cases)
        )  # fmt: skip
    return steps


def variant_runs(executed: PlanOutcome, variants: list[PlannedVariant]) -> list[VariantRun]:
    """Each evaluation step the plan reached (its steps are the variants', in order), as the
    ablation's table and summary read it."""
    runs = []
    reached = [step for step in executed.reached if isinstance(step, EvaluateStep)]
    for variant, step in zip(variants, reached, strict=False):
        assert step.paths is not None
        result = step.outcome
        run = VariantRun(
            variant, step.paths.run_id, step.results_file, step.status,
            units_run=0 if result is None else result.units_run,
            units_skipped_on_resume=0 if result is None else result.skipped_on_resume,
            errors=step.errors, capped_by=step.capped_by,
        )  # fmt: skip
        runs.append(run)
    return runs


def describe(variant: PlannedVariant) -> str:
    """``official per-policy``, ``mipro-s0 per-rule, prefix layout (not official)``."""
    program = Path(variant.program).name if variant.artifact else variant.program
    layout = f", {variant.layout} layout (not official)" if variant.layout != "official" else ""
    return f"{program} {variant.protocol}{layout}"


def summarise(
    plan: AblationPlan, runs: list[VariantRun], loaded: Benchmark, cases: list[Case]
) -> ComparisonSummary:
    """Each variant's results file scored on the ablation's cases.

    The baseline is the plan's, else ``official-per-policy`` when it ran, else the report's default.
    """
    labels = [run.variant.label for run in runs]
    baseline = plan.baseline or (OFFICIAL_PER_POLICY if OFFICIAL_PER_POLICY in labels else None)
    return build_summary(
        cases,
        [(run.variant.label, [run.results_file]) for run in runs],
        baseline,
        benchmark=plan.data.benchmark,
        dataset=loaded.source,
        content_hash=loaded.content_hash,
        n_boot=plan.n_boot,
        seed=plan.seed,
        all_ids=[case.id for case in cases],
    )
