"""MIPROv2: instructions and demonstration sets searched jointly with Optuna's TPE sampler.

The light default sets ``num_candidates``/``num_trials`` instead of ``auto`` so a compile
on a small split stays small. DSPy's ``compile`` reads ``seed = seed or self.seed``, so a
compile seed of 0 would fall back to the constructor's 9; the recipe passes the seed to
both ``MIPROv2(seed=)`` and ``compile(seed=)``, which makes 0 work.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field

from optimizers._recipe import CompileJob, Projection, Recipe
from optimizers._settings import OptimizerSettings


class MiproSettings(OptimizerSettings):
    """``dspy.MIPROv2`` settings."""

    auto: Literal["light", "medium", "heavy"] | None = Field(
        default=None, description="DSPy's preset budget; when set, num_candidates/num_trials are not used."
    )
    num_candidates: int = Field(default=4, ge=1, description="Instruction and demo-set candidates.")
    num_trials: int = Field(default=6, ge=1, description="Optuna trials.")
    max_bootstrapped_demos: int = Field(default=2, ge=0)
    max_labeled_demos: int = Field(default=2, ge=0)
    minibatch: bool = Field(
        default=False, description="Score trials on dev minibatches, full dev periodically."
    )
    minibatch_size: int = Field(default=25, ge=1)
    minibatch_full_eval_steps: int = Field(default=5, ge=1)
    init_temperature: float = Field(
        default=1.0, ge=0, le=2, description="Prompt-LM temperature of proposals."
    )
    program_aware_proposer: bool = True
    data_aware_proposer: bool = True
    tip_aware_proposer: bool = True
    fewshot_aware_proposer: bool = True
    view_data_batch_size: int = Field(default=10, ge=1)


def _run(job: CompileJob, settings: MiproSettings) -> Any:
    from dspy.teleprompt import MIPROv2

    # Settings split between the constructor and ``compile``, as DSPy takes them.
    init = {"auto", "max_bootstrapped_demos", "max_labeled_demos", "num_threads", "init_temperature"}
    optimizer = MIPROv2(
        metric=job.metric,
        prompt_model=job.prompt_lm,
        task_model=job.task_lm,
        num_candidates=None if settings.auto else settings.num_candidates,
        seed=job.seed,
        track_stats=False,
        **settings.model_dump(include=init),
    )
    return optimizer.compile(
        job.student,
        trainset=job.trainset,
        valset=job.valset,
        num_trials=None if settings.auto else settings.num_trials,
        seed=job.seed,
        **settings.model_dump(exclude={*init, "num_candidates", "num_trials"}),
    )


def _trials(settings: MiproSettings, n_val: int) -> tuple[int, int, int, bool]:
    """(candidates, trials, dev examples used, minibatch) as MIPRO will run them."""
    if settings.auto is None:
        return settings.num_candidates, settings.num_trials, n_val, settings.minibatch
    from sp_dspy.lm import mipro_auto_run

    zero_shot = settings.max_bootstrapped_demos == 0 and settings.max_labeled_demos == 0
    return mipro_auto_run(settings.auto, n_val, zero_shot=zero_shot)  # DSPy's own trial formula


def _project(settings: MiproSettings, n_train: int, n_val: int) -> Projection:
    candidates, trials, val, minibatch = _trials(settings, n_val)
    bootstrap = max(candidates - 2, 1) * n_train
    if minibatch:
        batch = min(settings.minibatch_size, val)
        evaluation = val + trials * batch + (trials // settings.minibatch_full_eval_steps + 1) * val
    else:
        evaluation = val + trials * val
    # Each proposal is one call, plus describing the program and the module again
    # (``GroundedProposer.propose_instruction_for_predictor``) when program-aware.
    helper = candidates * (3 if settings.program_aware_proposer else 1)
    if settings.data_aware_proposer:
        helper += math.ceil(n_train / settings.view_data_batch_size) + 1
    return Projection(program_calls=bootstrap + evaluation, helper_calls=helper)


def _fit(settings: MiproSettings, n_train: int, n_val: int) -> MiproSettings:
    """MIPRO refuses a minibatch larger than the dev split: shrink it to fit."""
    if settings.minibatch_size > n_val >= 1:
        return settings.model_copy(update={"minibatch_size": n_val})
    return settings


MIPRO_RECIPE = Recipe(
    name="mipro",
    dspy_class="dspy.teleprompt.MIPROv2",
    settings_model=MiproSettings,
    helper="prompt",
    seed_note="seed passed to MIPROv2(seed=) and compile(seed=) (DSPy's 'seed or self.seed' ignores a compile seed of 0)",
    sampling_note="instruction proposals from the prompt LM at init_temperature; bootstrap rounds after the first re-sample the task LM at temperature 1.0",
    run=_run,
    project=_project,
    fit=_fit,
)
