"""COPRO: coordinate ascent over instructions proposed by a prompt LM.

``breadth`` proposals per round for ``depth`` rounds, scored on train only (the compile
selects on dev). COPRO makes no random choice; its variety comes from sampling the
prompt LM at ``init_temperature``, so with the response cache a rerun repeats itself.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from optimizers._recipe import CompileJob, Projection, Recipe
from optimizers._settings import OptimizerSettings


class CoproSettings(OptimizerSettings):
    """``dspy.COPRO`` settings."""

    breadth: int = Field(
        default=4, ge=2, description="Instructions proposed per round (the first round keeps the original)."
    )
    depth: int = Field(default=2, ge=1, description="Proposal rounds.")
    init_temperature: float = Field(
        default=1.4, ge=0, le=2, description="Prompt-LM temperature of the proposals."
    )


def _run(job: CompileJob, settings: CoproSettings) -> Any:
    from dspy.teleprompt import COPRO

    optimizer = COPRO(
        prompt_model=job.prompt_lm, metric=job.metric, **settings.model_dump(exclude={"num_threads"})
    )
    eval_kwargs = {"num_threads": settings.num_threads, "display_progress": False}
    return optimizer.compile(job.student, trainset=job.trainset, eval_kwargs=eval_kwargs)


def _project(settings: CoproSettings, n_train: int, n_val: int) -> Projection:
    # Round 1 scores breadth-1 proposals plus the original; later rounds breadth new ones.
    helper = (settings.breadth - 1) + (settings.depth - 1) * settings.breadth
    return Projection(program_calls=settings.depth * settings.breadth * n_train, helper_calls=helper)


COPRO_RECIPE = Recipe(
    name="copro",
    dspy_class="dspy.teleprompt.COPRO",
    settings_model=CoproSettings,
    helper="prompt",
    seed_note="COPRO makes no random choice; proposals vary only through prompt-LM sampling",
    sampling_note="proposals sampled from the prompt LM at init_temperature, breadth at a time",
    run=_run,
    project=_project,
)
