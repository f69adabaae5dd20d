"""What a recipe is: one DSPy optimizer, its settings, how to run it and what it will cost.

A recipe is deliberately small. It knows how to call its optimizer on a
``CompileJob`` (program, train and validation examples, metrics, LMs, seed) and how
many program calls and proposal calls that will take, so ``--dry-run`` can price a
compile before it runs. Everything around it (data, splits, budget caps, selection
on dev, artifacts) is the compile's job, identical for every optimizer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from optimizers._settings import OptimizerSettings

if TYPE_CHECKING:
    import dspy

S = TypeVar("S", bound=OptimizerSettings)
HelperLM = Literal["prompt", "reflection"]


@dataclass
class CompileJob:
    """Everything an optimizer run needs.

    ``metric`` is the score metric (``case_metric`` or ``judgment_metric``),
    ``feedback`` the five-argument GEPA metric; ``valset`` is the dev split (recipes
    whose optimizer accepts a validation set use it for selection). The compile's
    budget stops an optimizer by raising from its LMs, so recipes need no stop check.
    """

    student: dspy.Module
    trainset: list[dspy.Example]
    valset: list[dspy.Example]
    metric: Callable[..., Any]
    feedback: Callable[..., Any]
    task_lm: dspy.LM
    prompt_lm: dspy.LM
    reflection_lm: dspy.LM
    seed: int


@dataclass(frozen=True)
class Projection:
    """Upper estimates of one optimizer run, before anything is sent.

    ``program_calls`` counts runs of the student on one example (one LM call each for
    every student sp-dspy compiles); ``helper_calls`` counts calls to the prompt or
    reflection LM (instruction proposals, reflections, rules).
    """

    program_calls: int
    helper_calls: int


@dataclass(frozen=True)
class Recipe(Generic[S]):
    """One optimizer.

    ``helper`` names the extra LM the optimizer talks to (``prompt`` model for
    instruction proposals, ``reflection`` model for GEPA), ``None`` when it uses the
    task LM only. ``seed_note`` says how the seed reaches the optimizer (verified
    against the DSPy source; recorded in the manifest); ``sampling_note`` which
    temperatures the optimizer itself samples at, beyond the LMs' configured ones.
    """

    name: str
    dspy_class: str
    settings_model: type[S]
    helper: HelperLM | None
    seed_note: str
    sampling_note: str
    run: Callable[[CompileJob, S], Any]
    project: Callable[[S, int, int], Projection]
    fit: Callable[[S, int, int], S]

    def compile(self, job: CompileJob, settings: S) -> dspy.Module:
        """Run the optimizer with settings fitted to the data sizes; returns its program."""
        program: dspy.Module = self.run(job, self.fit(settings, len(job.trainset), len(job.valset)))
        return program

    def projection(self, settings: S, n_train: int, n_val: int) -> Projection:
        return self.project(self.fit(settings, n_train, n_val), n_train, n_val)
