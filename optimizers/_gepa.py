"""GEPA: reflective instruction evolution with a Pareto frontier over dev examples.

A reflection LM reads the program's answers on train minibatches with the feedback
metric's diagnosis and proposes instructions; the frontier is tracked on dev. Its budget
is counted in metric calls (program runs). ``GEPA(seed=)`` seeds its adapter and
``gepa.optimize``; the recipe passes the compile's seed.
"""

from __future__ import annotations

import math
from typing import Any, Literal, Self

from pydantic import Field, model_validator

from optimizers._recipe import CompileJob, Projection, Recipe
from optimizers._settings import OptimizerSettings


class GepaSettings(OptimizerSettings):
    """``dspy.GEPA`` settings; exactly one of ``auto``, ``max_metric_calls``, ``max_full_evals``."""

    auto: Literal["light", "medium", "heavy"] | None = None
    max_metric_calls: int | None = Field(default=120, ge=1, description="Program runs GEPA may spend.")
    max_full_evals: int | None = Field(default=None, ge=1)
    reflection_minibatch_size: int = Field(default=3, ge=1)
    candidate_selection_strategy: Literal["pareto", "current_best"] = "pareto"
    skip_perfect_score: bool = True
    add_format_failure_as_feedback: bool = True
    use_merge: bool = False
    max_merge_invocations: int = Field(default=5, ge=0)

    @model_validator(mode="after")
    def _one_budget(self) -> Self:
        chosen = [
            name for name in ("auto", "max_metric_calls", "max_full_evals") if getattr(self, name) is not None
        ]
        if len(chosen) != 1:
            raise ValueError(
                "set exactly one of auto, max_metric_calls, max_full_evals "
                f"(set: {', '.join(chosen) or 'none'}; e.g. --set auto=light --set max_metric_calls=null)"
            )
        return self


def _run(job: CompileJob, settings: GepaSettings) -> Any:
    from dspy.teleprompt import GEPA

    optimizer = GEPA(
        metric=job.feedback, reflection_lm=job.reflection_lm, seed=job.seed, **settings.model_dump()
    )
    return optimizer.compile(job.student, trainset=job.trainset, valset=job.valset)


def metric_calls(settings: GepaSettings, n_train: int, n_val: int) -> int:
    """The program-run budget GEPA will be given."""
    if settings.max_metric_calls is not None:
        return settings.max_metric_calls
    if settings.max_full_evals is not None:
        return settings.max_full_evals * (n_train + n_val)
    from sp_dspy.lm import gepa_auto_metric_calls

    return gepa_auto_metric_calls(str(settings.auto), n_val)  # DSPy's own formula


def _project(settings: GepaSettings, n_train: int, n_val: int) -> Projection:
    budget = metric_calls(settings, n_train, n_val)
    batch = min(settings.reflection_minibatch_size, max(n_train, 1))
    # GEPA checks its budget between iterations: the last one may overrun by a
    # minibatch pair and a full dev evaluation. Each iteration reflects at most once.
    reflections = math.ceil(max(budget - n_val, 0) / (2 * batch)) + 1
    return Projection(program_calls=budget + 2 * batch + n_val, helper_calls=reflections)


GEPA_RECIPE = Recipe(
    name="gepa",
    dspy_class="dspy.teleprompt.GEPA",
    settings_model=GepaSettings,
    helper="reflection",
    seed_note="seed passed to GEPA(seed=), which seeds its adapter's random.Random and gepa.optimize(seed=)",
    sampling_note="no temperature of its own: task and reflection LMs sample at their configured temperatures",
    run=_run,
    project=_project,
)
