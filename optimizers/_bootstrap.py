"""BootstrapFewShotWithRandomSearch: demonstrations bootstrapped from the program's own answers.

Candidates (zero-shot, labelled demos, unshuffled and ``num_candidate_programs`` shuffled
bootstraps) are scored on dev and the best kept. DSPy seeds candidate ``i`` with
``random.Random(i)`` and takes no seed, so the recipe applies the compile's seed by
shuffling the training examples first.
"""

from __future__ import annotations

import random
from typing import Any

from pydantic import Field

from optimizers._recipe import CompileJob, Projection, Recipe
from optimizers._settings import OptimizerSettings


class BootstrapSettings(OptimizerSettings):
    """``dspy.BootstrapFewShotWithRandomSearch`` settings."""

    max_bootstrapped_demos: int = Field(default=3, ge=1, description="Most bootstrapped demos per candidate.")
    max_labeled_demos: int = Field(default=4, ge=0, description="Most labelled (gold) demos per candidate.")
    max_rounds: int = Field(default=1, ge=1, description="Bootstrap attempts per training example.")
    num_candidate_programs: int = Field(default=6, ge=1, description="Shuffled bootstrap candidates.")


def _run(job: CompileJob, settings: BootstrapSettings) -> Any:
    from dspy.teleprompt import BootstrapFewShotWithRandomSearch

    trainset = list(job.trainset)
    random.Random(job.seed).shuffle(trainset)
    optimizer = BootstrapFewShotWithRandomSearch(metric=job.metric, **settings.model_dump())
    return optimizer.compile(job.student, trainset=trainset, valset=job.valset)


def _project(settings: BootstrapSettings, n_train: int, n_val: int) -> Projection:
    candidates = settings.num_candidate_programs + 3
    bootstraps = (settings.num_candidate_programs + 1) * n_train * settings.max_rounds
    return Projection(program_calls=candidates * n_val + bootstraps, helper_calls=0)


BOOTSTRAP_RECIPE = Recipe(
    name="bootstrap",
    dspy_class="dspy.teleprompt.BootstrapFewShotWithRandomSearch",
    settings_model=BootstrapSettings,
    helper=None,
    seed_note="DSPy seeds candidate i with i; the recipe shuffles the train examples with the seed first",
    sampling_note="bootstrap rounds after the first (max_rounds > 1) re-sample the task LM at temperature 1.0",
    run=_run,
    project=_project,
)
