"""``experiment --dry-run``: every compile and every test evaluation of an experiment, projected.

Sends nothing and writes nothing in the experiment's directory: a split not written yet is made
in a scratch directory, each compile priced as ``compile --dry-run`` prices it.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from pydantic import BaseModel, Field

from .._budget import Spend, projected
from .._executor import finished_compile, finished_results
from .._pricing import batch_price_basis, completion_guess, pricing_for
from .._runner import EvalConfig, units_of
from ._experiment import SPLIT_FILE, artifact_dir, compile_config, split_file, variant_paths, write_splits
from ._plan import ExperimentPlan


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
    from .._runner import plan_run, select_cases

    with tempfile.TemporaryDirectory() as scratch:
        folder = out if (out / SPLIT_FILE).exists() else Path(scratch)
        if folder != out:
            write_splits(plan, folder)
        data = plan.data.model_copy(update={"split": f"{folder / SPLIT_FILE}:test"})
        baseline = EvalConfig(
            data=data, program=plan.baseline_program, protocol=plan.protocol, caps=plan.caps, batch=plan.batch
        )
        _, test_cases = select_cases(baseline)
        units = len(units_of(test_cases, plan.protocol))
        compiles, evaluations = _compiles_priced(plan, out, folder, units, window=window)
        base = plan_run(baseline, plan.lm)
        steps = [
            *compiles,
            PricedStep(step="test", name=plan.baseline, estimate=base.estimate, batch_usd=base.batch_usd),
            *evaluations,
        ]
    for step in steps:
        if step.step == "test":
            step.done = _evaluated(out, step.name, plan)
    total, left, total_batch, left_batch = _totals(plan, steps)
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


def _totals(plan: ExperimentPlan, steps: list[PricedStep]) -> tuple[Spend, Spend, float | None, float | None]:
    """Every step's spend and the unfinished ones' (unpriced when a step is), and the same in USD
    with the test evaluations at the batch rate (``batch`` plans whose evaluations are all priced)."""
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
    return total, left, total_batch, left_batch


def _compiles_priced(
    plan: ExperimentPlan, out: Path, folder: Path, units: int, *, window: int | None
) -> tuple[list[PricedStep], list[PricedStep]]:
    """Each compile as ``compile --dry-run`` prices it, and the test evaluation of its artifact:
    ``units`` calls at the prompt size its final dev scoring is priced at."""
    from .._compile import compile_guard

    guess = completion_guess(plan.protocol, plan.program == "dspy-cot", plan.lm)
    pricing, batched = pricing_for(plan.lm, guess), pricing_for(plan.lm, guess, batch=True)
    compiles: list[PricedStep] = []
    evaluations: list[PricedStep] = []
    for optimizer, seed in plan.steps():
        split = split_file(folder, plan, seed)
        config = compile_config(plan, out, optimizer, seed, split, dry_run=True, caps=plan.caps)
        compiled = compile_guard(config, plan.lm, plan.prompt_lm, plan.reflection_lm, window=window).plan
        name = artifact_dir(out, optimizer, seed).name
        done = finished_compile(artifact_dir(out, optimizer, seed)) is not None  # as the run decides
        compiles.append(PricedStep(step="compile", name=name, estimate=compiled.total, done=done))
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
    return compiles, evaluations


def _batched_usd(step: PricedStep) -> float:
    """A step's USD with a test evaluation at the batch rate (a compile at its own)."""
    return (step.batch_usd if step.batch_usd is not None else step.estimate.usd) or 0.0


def _evaluated(out: Path, label: str, plan: ExperimentPlan) -> bool:
    """Whether the test evaluation of this variant finished, as the run decides (``finished_results``)."""
    paths = variant_paths(out, label, plan)
    return finished_results(paths, paths.results_for(plan.protocol), plan.lm.display_name()) is not None
