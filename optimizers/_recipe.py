"""What a recipe is: one DSPy optimizer, its settings, how to run it and what it will cost.

Everything around a recipe (data, splits, budget caps, selection on dev, artifacts) is
the compile's job, identical for every optimizer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Literal

from ._settings import S

if TYPE_CHECKING:
    import dspy

HelperLM = Literal["prompt", "reflection"]


@dataclass
class CompileJob:
    """Everything an optimizer run needs.

    ``metric`` is the score metric, ``feedback`` the five-argument GEPA metric, ``valset``
    the dev split. The budget stops an optimizer by raising from its LMs.
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

    ``program_calls``: student runs on one example (one LM call each); ``helper_calls``:
    calls to the prompt or reflection LM.
    """

    program_calls: int
    helper_calls: int


@dataclass(frozen=True)
class Recipe(Generic[S]):
    """One optimizer.

    ``helper``: the extra LM it talks to (``prompt`` or ``reflection``), if any.
    ``seed_note`` (how the seed reaches the optimizer, checked against DSPy's source) and
    ``sampling_note`` (temperatures it samples at itself) are recorded in the manifest.
    ``fit`` adapts settings to the split sizes.
    """

    name: str
    dspy_class: str
    settings_model: type[S]
    helper: HelperLM | None
    seed_note: str
    sampling_note: str
    run: Callable[[CompileJob, S], Any]
    project: Callable[[S, int, int], Projection]
    fit: Callable[[S, int, int], S] = lambda settings, n_train, n_val: settings

    def compile(self, job: CompileJob, settings: S) -> dspy.Module:
        """Run the optimizer with settings fitted to the data sizes; returns its program."""
        return self.run(job, self.fit(settings, len(job.trainset), len(job.valset)))

    def projection(self, settings: S, n_train: int, n_val: int) -> Projection:
        return self.project(self.fit(settings, n_train, n_val), n_train, n_val)
