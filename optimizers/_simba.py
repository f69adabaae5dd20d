"""SIMBA: stochastic mini-batch ascent with self-reflective rules and demos.

Each step runs program variants on a minibatch and, for its most variable examples,
adds a successful trajectory as a demo or a prompt-LM rule to the instructions; scored
on train only. ``SIMBA.compile(seed=)`` seeds its generators; the recipe passes the seed.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from optimizers._recipe import CompileJob, Projection, Recipe
from optimizers._settings import OptimizerSettings


class SimbaSettings(OptimizerSettings):
    """``dspy.SIMBA`` settings."""

    bsize: int = Field(default=8, ge=1, description="Minibatch size (capped at the train split's size).")
    num_candidates: int = Field(default=4, ge=1, description="New candidate programs per step.")
    max_steps: int = Field(default=4, ge=1)
    max_demos: int = Field(default=3, ge=0)
    temperature_for_sampling: float = Field(default=0.2, ge=0)
    temperature_for_candidates: float = Field(default=0.2, ge=0)


def _run(job: CompileJob, settings: SimbaSettings) -> Any:
    from dspy.teleprompt import SIMBA

    optimizer = SIMBA(metric=job.metric, prompt_model=job.prompt_lm, **settings.model_dump())
    return optimizer.compile(job.student, trainset=job.trainset, seed=job.seed)


def _project(settings: SimbaSettings, n_train: int, n_val: int) -> Projection:
    batch, candidates = settings.bsize, settings.num_candidates
    per_step = batch * candidates + (candidates + 1) * batch
    final = (candidates + 1) * n_train
    return Projection(
        program_calls=settings.max_steps * per_step + final,
        helper_calls=settings.max_steps * (candidates + 1),
    )


def _fit(settings: SimbaSettings, n_train: int, n_val: int) -> SimbaSettings:
    """SIMBA asserts ``len(trainset) >= bsize``: shrink the minibatch to the split."""
    if settings.bsize > n_train >= 1:
        return settings.model_copy(update={"bsize": n_train})
    return settings


SIMBA_RECIPE = Recipe(
    name="simba",
    dspy_class="dspy.teleprompt.SIMBA",
    settings_model=SimbaSettings,
    helper="prompt",
    seed_note="seed passed to SIMBA.compile(seed=), which seeds its random.Random and NumPy generator",
    sampling_note="trajectories re-sample the task LM at temperature 1.0 with distinct rollout ids",
    run=_run,
    project=_project,
    fit=_fit,
)
