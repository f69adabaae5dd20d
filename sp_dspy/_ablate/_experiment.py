"""``sp-dspy experiment``: does a compiled guard beat the official baseline on cases it never saw?

An experiment is an ablation whose variants include compiles. It saves one grouped split
(``OUTDIR/splits.json``), compiles each optimizer x seed on its train/dev parts into
``OUTDIR/artifacts/OPT-sSEED`` (``compile_guard``), then runs the baseline and every artifact
on its test part as one ablation in ``OUTDIR`` (``run_ablation``: its results, resume and
paired comparison), and adds the seeds' spread and verdict (``_seeds``). One cap holds for the
whole of it: each step may spend what the finished steps left. Killed at any point, the same
command with ``--resume`` reuses every finished compile and every answered unit.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from rich.console import Console

from sp_dspy.optimizers import OPTIMIZER_NAMES, get_recipe, load_settings
from sp_dspy.programs import RAW_PROGRAMS

from .._benchmarks import BenchmarkName, load_benchmark
from .._budget import CAP_NAMES, BudgetCaps, Spend, projected
from .._compile._artifact import write_json
from .._compile._data import DEFAULT_RATIOS
from .._data import Split, make_split
from .._data._selection import resolved_path
from .._errors import ConfigError, validation_problem
from .._lm import LMConfig
from .._lm._config import ANSWER_SETTINGS
from .._pricing import batch_price_basis, completion_guess, pricing_for
from .._run_manifest import previous_run
from .._runner import DataSelection, EvalConfig
from .._runner._config import Protocol
from .._runner._failures import RunStopped
from .._runner._paths import RunPaths
from .._runner._units import units_of
from .._user_dirs import ensure_writable_dir
from .._writer_lock import WriterLock
from ._plan import AblationPlan, first_difference
from ._run import REPORT_FILE, RESULTS_DIR, SUMMARY_FILE, AblationOutcome, run_ablation
from ._seeds import (
    ExperimentSummary,
    experiment_html,
    manifest_spend,
    optimizer_result,
    results_spend,
    seed_result,
)
from ._variants import NAMED_VARIANTS

EXPERIMENT_FILE = "experiment.json"
LOCK_FILE = "experiment.lock"
SPLIT_FILE = "splits.json"
ARTIFACTS_DIR = "artifacts"
#: The ablation's run id: its variants' results are ``results/results_experiment-<label>_<model>.jsonl``.
RUN_ID = "experiment"
#: Settings a resumed experiment may change: they change what it may spend, how fast or how it is
#: paid (``batch``), not its answers.
MAY_CHANGE = ("caps", "concurrency", "batch")


class ExperimentPlan(BaseModel):
    """What an experiment runs; built from flags over an optional YAML ``--plan`` file.

    ``settings``: per optimizer, settings over the optimizer file's (``{"mipro": {"num_trials": 2}}``).
    ``split_seed``: the one split every optimizer seed compiles on (the seeds vary the optimizer only).
    ``split_per_seed``: each seed compiles on a split of its own, made with that seed; every variant
    is then tested on the cases in all of their test parts (no compile saw them).
    ``seed_lm``: each compile's LMs are sent its seed as well (the request body's ``seed``), so a
    provider that samples by seed samples differently per seed and alike when a seed is rerun.
    ``batch``: the test evaluations go through the provider's batch API (ablate's ``--batch``);
    the compiles call one at a time, since an optimizer's next call depends on earlier answers.
    """

    model_config = ConfigDict(extra="forbid")

    lm: LMConfig
    prompt_lm: LMConfig | None = None
    reflection_lm: LMConfig | None = None
    dataset: str | None = None
    benchmark: BenchmarkName = "safepyramid"
    lenient: bool = False
    protocol: Protocol = "per-policy"
    program: Literal["dspy", "dspy-cot"] = "dspy"
    #: The fixed-prompt program the artifacts are compared to: the official prompt, or the model's
    #: own guard format (``llama-guard``, ...) under the same protocol.
    baseline_program: str = "official"
    optimizers: list[str] = Field(default_factory=lambda: ["mipro"], min_length=1)
    seeds: list[int] = Field(default_factory=lambda: [0, 1, 2], min_length=1)
    split_seed: int = 0
    split_per_seed: bool = False  # each seed compiles on a split of its own (seed = the optimizer seed)
    seed_lm: bool = False  # the compiles' LMs get the seed too (providers that take one: OpenAI-compatible)
    ratios: tuple[float, float, float] = DEFAULT_RATIOS
    settings: dict[str, dict[str, Any]] = Field(default_factory=dict)
    optimizer_config: Path | None = None
    top_k: int = Field(default=1, ge=1)
    caps: BudgetCaps = Field(default_factory=BudgetCaps)
    concurrency: int = Field(default=8, ge=1, le=1024)
    batch: bool = False  # the test evaluations through the provider's batch API (compiles never)
    n_boot: int = Field(default=1000, ge=0)

    @field_validator("optimizers", "seeds", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        """``"a,b"`` (the flag's form) is the list ``[a, b]``."""
        return [item.strip() for item in value.split(",")] if isinstance(value, str) else value

    @field_validator("optimizers")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        for name in value:
            if name not in OPTIMIZER_NAMES:
                raise ValueError(f"unknown optimizer {name!r}; expected one of {', '.join(OPTIMIZER_NAMES)}")
        if len(set(value)) < len(value):
            raise ValueError("an optimizer is listed twice")
        return value

    @field_validator("seeds")
    @classmethod
    def _distinct(cls, value: list[int]) -> list[int]:
        if len(set(value)) < len(value):
            raise ValueError("a seed is listed twice")
        return value

    @field_validator("ratios")
    @classmethod
    def _ratios(cls, value: tuple[float, float, float]) -> tuple[float, float, float]:
        if any(part < 0 for part in value) or abs(sum(value) - 1.0) > 1e-6:
            raise ValueError("expected three non-negative train,dev,test ratios summing to 1")
        return value

    @field_validator("settings")
    @classmethod
    def _settings_of_listed(cls, value: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        for name in value:
            if name not in OPTIMIZER_NAMES:
                raise ValueError(f"settings for unknown optimizer {name!r}")
        return value

    @model_validator(mode="after")
    def _baseline_variant(self) -> Self:
        if self.baseline not in NAMED_VARIANTS or self.baseline_program not in RAW_PROGRAMS:
            supported = sorted({p for p, protocol, _ in NAMED_VARIANTS.values() if protocol == self.protocol})
            raise ValueError(
                f"baseline_program {self.baseline_program!r}: expected one of "
                f"{', '.join(p for p in supported if p in RAW_PROGRAMS)} under {self.protocol}"
            )
        return self

    @property
    def baseline(self) -> str:
        """The baseline's variant name under this protocol (the official prompt unless set)."""
        return f"{self.baseline_program}-{self.protocol}"

    def public_dict(self) -> dict[str, Any]:
        """The plan as saved: JSON types, the LMs' settings without secrets."""
        document = self.model_dump(mode="json")
        for role in ("lm", "prompt_lm", "reflection_lm"):
            config = getattr(self, role)
            document[role] = None if config is None else config.public_dict()
        return document

    def identity(self) -> dict[str, Any]:
        """What a resumed experiment must share with the run it continues (not caps or concurrency)."""
        public = self.public_dict()
        for role in ("lm", "prompt_lm", "reflection_lm"):
            if public[role] is not None:
                public[role] = {key: public[role].get(key) for key in ANSWER_SETTINGS}
        return {key: value for key, value in public.items() if key not in MAY_CHANGE}

    def resolved(self) -> ExperimentPlan:
        """The dataset and optimizer files as absolute paths (a Hub id stays as it is), so the saved
        plan means the same from any working directory (``--resume`` from elsewhere)."""
        dataset = None if self.dataset is None else resolved_path(self.dataset)
        settings_file = (
            None if self.optimizer_config is None else self.optimizer_config.expanduser().resolve()
        )
        return self.model_copy(update={"dataset": dataset, "optimizer_config": settings_file})

    def steps(self) -> list[tuple[str, int]]:
        """Every (optimizer, seed) compile, in the order they run."""
        return [(optimizer, seed) for optimizer in self.optimizers for seed in self.seeds]


def build_experiment(settings: dict[str, Any], where: str = "flags") -> ExperimentPlan:
    """Validate merged settings; the first problem becomes one line naming the field.

    Each optimizer's settings are checked now too: a bad one must not wait for the compiles before it.
    """
    try:
        plan = ExperimentPlan.model_validate(settings)
    except ValidationError as exc:
        name, message = validation_problem(exc)
        raise ConfigError(f"{where}: field {name or 'plan'}: {message}") from None
    for optimizer in plan.optimizers:
        recipe = get_recipe(optimizer)
        load_settings(
            recipe.name,
            recipe.settings_model,
            path=plan.optimizer_config,
            overrides=plan.settings.get(optimizer),
        )
    return plan


def artifact_dir(out: Path, optimizer: str, seed: int) -> Path:
    return out / ARTIFACTS_DIR / f"{optimizer}-s{seed}"


def load_saved(out: Path) -> ExperimentPlan | None:
    """``OUTDIR/experiment.json``, or None when the directory holds no experiment yet."""
    path = out / EXPERIMENT_FILE
    if not path.exists():
        return None
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(
            f"{path}: not readable JSON ({exc}); move it away or choose another --out"
        ) from None
    if not isinstance(document, dict):
        raise ConfigError(f"{path}: expected a JSON object")
    return build_experiment(document, str(path))


def reconcile(plan: ExperimentPlan, out: Path, *, resume: bool) -> None:
    """Refuse to mix two experiments in one ``out``: a saved one needs ``resume`` and the same setup."""
    saved = load_saved(out)
    saved = None if saved is None else saved.resolved()
    plan = plan.resolved()
    where = out / EXPERIMENT_FILE
    if saved is None:
        if resume:
            raise ConfigError(f"--resume: {where} does not exist, so there is no experiment to continue")
        return
    if not resume:
        raise ConfigError(
            f"{out} already holds an experiment ({where}); pass --resume to continue it, or choose another --out"
        )
    found = first_difference(saved.identity(), plan.identity())
    if found is not None:
        name, was, now = found
        raise ConfigError(
            f"--resume: {where} ran with {name}={was!r}, this run asks for {now!r};"
            " resuming would mix two setups in one report (use another --out)"
        )


class CapReached(Exception):
    """The experiment's cap is spent (or, ``why``, a batched step would overrun it): no further step may start."""

    def __init__(self, cap: str, why: str | None = None) -> None:
        super().__init__(cap)
        self.cap = cap
        self.why = why


def spent_so_far(plan: ExperimentPlan, out: Path) -> Spend:
    """What the experiment's finished compiles and every unit its evaluations recorded used.

    Replayed answers count at their price (a compile counts every call, so its rerun is a
    replay): the total is the experiment's, however many invocations it took. A compile a cap
    cut short is left out: it is compiled again, and its own budget counts the replayed calls.
    """
    total = Spend()
    for optimizer, seed in plan.steps():
        manifest = artifact_dir(out, optimizer, seed) / "manifest.json"
        document = json.loads(manifest.read_text(encoding="utf-8")) if manifest.exists() else None
        if document is not None and not document.get("budget_limited"):  # a limited one is compiled again
            total += manifest_spend(document)
    for label in [plan.baseline, *(artifact_dir(out, o, s).name for o, s in plan.steps())]:
        total += results_spend(_paths(out, label, plan).results_for(plan.protocol))
    return total


def _paths(out: Path, label: str, plan: ExperimentPlan) -> RunPaths:
    """Where the ablation writes the test evaluation of variant ``label`` (as ``run_ablation`` names it)."""
    return RunPaths(out / RESULTS_DIR, f"{RUN_ID}-{label}", plan.lm.short_name())


def caps_left(caps: BudgetCaps, spent: Spend) -> BudgetCaps:
    """The caps the next step may spend up to; ``CapReached`` when one is spent."""
    used = {"max_calls": spent.calls, "max_tokens": spent.tokens, "max_usd": spent.usd or 0.0}
    left: dict[str, Any] = {}
    for cap in CAP_NAMES:
        limit = getattr(caps, cap)
        if limit is None:
            continue
        remaining = limit - used[cap]
        if remaining <= 0 or (cap != "max_usd" and remaining < 1):
            raise CapReached(cap)
        left[cap] = remaining if cap == "max_usd" else int(remaining)
    return BudgetCaps(**left)


def batch_caps(config: EvalConfig, lm_config: LMConfig, left: BudgetCaps) -> BudgetCaps:
    """The caps of a batched test evaluation: none, once its units not yet answered, projected at
    the batch rate, fit in what is ``left`` of the experiment's caps.

    A batch is paid as a whole, so eval refuses per-call caps with ``--batch``; the experiment's
    cap is kept by checking each batched step before it is submitted instead.

    Raises:
        CapReached: the projection exceeds a cap left (``why`` says by how much); nothing is sent.
        ConfigError: ``--max-usd`` is set and the model has no batch price to check it with.
    """
    if not left.any:
        return BudgetCaps()
    from .._batch import AnswerBook
    from .._runner import read_run_results
    from .._runner._eval import plan_run

    results = RunPaths(config.output_dir, config.run_id or RUN_ID, lm_config.short_name())
    protocol = str(config.protocol)  # an ablation variant's: always set
    batches = results.batch_dir_for(protocol)
    book = AnswerBook(batches) if batches.is_dir() else None
    if book is not None and book.in_flight():
        return BudgetCaps()  # submitted before a kill: paid already, collecting it costs nothing more
    priced = plan_run(config, lm_config)
    units = priced.estimate.calls
    path = results.results_for(protocol)
    answered = (
        sum(1 for record in read_run_results(path).lines if not record.error_class) if path.exists() else 0
    )
    pending = max(0, units - answered)
    share = pending / units if units else 0.0
    name = (config.run_id or "").removeprefix(f"{RUN_ID}-")  # the variant's label
    if left.max_usd is not None and priced.batch_usd is None:
        raise ConfigError(
            f"--max-usd with --batch: model '{lm_config.display_name()}' has no batch price, so the "
            f"batched test evaluation of {name} cannot be held to the cap; drop --max-usd or --batch"
        )
    tokens, usd = round(priced.estimate.tokens * share), (priced.batch_usd or 0.0) * share
    projected_use: dict[str, tuple[float, str]] = {
        "max_calls": (pending, f"{pending} call(s)"),
        "max_tokens": (tokens, f"{tokens:,} tokens"),
        "max_usd": (usd, f"{usd:.4f} USD"),
    }
    for cap in CAP_NAMES:
        limit = getattr(left, cap)
        use, shown = projected_use[cap]
        if limit is not None and use > limit:
            remaining = f"{limit:.4f} USD" if cap == "max_usd" else f"{limit:,}"
            raise CapReached(
                cap,
                f"the batched test evaluation of {name} is projected at {shown} at the batch rate "
                f"({pending} unit(s) left), more than the {remaining} left of the cap; a batch is paid "
                "as a whole, so it was not submitted",
            )
    return BudgetCaps()


def compile_config(
    plan: ExperimentPlan, out: Path, optimizer: str, seed: int, split: Path, **extra: Any
) -> Any:
    """The compile of one optimizer seed on the experiment's split."""
    from .._compile import CompileConfig

    return CompileConfig(
        protocol=plan.protocol, cot=plan.program == "dspy-cot", optimizer=optimizer,
        optimizer_config=plan.optimizer_config, overrides=plan.settings.get(optimizer, {}),
        dataset=plan.dataset, benchmark=plan.benchmark, splits=split, ratios=plan.ratios,
        lenient=plan.lenient, seed=seed, out=artifact_dir(out, optimizer, seed), top_k=plan.top_k,
        concurrency=plan.concurrency, **extra,
    )  # fmt: skip


def ablation_plan(plan: ExperimentPlan, out: Path) -> AblationPlan:
    """The baseline and every artifact on the split's test part, compared to the baseline."""
    artifacts = [str(artifact_dir(out, optimizer, seed).resolve()) for optimizer, seed in plan.steps()]
    data = DataSelection(
        dataset=plan.dataset, benchmark=plan.benchmark, lenient=plan.lenient, split=f"{out / SPLIT_FILE}:test"
    )
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
    loaded = load_benchmark(plan.dataset, lenient=plan.lenient, benchmark=plan.benchmark)

    def split(seed: int) -> Split:
        return make_split(loaded.cases, seed=seed, ratios=plan.ratios, dataset_hash=loaded.content_hash)

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


# --- pricing (--dry-run) ----------------------------------------------------------------------


class PricedStep(BaseModel):
    """One step of the experiment and its projected spend; ``done``: finished in ``out`` already."""

    step: str  # compile or test
    name: str
    estimate: Spend
    done: bool = False
    batch_usd: float | None = None  # a test evaluation's USD through the batch API (``batch`` plans)


class ExperimentPrice(BaseModel):
    """What ``experiment --dry-run`` prints: every compile and every test evaluation."""

    steps: list[PricedStep]
    total: Spend
    left: Spend  # the steps not finished yet
    assumptions: list[str] = Field(default_factory=list)
    #: ``batch`` plans: the totals' USD with every test evaluation at the batch rate (None: unpriced).
    total_batch_usd: float | None = None
    left_batch_usd: float | None = None


def price_experiment(plan: ExperimentPlan, out: Path, *, window: int | None = None) -> ExperimentPrice:
    """Project every compile and every test evaluation. Sends nothing and writes nothing in ``out``.

    A test evaluation of an artifact is priced as its compile prices the final dev scoring
    per call (the compiled prompt: instructions and demonstrations), times the test units. A
    ``batch`` plan prices the test evaluations at the batch rate too (compiles never batch).
    """
    from .._compile import compile_guard
    from .._runner._eval import plan_run, select_cases

    steps: list[PricedStep] = []
    with tempfile.TemporaryDirectory() as scratch:
        folder = out if (out / SPLIT_FILE).exists() else Path(scratch)
        if folder != out:
            write_splits(plan, folder)
        data = DataSelection(
            dataset=plan.dataset,
            benchmark=plan.benchmark,
            lenient=plan.lenient,
            split=f"{folder / SPLIT_FILE}:test",
        )
        baseline = EvalConfig(
            data=data, program=plan.baseline_program, protocol=plan.protocol, caps=plan.caps, batch=plan.batch
        )
        _, test_cases = select_cases(baseline)
        units = len(units_of(test_cases, plan.protocol))
        guess = completion_guess(plan.protocol, plan.program == "dspy-cot", plan.lm)
        pricing, batched = pricing_for(plan.lm, guess), pricing_for(plan.lm, guess, batch=True)
        evaluations: list[PricedStep] = []
        for optimizer, seed in plan.steps():
            split = split_file(folder, plan, seed)
            config = compile_config(plan, out, optimizer, seed, split, dry_run=True, caps=plan.caps)
            compiled = compile_guard(config, plan.lm, plan.prompt_lm, plan.reflection_lm, window=window).plan
            name = artifact_dir(out, optimizer, seed).name
            done = (artifact_dir(out, optimizer, seed) / "manifest.json").exists()
            steps.append(PricedStep(step="compile", name=name, estimate=compiled.total, done=done))
            final = compiled.phases["dev_after"]["task"]
            per_call = final.usage.prompt_tokens / final.calls if final.calls else 0.0
            evaluations.append(
                PricedStep(
                    step="test",
                    name=name,
                    estimate=projected(units, per_call, pricing.completion_guess, pricing),
                    batch_usd=projected(units, per_call, guess, batched).usd if plan.batch else None,
                )
            )
        base = plan_run(baseline, plan.lm)
        steps.append(
            PricedStep(step="test", name=plan.baseline, estimate=base.estimate, batch_usd=base.batch_usd)
        )
        steps.extend(evaluations)
    for step in steps:
        if step.step == "test":
            step.done = _evaluated(out, step.name, plan)
    total = sum((step.estimate for step in steps), Spend())
    left = sum((step.estimate for step in steps if not step.done), Spend())
    if any(step.estimate.usd is None for step in steps):  # a partly priced total would understate it
        total.usage.cost = left.usage.cost = None
    total_batch = left_batch = None
    if (
        plan.batch
        and total.usd is not None
        and all(s.batch_usd is not None for s in steps if s.step == "test")
    ):
        total_batch = sum(_batched_usd(step) for step in steps)
        left_batch = sum(_batched_usd(step) for step in steps if not step.done)
    batch_lines = [
        f"batched USD: the test evaluations at {batch_price_basis(plan.lm)}; compiles one call at a time "
        "(an optimizer's next call depends on earlier answers)"
    ]
    return ExperimentPrice(
        steps=steps,
        total=total,
        left=left,
        total_batch_usd=total_batch,
        left_batch_usd=left_batch,
        assumptions=[
            *(batch_lines if plan.batch else []),
            "compiles: as sp-dspy compile --dry-run projects them (optimizer calls are upper estimates)",
            f"test evaluations: one call per {'judgment' if plan.protocol == 'per-rule' else 'case'} of the "
            f"{len(test_cases)} test cases; an artifact's prompt as its compile's final dev scoring prices it",
            "answers already in the response cache cost nothing; --resume runs only what is not finished",
        ],
    )


def _batched_usd(step: PricedStep) -> float:
    """A step's USD with a test evaluation at the batch rate (a compile at its own)."""
    return (step.batch_usd if step.batch_usd is not None else step.estimate.usd) or 0.0


def _evaluated(out: Path, label: str, plan: ExperimentPlan) -> bool:
    """Whether the ablation already finished the test evaluation of this variant."""
    run = previous_run(_paths(out, label, plan).manifest, plan.lm.display_name())
    return run is not None and run.status == "complete"


# --- the run --------------------------------------------------------------------------------


@dataclass
class CompileStep:
    """One optimizer seed's compile: what happened to it this time."""

    optimizer: str
    seed: int
    out: Path
    status: Literal["compiled", "finished earlier", "capped", "not started"] = "not started"
    warnings: list[str] = field(default_factory=list)


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


@contextlib.contextmanager
def _live(plan: ExperimentPlan, session: Session | None) -> Iterator[dict[str, LMConfig | None]]:
    """Each LM's config to call with for the whole experiment (a local model started once)."""
    opened = session or nullcontext
    with contextlib.ExitStack() as stack:
        yield {
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

    ``lms``: ready ``dspy.LM`` objects by role (tests pass the fake); by default each step builds
    its own from the configs. A step a cap stops ends the experiment there (``capped_by``); a
    compile the cap limited is compiled again on ``--resume`` (its answers from the cache).
    ``retry_errors`` (with ``resume``) re-sends the test units that ended in error. A test
    evaluation that stops early raises ``RunStopped`` naming the command that continues it.
    """
    console = console or Console(stderr=True)
    plan = plan.resolved()
    reconcile(plan, out, resume=resume)  # fails fast: nothing written yet
    if plan.batch:  # a provider without a batch API fails before the compiles, not after them
        from .._batch import wire_class

        wire_class(plan.lm.provider, plan.lm.display_name())
    ensure_writable_dir(out, what="--out")
    lock = WriterLock(
        out / LOCK_FILE,
        f"the experiment in {out}",
        "one experiment has one writer; wait for it to end (or stop it), then --resume",
    )
    with lock:  # a second --resume would compile the same seeds and write the same report under it
        return _run_locked(plan, out, session=session, lms=lms, console=console, show_progress=show_progress,
                           window=window, retry_errors=retry_errors)  # fmt: skip


def _run_locked(
    plan: ExperimentPlan,
    out: Path,
    *,
    session: Session | None,
    lms: dict[str, Any] | None,
    console: Console,
    show_progress: bool,
    window: int | None,
    retry_errors: bool,
) -> ExperimentOutcome:
    """``run_experiment`` once it holds the experiment's lock."""
    from .._compile import compile_guard

    write_json(out / EXPERIMENT_FILE, plan.public_dict())
    outcome = ExperimentOutcome(plan=plan, out=out)
    if not (out / SPLIT_FILE).exists():
        write_splits(plan, out)
        console.print(f"split: {out / SPLIT_FILE}", highlight=False)
    steps = plan.steps()
    with _live(plan, session) as live:
        task = live["task"]
        assert task is not None
        for number, (optimizer, seed) in enumerate(steps, 1):
            step = CompileStep(optimizer, seed, artifact_dir(out, optimizer, seed))
            outcome.compiles.append(step)
            head = f"[compile {number}/{len(steps)}] {optimizer} seed {seed}"
            manifest = step.out / "manifest.json"
            if manifest.exists() and not json.loads(manifest.read_text(encoding="utf-8")).get(
                "budget_limited"
            ):
                step.status = "finished earlier"
                console.print(f"{head}: finished earlier, not run again", highlight=False)
                continue
            try:
                caps = caps_left(plan.caps, spent_so_far(plan, out))
            except CapReached as reached:
                outcome.capped_by = reached.cap
                return outcome
            console.print(f"{head} -> {step.out}", highlight=False)
            split = split_file(out, plan, seed)
            config = compile_config(plan, out, optimizer, seed, split, caps=caps, force=True)
            task_lm, prompt_lm, reflection_lm = (
                _seeded(live[role], seed, plan.seed_lm) for role in ("task", "prompt", "reflection")
            )
            assert task_lm is not None
            compiled = compile_guard(config, task_lm, prompt_lm, reflection_lm, lms=lms, window=window)
            step.warnings = compiled.warnings
            for warning in compiled.warnings:  # capped demos, failed calls: the manifest keeps them too
                console.print(f"{head}: warning: {warning}", highlight=False, soft_wrap=True)
            assert compiled.manifest is not None
            if compiled.manifest.budget_limited:
                step.status = "capped"
                outcome.capped_by = compiled.manifest.budget.refused_by or "max_calls"
                return outcome
            step.status = "compiled"
            console.print(f"{head}: dev {compiled.manifest.dev.before.score:.2f} -> "
                          f"{compiled.manifest.dev.after.score:.2f}", highlight=False)  # fmt: skip

        def remaining(config: EvalConfig) -> BudgetCaps:
            try:
                left = caps_left(plan.caps, spent_so_far(plan, out))
                return batch_caps(config, task, left) if plan.batch else left
            except CapReached as reached:
                outcome.capped_by, outcome.cap_note = reached.cap, reached.why
                raise

        try:
            outcome.ablation = run_ablation(
                ablation_plan(plan, out), out, resume=(out / "plan.json").exists(), retry_errors=retry_errors,
                session=lambda _config: nullcontext(task), lm=(lms or {}).get("task"), console=console,
                show_progress=show_progress, caps=remaining, write_report=False,
            )  # fmt: skip
        except CapReached:
            return outcome
        except RunStopped as stopped:
            command = f"sp-dspy experiment --out {out} --resume --retry-errors"
            raise RunStopped(stopped.kind, stopped.reason, command) from None
    ablation = outcome.ablation
    if ablation.capped_by is not None:
        outcome.capped_by = ablation.capped_by
    if ablation.summary is None:
        return outcome
    outcome.summary = summarise(plan, out, ablation)
    outcome.summary_file = outcome.summary.write_json(out / SUMMARY_FILE)
    from .._report import write_html

    title = f"sp-dspy experiment: {plan.lm.display_name()}, {', '.join(plan.optimizers)} x seeds {plan.seeds}"
    outcome.report_file = write_html(
        ablation.summary, out / REPORT_FILE, title=title, lead=experiment_html(outcome.summary)
    )
    return outcome


def summarise(plan: ExperimentPlan, out: Path, ablation: AblationOutcome) -> ExperimentSummary:
    """Per optimizer every seed against the baseline, then the spread and the verdict."""
    comparison = ablation.summary
    assert comparison is not None
    files = {run.variant.label: run.results_file for run in ablation.runs}
    results = []
    for optimizer in plan.optimizers:
        seeds = [
            seed_result(comparison, optimizer, seed, artifact_dir(out, optimizer, seed),
                        files[artifact_dir(out, optimizer, seed).name])
            for seed in plan.seeds
        ]  # fmt: skip
        results.append(optimizer_result(optimizer, seeds, comparison.baseline))
    base = comparison.variant(comparison.baseline).cells["ALL"]
    return ExperimentSummary(
        plan=plan.public_dict(),
        baseline=comparison.baseline,
        baseline_test={"rmr_avg": base.rmr, "rmr_exact": base.rmr_exact, "rdr": base.rdr},
        baseline_evaluation=results_spend(files[comparison.baseline]).as_dict(),
        optimizers=results,
        comparison=comparison,
    )
