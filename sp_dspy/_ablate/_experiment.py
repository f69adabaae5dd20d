"""``sp-dspy experiment``: does a compiled guard beat the official baseline on cases it never saw?

An experiment is one plan run by the executor: it saves one grouped split (``OUTDIR/splits.json``),
compiles each optimizer x seed on its train/dev parts into ``OUTDIR/artifacts/OPT-sSEED``
(compile steps), then evaluates the baseline and every artifact on its test part (evaluation steps,
as an ablation names and compares them: ``OUTDIR/results``, the paired comparison), and adds the
seeds' spread and verdict (``_seeds``). One cap holds for the
whole of it: each step may spend what the finished steps left. Killed at any point, the same
command with ``--resume`` reuses every finished compile and every answered unit.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from .._benchmarks import load_benchmark
from .._budget import CAP_NAMES, BudgetCaps, Ledger, Reservation, Spend
from .._compile._artifact import write_json
from .._data import Benchmark, Split, make_split
from .._errors import ConfigError
from .._executor import (
    CapReached,
    CompileStep,
    EvaluateStep,
    Plan,
    PlanOutcome,
    Step,
    StepContext,
    caps_left,
    execute,
    finished_compile,
)
from .._lm import LMConfig
from .._runner import EvalConfig, RunPaths, select_cases, units_of
from .._user_dirs import ensure_writable_dir
from .._writer_lock import WriterLock
from ._plan import EXPERIMENT_FILE, AblationPlan, ExperimentPlan, reconcile_experiment
from ._run import (
    REPORT_FILE,
    RESULTS_DIR,
    SUMMARY_FILE,
    AblationOutcome,
    evaluation_steps,
    variant_runs,
)
from ._run import summarise as summarise_ablation
from ._seeds import (
    ExperimentSummary,
    experiment_html,
    manifest_spend,
    optimizer_gains,
    optimizer_result,
    results_spend,
    seed_result,
)
from ._variants import NAMED_VARIANTS, PlannedVariant

LOCK_FILE = "experiment.lock"
SPLIT_FILE = "splits.json"
ARTIFACTS_DIR = "artifacts"
#: The ablation's run id: its variants' results are ``results/results_experiment-<label>_<model>.jsonl``.
RUN_ID = "experiment"


def artifact_dir(out: Path, optimizer: str, seed: int) -> Path:
    return out / ARTIFACTS_DIR / f"{optimizer}-s{seed}"


def spent_so_far(plan: ExperimentPlan, out: Path) -> Spend:
    """What the experiment's finished compiles and every unit its evaluations recorded used.

    Replayed answers count at their price (a compile counts every call, so its rerun is a
    replay): the total is the experiment's, however many invocations it took. A compile a cap
    cut short is left out: it is compiled again, and its own budget counts the replayed calls.
    """
    total = Spend()
    for optimizer, seed in plan.steps():
        if (document := finished_compile(artifact_dir(out, optimizer, seed))) is not None:
            total += manifest_spend(document)
    for label in [plan.baseline, *(artifact_dir(out, o, s).name for o, s in plan.steps())]:
        total += results_spend(variant_paths(out, label, plan).results_for(plan.protocol))
    return total


def variant_paths(out: Path, label: str, plan: ExperimentPlan) -> RunPaths:
    """Where the ablation writes the test evaluation of variant ``label`` (as ``run_ablation`` names it)."""
    return RunPaths(out / RESULTS_DIR, f"{RUN_ID}-{label}", plan.lm.short_name())


def step_ledger(plan: ExperimentPlan, out: Path) -> Ledger:
    """The experiment's ledger for its next step: its caps, and what its finished steps spent as
    their records say (each step is admitted by it, so no step passes what the others left)."""
    return Ledger(plan.caps, earlier=spent_so_far(plan, out), replays_count=True)


def batch_caps(config: EvalConfig, lm_config: LMConfig, left: BudgetCaps) -> BudgetCaps:
    """The caps of a batched test evaluation: none, once the worst case of its units not yet answered
    (each one's prompt and output limit, at the batch rate) fits in what is ``left`` of the experiment's caps.

    A batch is paid as a whole, so eval refuses per-call caps with ``--batch``; the experiment's
    cap is kept by admitting each batched step as a whole before it is submitted instead.

    Raises:
        CapReached: the worst case exceeds a cap left (``why`` says by how much); nothing is sent.
        ConfigError: ``--max-usd`` is set and the model has no batch price to check it with.
    """
    if not left.any:
        return BudgetCaps()
    from .._batch import AnswerBook
    from .._runner import read_run_results

    results = RunPaths(config.output_dir, config.run_id or RUN_ID, lm_config.short_name())
    protocol = str(config.protocol)  # an ablation variant's: always set
    batches = results.batch_dir_for(protocol)
    book = AnswerBook(batches) if batches.is_dir() else None
    if book is not None and book.in_flight():
        return BudgetCaps()  # submitted before a kill: paid already, collecting it costs nothing more
    worst, priced = _batch_worst_case(config, lm_config)
    path = results.results_for(protocol)
    answered = (
        sum(1 for record in read_run_results(path).lines if not record.error_class) if path.exists() else 0
    )
    pending = max(0, worst.calls - answered)
    share = pending / worst.calls if worst.calls else 0.0
    name = (config.run_id or "").removeprefix(f"{RUN_ID}-")  # the variant's label
    if left.max_usd is not None and not priced:
        raise ConfigError(
            f"--max-usd with --batch: model '{lm_config.display_name()}' has no batch price, so the "
            f"batched test evaluation of {name} cannot be held to the cap; drop --max-usd or --batch"
        )
    tokens, usd = round(worst.tokens * share), worst.usd * share
    worst_use: dict[str, tuple[float, str]] = {
        "max_calls": (pending, f"{pending} call(s)"),
        "max_tokens": (tokens, f"{tokens:,} tokens"),
        "max_usd": (usd, f"{usd:.4f} USD"),
    }
    for cap in CAP_NAMES:
        limit = getattr(left, cap)
        use, shown = worst_use[cap]
        if limit is not None and use > limit:
            remaining = f"{limit:.4f} USD" if cap == "max_usd" else f"{limit:,}"
            raise CapReached(
                cap,
                f"the batched test evaluation of {name} may take up to {shown} at the batch rate "
                f"({pending} unit(s) left, each at its prompt and output limit), more than the {remaining} "
                "left of the cap; a batch is paid as a whole, so it was not submitted",
            )
    return BudgetCaps()


def _batch_worst_case(config: EvalConfig, lm_config: LMConfig) -> tuple[Reservation, bool]:
    """The worst case of every unit of a batched evaluation at the batch rate, and whether it is priced."""
    from .._runner import build_program, run_pricing, select_cases, unit_worst_case

    _, cases = select_cases(config)
    program, protocol, _ = build_program(config, constrained=lm_config.json_schema, cases=cases)
    pricing = run_pricing(program, protocol, lm_config, batch=True)
    worst = unit_worst_case(program, protocol, pricing)
    parts = [worst(unit) for unit in units_of(cases, protocol)]
    total = Reservation(
        calls=len(parts),
        prompt_tokens=sum(part.prompt_tokens for part in parts),
        tokens=sum(part.tokens for part in parts),
        usd=sum(part.usd for part in parts),
    )
    return total, pricing.known


def compile_config(
    plan: ExperimentPlan, out: Path, optimizer: str, seed: int, split: Path, **extra: Any
) -> Any:
    """The compile of one optimizer seed on the experiment's split."""
    from .._compile import CompileConfig

    return CompileConfig(
        protocol=plan.protocol, cot=plan.program == "dspy-cot", optimizer=optimizer,
        optimizer_config=plan.optimizer_config, overrides=plan.settings.get(optimizer, {}),
        dataset=plan.data.dataset, benchmark=plan.data.benchmark, splits=split, ratios=plan.ratios,
        lenient=plan.data.lenient, seed=seed, out=artifact_dir(out, optimizer, seed), top_k=plan.top_k,
        concurrency=plan.concurrency, **extra,
    )  # fmt: skip


def ablation_plan(plan: ExperimentPlan, out: Path) -> AblationPlan:
    """The baseline and every artifact on the split's test part, compared to the baseline."""
    artifacts = [str(artifact_dir(out, optimizer, seed).resolve()) for optimizer, seed in plan.steps()]
    data = plan.data.model_copy(update={"split": f"{out / SPLIT_FILE}:test"})
    return AblationPlan(
        lm=plan.lm, variants=[plan.baseline, *artifacts], data=data, concurrency=plan.concurrency,
        run_id=RUN_ID, baseline=plan.baseline, n_boot=plan.n_boot, seed=0, batch=plan.batch,
    )  # fmt: skip


def split_file(folder: Path, plan: ExperimentPlan, seed: int) -> Path:
    """The split the compile of ``seed`` trains and selects on."""
    return folder / (f"splits-s{seed}.json" if plan.split_per_seed else SPLIT_FILE)


def write_splits(plan: ExperimentPlan, folder: Path) -> None:
    """The experiment's grouped split(s), written atomically, ``splits.json`` (the test part) last.

    With ``split_per_seed`` each seed's split is ``splits-sSEED.json``, and ``splits.json`` holds
    as its test part the cases every one of them tests on (no train or dev part).
    """
    data = plan.data
    loaded = load_benchmark(data.dataset, lenient=data.lenient, benchmark=data.benchmark)

    def split(seed: int) -> Split:
        return make_split(
            loaded.cases, seed=seed, ratios=plan.ratios, dataset_hash=loaded.content_hash,
            benchmark=data.benchmark, dataset=data.dataset,
        )  # fmt: skip

    if not plan.split_per_seed:
        write_json(folder / SPLIT_FILE, split(plan.split_seed).model_dump())
        return
    tested: set[str] | None = None
    for seed in plan.seeds:
        own = split(seed)
        write_json(split_file(folder, plan, seed), own.model_dump())
        tested = set(own.test) if tested is None else tested & set(own.test)
    common = [case.id for case in loaded.cases if case.id in (tested or set())]
    everywhere = Split(
        train=[],
        dev=[],
        test=common,
        seed=plan.split_seed,
        ratios=plan.ratios,
        dataset_hash=loaded.content_hash,
    )
    write_json(folder / SPLIT_FILE, everywhere.model_dump())


# --- the run --------------------------------------------------------------------------------


@dataclass
class ExperimentOutcome:
    """What ``run_experiment`` did; ``summary`` is None unless every step finished."""

    plan: ExperimentPlan
    out: Path
    compiles: list[CompileStep] = field(default_factory=list)
    ablation: AblationOutcome | None = None
    capped_by: str | None = None  # the cap that stopped the experiment
    cap_note: str | None = None  # why a batched step was not submitted under the cap
    summary: ExperimentSummary | None = None
    summary_file: Path | None = None
    report_file: Path | None = None

    @property
    def interrupted(self) -> bool:
        return self.ablation is not None and self.ablation.interrupted


Session = Callable[[LMConfig], AbstractContextManager[LMConfig]]


def _open_lms(
    plan: ExperimentPlan, session: Session | None, stack: contextlib.ExitStack
) -> dict[str, LMConfig | None]:
    """Each LM's config to call with for the whole experiment (a local model started once)."""
    opened = session or nullcontext
    return {
        role: None if config is None else stack.enter_context(opened(config))
        for role, config in (
            ("task", plan.lm),
            ("prompt", plan.prompt_lm),
            ("reflection", plan.reflection_lm),
        )
    }


def _seeded(config: LMConfig | None, seed: int, seed_lm: bool) -> LMConfig | None:
    """``config`` sending ``seed`` in every request body when ``seed_lm`` (else unchanged)."""
    if config is None or not seed_lm:
        return config
    return config.model_copy(update={"extra_body": {**(config.extra_body or {}), "seed": seed}})


def run_experiment(
    plan: ExperimentPlan,
    out: Path,
    *,
    resume: bool = False,
    retry_errors: bool = False,
    session: Session | None = None,
    lms: dict[str, Any] | None = None,
    console: Console | None = None,
    show_progress: bool = True,
    window: int | None = None,
) -> ExperimentOutcome:
    """Split, compile every optimizer seed, evaluate the baseline and each artifact on test, summarise.

    One plan run by the executor under the experiment's lock: the compile steps, then the evaluation
    steps (the baseline and every artifact on the split's test part), then the summary and report.
    ``lms``: ready ``dspy.LM`` objects by role (tests pass the fake); by default each step builds
    its own from the configs. A step a cap stops ends the experiment there (``capped_by``); a
    compile the cap limited is compiled again on ``--resume`` (its answers from the cache).
    ``retry_errors`` (with ``resume``) re-sends the test units that ended in error. A test
    evaluation that stops early raises ``RunStopped`` naming the command that continues it.
    """
    plan = plan.resolved()
    reconcile_experiment(plan, out, resume=resume)  # fails fast: nothing written yet
    if plan.batch:  # a provider without a batch API fails before the compiles, not after them
        from .._batch import wire_class

        wire_class(plan.lm.provider, plan.lm.display_name())
    ensure_writable_dir(out, what="--out")
    console = console or Console(stderr=True)
    outcome = ExperimentOutcome(plan=plan, out=out)
    # The test evaluations continue runs of an earlier invocation once it reached them.
    run = _ExperimentRun(plan, out, outcome, resume_evaluations=resume and (out / RESULTS_DIR).is_dir())
    with contextlib.ExitStack() as stack:
        executed = execute(
            Plan(
                lambda: run.steps(_open_lms(plan, session, stack), console), lock=experiment_lock(out),
                skip_finished=True, ledger_for=run.admitting, report=run.report,
                continue_command=f"sp-dspy experiment --out {out} --resume --retry-errors",
            ),
            StepContext(console, lms=lms or {}, retry_errors=retry_errors, show_progress=show_progress,
                        window=window),
        )  # fmt: skip
    outcome.compiles = [step for step in executed.reached if isinstance(step, CompileStep)]
    if outcome.ablation is not None:
        outcome.ablation.runs = variant_runs(executed, run.variants)
    outcome.capped_by, outcome.cap_note = executed.capped_by, executed.cap_note
    return outcome


def experiment_lock(out: Path) -> WriterLock:
    """The one-writer lock of the experiment in ``out``: a second ``--resume`` would compile the same
    seeds and write the same report under it."""
    return WriterLock(
        out / LOCK_FILE,
        f"the experiment in {out}",
        "one experiment has one writer; wait for it to end (or stop it), then --resume",
    )


@dataclass
class _ExperimentRun:
    """The experiment's plan as the executor asks for it: its steps (named under the lock, once the plan
    and split are saved), the ledger each step is admitted by, and the report once every step finished."""

    plan: ExperimentPlan
    out: Path
    outcome: ExperimentOutcome
    resume_evaluations: bool
    variants: list[PlannedVariant] = field(default_factory=list)
    task: LMConfig | None = None
    loaded: Benchmark | None = None

    def steps(self, live: dict[str, LMConfig | None], console: Console) -> list[Step]:
        plan, out = self.plan, self.out
        write_json(out / EXPERIMENT_FILE, plan.public_dict())
        if not (out / SPLIT_FILE).exists():
            write_splits(plan, out)
            console.print(f"split: {out / SPLIT_FILE}", highlight=False)
        self.task = live["task"]
        assert self.task is not None
        compiles: list[Step] = []
        for optimizer, seed in plan.steps():
            config = compile_config(plan, out, optimizer, seed, split_file(out, plan, seed), force=True)
            task, prompt, reflection = (
                _seeded(live[role], seed, plan.seed_lm) for role in ("task", "prompt", "reflection")
            )
            assert task is not None
            compiles.append(CompileStep(optimizer, seed, config, (task, prompt, reflection)))
        ablation = ablation_plan(plan, out)
        ablation = ablation.model_copy(update={"data": ablation.data.resolved()})
        self.loaded, cases = select_cases(EvalConfig(data=ablation.data))
        self.outcome.ablation = AblationOutcome(plan=ablation, out=out, cases=cases)
        self.variants = experiment_variants(plan, out)
        evaluations = evaluation_steps(
            ablation, self.variants, out, self.task, resume=self.resume_evaluations, cases=cases
        )
        return [*compiles, *evaluations]

    def admitting(self, step: Step) -> Ledger | None:
        """The ledger each step is admitted by: the experiment's caps and what its other steps spent (a
        batched test evaluation: checked as a whole before it is submitted, and none)."""
        ledger = step_ledger(self.plan, self.out)
        left = caps_left(ledger)
        if isinstance(step, CompileStep):
            return ledger
        assert isinstance(step, EvaluateStep) and self.task is not None
        if self.plan.batch:
            batch_caps(step.config, self.task, left)
            return None
        return ledger if self.plan.caps.any else None

    def report(self, executed: PlanOutcome) -> None:
        """The summary (seeds against the baseline, spread, verdict) and the HTML report."""
        ablation, plan, out = self.outcome.ablation, self.plan, self.out
        assert ablation is not None and self.loaded is not None
        ablation.runs = variant_runs(executed, self.variants)
        ablation.summary = summarise_ablation(ablation.plan, ablation.runs, self.loaded, ablation.cases)
        summary = self.outcome.summary = summarise(plan, out, ablation)
        self.outcome.summary_file = summary.write_json(out / SUMMARY_FILE)
        from .._report import write_html

        title = (
            f"sp-dspy experiment: {plan.lm.display_name()}, {', '.join(plan.optimizers)} x seeds {plan.seeds}"
        )
        self.outcome.report_file = write_html(
            ablation.summary, out / REPORT_FILE, title=title, lead=experiment_html(summary),
            command="sp-dspy experiment",
        )  # fmt: skip


def experiment_variants(plan: ExperimentPlan, out: Path) -> list[PlannedVariant]:
    """The baseline and every optimizer seed's artifact (labelled by its directory's name), as the
    ablation of their test evaluations names them; known before any artifact is compiled."""
    program, protocol, layout = NAMED_VARIANTS[plan.baseline]
    artifacts = [
        PlannedVariant(folder.name, str(folder.resolve()), plan.protocol, artifact=True)
        for folder in (artifact_dir(out, optimizer, seed) for optimizer, seed in plan.steps())
    ]
    return [PlannedVariant(plan.baseline, program, protocol, layout), *artifacts]


def summarise(plan: ExperimentPlan, out: Path, ablation: AblationOutcome) -> ExperimentSummary:
    """Per optimizer every seed against the baseline, then the spread and the verdict."""
    comparison = ablation.summary
    assert comparison is not None
    files = {run.variant.label: run.results_file for run in ablation.runs}
    per_optimizer = {
        optimizer: [
            seed_result(
                comparison,
                optimizer,
                seed,
                artifact_dir(out, optimizer, seed),
                files[artifact_dir(out, optimizer, seed).name],
            )
            for seed in plan.seeds
        ]
        for optimizer in plan.optimizers
    }
    gains = optimizer_gains(comparison, ablation.cases, files, per_optimizer)
    results = [
        optimizer_result(optimizer, seeds, comparison.baseline, gains[optimizer], len(plan.optimizers))
        for optimizer, seeds in per_optimizer.items()
    ]
    base = comparison.variant(comparison.baseline).cells["ALL"]
    return ExperimentSummary(
        plan=plan.public_dict(),
        baseline=comparison.baseline,
        baseline_test={"rmr_avg": base.rmr, "rmr_exact": base.rmr_exact, "rdr": base.rdr},
        baseline_evaluation=results_spend(files[comparison.baseline]).as_dict(),
        optimizers=results,
        comparison=comparison,
    )
