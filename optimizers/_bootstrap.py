"""BootstrapFewShotWithRandomSearch: demonstrations bootstrapped from the program's own answers.

Candidate programs: zero-shot, labelled demos only, unshuffled bootstrap, then
``num_candidate_programs`` bootstraps of shuffled training data with 1 to
``max_bootstrapped_demos`` demos; each is scored on the dev split and the best kept.

Seed: DSPy's class takes no seed; candidate ``i`` shuffles with ``random.Random(i)``
(read in ``dspy/teleprompt/random_search.py``), so every run with the same data
would draw the same candidates. The recipe applies the compile's seed by shuffling
the training examples with ``random.Random(seed)`` first, which changes every
candidate's demo pool and the unshuffled bootstrap's order.
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
    optimizer = BootstrapFewShotWithRandomSearch(
        metric=job.metric,
        max_bootstrapped_demos=settings.max_bootstrapped_demos,
        max_labeled_demos=settings.max_labeled_demos,
        max_rounds=settings.max_rounds,
        num_candidate_programs=settings.num_candidate_programs,
        num_threads=settings.num_threads,
    )
    return optimizer.compile(job.student, trainset=trainset, valset=job.valset)


def _project(settings: BootstrapSettings, n_train: int, n_val: int) -> Projection:
    candidates = settings.num_candidate_programs + 3
    bootstraps = (settings.num_candidate_programs + 1) * n_train * settings.max_rounds
    return Projection(program_calls=candidates * n_val + bootstraps, helper_calls=0)


def _fit(settings: BootstrapSettings, n_train: int, n_val: int) -> BootstrapSettings:
    return settings


BOOTSTRAP_RECIPE = Recipe(
    name="bootstrap",
    dspy_class="dspy.teleprompt.BootstrapFewShotWithRandomSearch",
    settings_model=BootstrapSettings,
    helper=None,
    seed_note="DSPy seeds candidate i with i; the recipe shuffles the train examples with the seed first",
    sampling_note="bootstrap rounds after the first (max_rounds > 1) re-sample the task LM at temperature 1.0",
    run=_run,
    project=_project,
    fit=_fit,
)
