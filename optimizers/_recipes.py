"""The five optimizer recipes: each DSPy optimizer's settings, run and cost projection.

How the seed reaches each optimizer was read off the DSPy source: see each recipe's ``seed_note``.
"""

from __future__ import annotations

import math
import random
from typing import Any, Literal, Self

from pydantic import Field, model_validator

from sp_dspy.lm import mipro_auto_run

from ._recipe import CompileJob, Projection, Recipe
from ._settings import OptimizerSettings


class MiproSettings(OptimizerSettings):
    """MIPROv2: instructions and demonstration sets searched jointly with Optuna's TPE sampler.

    The light default sets ``num_candidates``/``num_trials`` instead of ``auto`` so a compile
    on a small split stays small.
    """

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


def _run_mipro(job: CompileJob, settings: MiproSettings) -> Any:
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

    zero_shot = settings.max_bootstrapped_demos == 0 and settings.max_labeled_demos == 0
    return mipro_auto_run(settings.auto, n_val, zero_shot=zero_shot)  # DSPy's own trial formula


def _project_mipro(settings: MiproSettings, n_train: int, n_val: int) -> Projection:
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


def _fit_mipro(settings: MiproSettings, n_train: int, n_val: int) -> MiproSettings:
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
    run=_run_mipro,
    project=_project_mipro,
    fit=_fit_mipro,
)


class GepaSettings(OptimizerSettings):
    """GEPA: reflective instruction evolution with a Pareto frontier over dev examples.

    Set exactly one of ``auto``, ``max_metric_calls``, ``max_full_evals`` (a number of program
    runs). A reflection LM reads answers on train minibatches with the feedback metric's
    diagnosis and proposes instructions; the frontier is tracked on dev.
    """

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


def _run_gepa(job: CompileJob, settings: GepaSettings) -> Any:
    from dspy.teleprompt import GEPA

    optimizer = GEPA(
        metric=job.feedback, reflection_lm=job.reflection_lm, seed=job.seed, **settings.model_dump()
    )
    return optimizer.compile(job.student, trainset=job.trainset, valset=job.valset)


def _project_gepa(settings: GepaSettings, n_train: int, n_val: int) -> Projection:
    if settings.max_metric_calls is not None:
        budget = settings.max_metric_calls
    elif settings.max_full_evals is not None:
        budget = settings.max_full_evals * (n_train + n_val)
    else:
        from sp_dspy.lm import gepa_auto_metric_calls

        budget = gepa_auto_metric_calls(str(settings.auto), n_val)  # DSPy's own formula
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
    run=_run_gepa,
    project=_project_gepa,
)


class BootstrapSettings(OptimizerSettings):
    """BootstrapFewShotWithRandomSearch: demonstrations bootstrapped from the program's own answers.

    Candidates (zero-shot, labelled demos, unshuffled and ``num_candidate_programs`` shuffled
    bootstraps) are scored on dev and the best kept.
    """

    max_bootstrapped_demos: int = Field(default=3, ge=1, description="Most bootstrapped demos per candidate.")
    max_labeled_demos: int = Field(default=4, ge=0, description="Most labelled (gold) demos per candidate.")
    max_rounds: int = Field(default=1, ge=1, description="Bootstrap attempts per training example.")
    num_candidate_programs: int = Field(default=6, ge=1, description="Shuffled bootstrap candidates.")


def _run_bootstrap(job: CompileJob, settings: BootstrapSettings) -> Any:
    from dspy.teleprompt import BootstrapFewShotWithRandomSearch

    trainset = list(job.trainset)
    random.Random(job.seed).shuffle(trainset)
    optimizer = BootstrapFewShotWithRandomSearch(metric=job.metric, **settings.model_dump())
    return optimizer.compile(job.student, trainset=trainset, valset=job.valset)


def _project_bootstrap(settings: BootstrapSettings, n_train: int, n_val: int) -> Projection:
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
    run=_run_bootstrap,
    project=_project_bootstrap,
)


class SimbaSettings(OptimizerSettings):
    """SIMBA: stochastic mini-batch ascent with self-reflective rules and demos.

    Each step runs program variants on a minibatch and, for its most variable examples,
    adds a successful trajectory as a demo or a prompt-LM rule to the instructions; scored
    on train only.
    """

    bsize: int = Field(default=8, ge=1, description="Minibatch size (capped at the train split's size).")
    num_candidates: int = Field(default=4, ge=1, description="New candidate programs per step.")
    max_steps: int = Field(default=4, ge=1)
    max_demos: int = Field(default=3, ge=0)
    temperature_for_sampling: float = Field(default=0.2, ge=0)
    temperature_for_candidates: float = Field(default=0.2, ge=0)


def _run_simba(job: CompileJob, settings: SimbaSettings) -> Any:
    from dspy.teleprompt import SIMBA

    optimizer = SIMBA(metric=job.metric, prompt_model=job.prompt_lm, **settings.model_dump())
    return optimizer.compile(job.student, trainset=job.trainset, seed=job.seed)


def _project_simba(settings: SimbaSettings, n_train: int, n_val: int) -> Projection:
    batch, candidates = settings.bsize, settings.num_candidates
    per_step = batch * candidates + (candidates + 1) * batch
    final = (candidates + 1) * n_train
    return Projection(
        program_calls=settings.max_steps * per_step + final,
        helper_calls=settings.max_steps * (candidates + 1),
    )


def _fit_simba(settings: SimbaSettings, n_train: int, n_val: int) -> SimbaSettings:
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
    run=_run_simba,
    project=_project_simba,
    fit=_fit_simba,
)


class CoproSettings(OptimizerSettings):
    """COPRO: coordinate ascent over instructions proposed by a prompt LM.

    ``breadth`` proposals per round for ``depth`` rounds, scored on train only (the compile
    selects on dev).
    """

    breadth: int = Field(
        default=4, ge=2, description="Instructions proposed per round (the first round keeps the original)."
    )
    depth: int = Field(default=2, ge=1, description="Proposal rounds.")
    init_temperature: float = Field(
        default=1.4, ge=0, le=2, description="Prompt-LM temperature of the proposals."
    )


def _run_copro(job: CompileJob, settings: CoproSettings) -> Any:
    from dspy.teleprompt import COPRO

    optimizer = COPRO(
        prompt_model=job.prompt_lm, metric=job.metric, **settings.model_dump(exclude={"num_threads"})
    )
    eval_kwargs = {"num_threads": settings.num_threads, "display_progress": False}
    return optimizer.compile(job.student, trainset=job.trainset, eval_kwargs=eval_kwargs)


def _project_copro(settings: CoproSettings, n_train: int, n_val: int) -> Projection:
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
    run=_run_copro,
    project=_project_copro,
)
