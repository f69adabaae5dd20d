"""``run_ablation``: every variant on the same cases through ``run_eval``, then one report.

Each variant is an ordinary eval run (run id ``<run-id>-<variant>`` in ``OUTDIR/results``),
so it inherits the runner's durability, resume and manifests.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from rich.console import Console

from sp_dspy.programs import load_program

from .._budget import BudgetCaps, Ledger
from .._errors import ConfigError
from .._report import OFFICIAL_PER_POLICY, build_summary, write_html
from .._run_manifest import ErrorSummary, previous_run
from .._runner import EvalConfig, new_run_id, read_run_results, run_eval
from .._runner._eval import select_cases
from .._runner._failures import RunStopped
from .._runner._paths import RunPaths
from .._runner._units import unit_errors
from .._user_dirs import ensure_writable_dir
from ._plan import AblationPlan, ablation_lock, reconcile, save_plan
from ._variants import PlannedVariant, resolve_variants

if TYPE_CHECKING:
    from .._data import Benchmark, Case
    from .._lm import LMConfig
    from .._metrics import ResultSet
    from .._report import ComparisonSummary

RESULTS_DIR = "results"
SUMMARY_FILE = "summary.json"
REPORT_FILE = "report.html"
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


def _finished(paths: RunPaths, results_file: Path, model: str) -> ResultSet | None:
    """The run's results when the manifest says this model's run completed and the file is as it left it."""
    run = previous_run(paths.manifest, model)
    if run is None or run.status != "complete" or not results_file.exists():
        return None
    results = read_run_results(results_file)
    return results if run.totals.records == len(results.lines) else None


def _describe(variant: PlannedVariant) -> str:
    program = Path(variant.program).name if variant.artifact else variant.program
    layout = f", {variant.layout} layout (not official)" if variant.layout != "official" else ""
    return f"{program} {variant.protocol}{layout}"


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
        with (session or nullcontext)(plan.lm) as live:
            try:
                for number, variant in enumerate(variants, 1):
                    paths = RunPaths(out / RESULTS_DIR, f"{plan.run_id}-{variant.slug}", live.short_name())
                    run = VariantRun(variant, paths.run_id, paths.results_for(variant.protocol), "skipped")
                    outcome.runs.append(run)
                    head = f"[{number}/{len(variants)}] {variant.label}: {_describe(variant)}"
                    earlier = _finished(paths, run.results_file, live.display_name()) if resume else None
                    if earlier is not None:
                        run.errors = unit_errors(earlier, cases, variant.protocol)
                        if not (retry_errors and run.errors.errors):
                            console.print(f"{head}: finished earlier, not run again", highlight=False)
                            continue
                    console.print(head, highlight=False)
                    config = variant_config(plan, variant, paths, resume=resume)
                    result = run_eval(
                        config,
                        live,
                        console=console,
                        lm=lm,
                        show_progress=show_progress,
                        retry_errors=retry_errors,
                        log_requests=log_requests,
                        ledger=None if ledger is None else ledger(config),
                    )
                    run.status = "interrupted" if result.interrupted else "complete"
                    if result.capped_by is not None and not result.interrupted:
                        run.status, run.capped_by = "capped", result.capped_by
                    run.units_run = result.units_run
                    run.units_skipped_on_resume = result.skipped_on_resume
                    run.errors = result.errors
                    if run.status != "complete":
                        return outcome
            except RunStopped as stopped:
                command = f"sp-dspy ablate --out {out} --resume --retry-errors"
                raise RunStopped(stopped.kind, stopped.reason, command) from None
        outcome.summary = summarise(plan, outcome.runs, loaded, cases)
        if not write_report:
            return outcome
        outcome.summary_file = outcome.summary.write_json(out / SUMMARY_FILE)
        title = f"sp-dspy ablation: {plan.lm.display_name()} on {outcome.summary.n_cases} cases"
        outcome.report_file = write_html(
            outcome.summary, out / REPORT_FILE, title=title, command="sp-dspy ablate"
        )
        return outcome


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
