"""``run_ablation``: every variant on the same cases through ``run_eval``, then one report.

Each variant is an ordinary eval run (run id ``<run-id>-<variant>`` in ``OUTDIR/results``),
so it inherits the runner's durability, resume and manifests.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from sp_dspy.programs import load_program

from .._budget import BudgetCaps, Ledger
from .._errors import ConfigError
from .._report import OFFICIAL_PER_POLICY, build_summary, write_html
from .._runner import EvalConfig, RunPaths, RunStopped, new_run_id, select_cases
from .._user_dirs import ensure_writable_dir
from ._plan import AblationPlan, ablation_lock, reconcile, save_plan
from ._steps import EvaluateStep, Executor, VariantRun
from ._variants import PlannedVariant, resolve_variants

if TYPE_CHECKING:
    from .._data import Benchmark, Case
    from .._lm import LMConfig
    from .._report import ComparisonSummary

RESULTS_DIR = "results"
SUMMARY_FILE = "summary.json"
REPORT_FILE = "report.html"


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
    ledger: Callable[[EvalConfig], Ledger | None] | None = None,
    write_report: bool = True,
) -> AblationOutcome:
    """Run the plan's variants one after another in ``out`` (skipping finished ones), then write the report.

    ``session`` turns ``plan.lm`` into the config to call with, for the whole ablation.
    ``lm`` is one ``dspy.LM`` for every variant (tests pass the fake); by default each
    variant builds its own. ``retry_errors`` (with ``resume``) re-sends errored units, also
    of finished variants; ``log_requests`` keeps each unit's requests with its record. A
    variant that stops early raises ``RunStopped``. ``ledger`` gives each variant, when it
    starts, the ledger its calls are admitted by (an experiment's: its caps and what its other
    steps spent), from the variant's eval settings (a batched one is checked as a whole before it is
    submitted, and gets none); a variant a cap stops ends the ablation there (status ``capped``, no summary).
    ``write_report`` False leaves ``summary.json`` and ``report.html`` to the caller.
    """
    # The plan saved records its dataset and split files resolved: --resume works from any directory.
    plan = plan.model_copy(update={"data": plan.data.resolved()})
    variants, loaded, cases = _prepare(plan)  # fails fast: nothing written yet
    ensure_writable_dir(out, what="--out")
    with ablation_lock(out):  # one writer: a second --resume would rewrite the plan and report under it
        console = console or Console(stderr=True)
        plan = reconcile(plan, out, resume=resume, new_run_id=new_run_id())
        save_plan(plan, out)
        outcome = AblationOutcome(plan=plan, out=out, cases=cases)
        executor = Executor(
            console, cases, resume=resume, retry_errors=retry_errors, log_requests=log_requests,
            show_progress=show_progress, lm=lm, ledger=ledger,
        )  # fmt: skip
        with (session or nullcontext)(plan.lm) as live:
            try:
                executor.evaluate(
                    evaluation_steps(plan, variants, out, live, resume=resume), live, outcome.runs
                )
            except RunStopped as stopped:
                command = f"sp-dspy ablate --out {out} --resume --retry-errors"
                raise RunStopped(stopped.kind, stopped.reason, command) from None
        if outcome.interrupted or outcome.capped_by is not None:
            return outcome
        outcome.summary = summarise(plan, outcome.runs, loaded, cases)
        if not write_report:
            return outcome
        outcome.summary_file = outcome.summary.write_json(out / SUMMARY_FILE)
        title = f"sp-dspy ablation: {plan.lm.display_name()} on {outcome.summary.n_cases} cases"
        outcome.report_file = write_html(
            outcome.summary, out / REPORT_FILE, title=title, command="sp-dspy ablate"
        )
        return outcome


def evaluation_steps(
    plan: AblationPlan, variants: list[PlannedVariant], out: Path, live: LMConfig, *, resume: bool
) -> list[EvaluateStep]:
    """The plan's evaluations: each variant an eval run of its own (run id ``<run-id>-<variant>``)."""
    steps = []
    for variant in variants:
        paths = RunPaths(out / RESULTS_DIR, f"{plan.run_id}-{variant.slug}", live.short_name())
        steps.append(EvaluateStep(variant, variant_config(plan, variant, paths, resume=resume), paths))
    return steps


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
