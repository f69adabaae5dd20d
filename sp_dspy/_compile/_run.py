"""``compile_guard``: data, plan, the optimizer under caps, selection on dev, the artifact.

The starting program and the optimizer run with the final dev scoring held back, so a compile
stopped by a cap still selects and saves; a failing LM stops it, and a rerun replays the cache.
"""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import ValidationError

from sp_dspy._budget import NO_ERROR_LIMIT, Ledger, OptimizerStopped, require_prices
from sp_dspy._compile._artifact import claim_out, eval_command, program_state, save_artifact, state_key
from sp_dspy._compile._budget import HELPER_COMPLETION, build_plan
from sp_dspy._compile._data import load_compile_data
from sp_dspy._compile._evaluate import evaluate_on_dev
from sp_dspy._compile._failures import CallFailures
from sp_dspy._compile._types import (
    CompileConfig,
    CompileOutcome,
    CompileSetup,
    CompileStatus,
    Contender,
    DevScore,
    Selection,
)
from sp_dspy._errors import SpDspyError
from sp_dspy._lm import LMConfig, import_dspy, make_lm, redact
from sp_dspy._pricing import completion_guess, context_window, pricing_for, prompt_sizes
from sp_dspy._run_manifest import ErrorSummary
from sp_dspy._runner import teach_fake
from sp_dspy.optimizers import CompileJob, get_recipe, load_settings

from ._log import library_log

if TYPE_CHECKING:
    from sp_dspy._compile._recorder import CandidateRecorder

LOG_FILE = "compile.log"


class CompileError(SpDspyError):
    """The optimizer failed for a reason other than the budget (exit 2, like any error)."""


def prepare(
    config: CompileConfig,
    task: LMConfig,
    prompt: LMConfig | None = None,
    reflection: LMConfig | None = None,
    *,
    window: int | None = None,
) -> CompileSetup:
    """Everything up to the first LM call: settings, data, student, plan. Makes no call.

    ``window``: the task LM's context window, when known; the demonstrations are capped to fit it.
    """
    from sp_dspy._compile._student import build_student  # imports DSPy

    recipe = get_recipe(config.optimizer)
    settings = load_settings(
        recipe.name, recipe.settings_model, path=config.optimizer_config, overrides=config.overrides
    )
    data = load_compile_data(
        config.dataset, benchmark=config.benchmark, splits=config.splits, seed=config.seed,
        ratios=config.ratios, lenient=config.lenient,
    )  # fmt: skip
    warnings = []
    if data.split.dataset_hash != data.dataset_hash:
        warnings.append(
            f"the split file was made from another dataset file (hash {data.split.dataset_hash[:12]}, "
            f"this one {data.dataset_hash[:12]}); its ids all exist here"
        )
    student = build_student(config.protocol, config.cot, data.train, data.dev)
    settings = recipe.fit(settings, len(student.train), len(student.dev))
    guesses = {"task": completion_guess(config.protocol, config.cot, task)}
    if window:
        settings, capped = _fit_demos(settings, student, window, guesses["task"])
        warnings.extend(capped)
    configs = {"task": task}
    if recipe.helper == "prompt":
        configs["prompt"] = prompt or task
    elif recipe.helper == "reflection":
        configs["reflection"] = reflection or prompt or task
    pricing = {role: pricing_for(cfg, guesses.get(role, HELPER_COMPLETION)) for role, cfg in configs.items()}
    require_prices(
        config.caps, {f"the {role} LM {cfg.model}": pricing[role] for role, cfg in configs.items()}
    )
    helper = (recipe.helper, pricing[recipe.helper]) if recipe.helper else None
    plan = build_plan(
        recipe=recipe, settings=settings, student=student.module, train_examples=student.train,
        dev_examples=student.dev, task=pricing["task"], helper=helper, top_k=config.top_k,
    )  # fmt: skip
    needed = sum(role.calls for phase in ("dev_before", "dev_after") for role in plan.phases[phase].values())
    if config.caps.max_calls is not None and config.caps.max_calls < needed:
        warnings.append(
            f"--max-calls {config.caps.max_calls} is below the {needed} calls of scoring the starting "
            "program and the final candidate(s) on dev; the compile will stop early"
        )
    return CompileSetup(config, recipe, settings, data, student, configs, pricing, plan, warnings)


#: The settings that bound the demonstrations of a compiled prompt, bootstrapped ones first.
DEMO_SETTINGS = ("max_bootstrapped_demos", "max_labeled_demos", "max_demos")


def _fit_demos(settings: Any, student: Any, window: int, completion: int) -> tuple[Any, list[str]]:
    """``settings`` with at most as many demonstrations as fit the context window beside the
    largest case and the answer (pricing's estimates: a demonstration ~ a mean train prompt),
    and a warning saying so; unchanged (no warning) when they already fit."""
    values = settings.model_dump()
    asked = {name: values[name] for name in DEMO_SETTINGS if isinstance(values.get(name), int)}
    sizes = prompt_sizes(student.module, [*student.train, *student.dev])
    train = prompt_sizes(student.module, student.train) or sizes
    if not asked or not sizes:
        return settings, []
    largest, per_demo = max(sizes), max(1.0, sum(train) / len(train))
    fits = max(0, int((window - largest - completion) // per_demo))
    if sum(asked.values()) <= fits:
        return settings, []
    left, capped = fits, {}
    for name, count in asked.items():
        capped[name] = min(count, left)
        left -= capped[name]
    try:
        settings = type(settings).model_validate({**values, **capped})
    except ValidationError:  # the optimizer needs more (one bootstrapped demo at least): as low as it goes
        floors = {name: max(count, 1) for name, count in capped.items()}
        settings = type(settings).model_validate({**values, **floors})
        capped = floors
    shown = ", ".join(f"{name} {count}" for name, count in capped.items())
    return settings, [
        f"demonstrations capped ({shown}; asked {sum(asked.values())}) so a compiled prompt fits the task "
        f"LM's context window of {window:,} tokens: the largest case takes ~{largest:,} tokens, a "
        f"demonstration ~{round(per_demo):,}, the answer {completion}"
    ]


def _optimize(
    setup: CompileSetup,
    lms: dict[str, Any],
    budget: Ledger,
    recorder: CandidateRecorder,
    failures: CallFailures,
) -> Any | None:
    """Run the recipe; its program, or None when the budget stopped it."""
    dspy = import_dspy()
    student = setup.student
    refusals = budget.refusals
    job = CompileJob(
        student=student.module, trainset=student.train, valset=student.dev,
        metric=recorder.metric(student.metric), feedback=recorder.metric(student.feedback),
        task_lm=lms["task"], prompt_lm=lms.get("prompt", lms["task"]),
        reflection_lm=lms.get("reflection", lms["task"]), seed=setup.config.seed,
    )  # fmt: skip
    random.seed(setup.config.seed)  # some DSPy code paths draw from the global generators
    np.random.seed(setup.config.seed)
    # Unparseable answers raise inside DSPy and count as errors there; here they score 0
    # like any excluded case, so DSPy must not give up after its default 10 errors.
    with dspy.context(lm=lms["task"], callbacks=[recorder], max_errors=NO_ERROR_LIMIT):
        try:
            program = setup.recipe.compile(job, setup.settings)
        except OptimizerStopped:
            program = None
        except Exception as exc:
            _raise_failure(setup, budget, failures)
            if not budget.optimizer_stopped:
                message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                raise CompileError(
                    f"optimizer {setup.recipe.name} failed: {type(exc).__name__}: {redact(message)}; "
                    f"details in {setup.config.out / LOG_FILE}; rerun the same command to continue "
                    "(finished calls come from the response cache)"
                ) from exc
            program = None
        finally:
            budget.optimizer_stopped = True  # calls of lingering optimizer threads stop too
            budget.wait_idle()  # and the calls they already started are counted
    _raise_failure(setup, budget, failures)
    return program if budget.refusals == refusals else None


def _final_scoring(setup: CompileSetup) -> tuple[int, int, float]:
    """What the optimizer leaves of the caps for the final dev scoring: its projection, and the worst
    case of the calls it has in flight at once beyond that (each reserves its output limit)."""
    projected, pricing = setup.plan.phases["dev_after"]["task"], setup.pricing["task"]
    limit = pricing.output_limit if pricing.output_limit is not None else pricing.completion_guess
    beyond = min(projected.calls, setup.config.concurrency) * max(0, limit - pricing.completion_guess)
    return projected.calls, projected.tokens + beyond, (projected.usd or 0.0) + pricing.usd(0, beyond)


def _raise_failure(setup: CompileSetup, budget: Ledger, failures: CallFailures) -> None:
    """Stop the compile when the LM itself failed for good, or kept failing (a cap is not a failure)."""
    out = setup.config.out
    if failures.stopped:
        raise CompileError(failures.stop_line(setup.configs, str(out / LOG_FILE)))
    if budget.failing:
        raise CompileError(
            f"compile stopped: {budget.lm_errors} LM calls failed (last: {budget.last_error}); "
            f"details in {out / LOG_FILE}; fix the LM and rerun the same command: "
            "finished calls come from the response cache"
        )


def _contenders(
    setup: CompileSetup, program: Any | None, recorder: CandidateRecorder, start_key: str
) -> list[Contender]:
    """Up to ``top_k`` programs to score on dev: the optimizer's own, then recorded candidates."""
    found: list[Contender] = []
    seen = {start_key}
    if program is not None:
        state = program_state(program)
        seen.add(state_key(state))
        found.append(Contender("optimizer", state))
    # Candidates scored on the optimizer's metric, best first; then those the recorder
    # saw run but could not score (GEPA scores its proposals on traced minibatches),
    # newest first: the latest proposal is the likeliest improvement when a cap stopped it.
    for key in [*recorder.ranked(), *reversed(recorder.order)]:
        if len(found) >= setup.config.top_k:
            break
        if key not in seen:
            seen.add(key)
            found.append(Contender("recorded", recorder.states[key]))
    return found


ORIGIN_WORDS = {
    "start": "the starting program",
    "optimizer": "the optimizer's final program",
    "recorded": "a candidate the optimizer tried",
}


def _select(contenders: list[Contender], start: Contender) -> Selection:
    """The best contender when it beats the starting program on dev, else the start.

    Only complete dev evaluations compare; ties keep the start, and among candidates
    the earlier one (the optimizer's own pick).
    """
    if start.dev is None or not start.dev.complete:
        return Selection(
            start,
            "kept the starting program: its dev evaluation did not finish within the caps, "
            "so no candidate can be shown to be better",
        )
    pool = [c for c in contenders if c.dev is not None and c.dev.complete]
    if not pool:
        reason = "no candidate finished its dev evaluation within the caps"
        if not contenders:
            reason = "the optimizer tried no program other than the starting one"
        return Selection(start, f"kept the starting program: {reason}")
    best = max(pool, key=lambda contender: contender.dev.score if contender.dev else 0.0)
    assert best.dev is not None
    start_score, best_score = start.dev.score, best.dev.score
    if best_score > start_score:
        return Selection(
            best,
            f"kept {ORIGIN_WORDS[best.origin]}: it scored {best_score:.2f} on dev, "
            f"better than the starting program's {start_score:.2f}",
        )
    if best_score == start_score and (start.dev.excluded or best.dev.excluded):
        return Selection(
            start,
            f"kept the starting program: its dev score and the best candidate's ({start_score:.2f} and "
            f"{best_score:.2f}) rest on excluded answers ({start.dev.excluded} and {best.dev.excluded} of "
            f"{start.dev.n} dev cases), so they do not show which is better",
        )
    relation = "tied with" if best_score == start_score else "scored below"
    return Selection(
        start,
        f"kept the starting program: the best candidate {relation} it on dev "
        f"({best_score:.2f} against {start_score:.2f}); a candidate must be better to replace it",
    )


def compile_guard(
    config: CompileConfig,
    task: LMConfig,
    prompt: LMConfig | None = None,
    reflection: LMConfig | None = None,
    *,
    lms: dict[str, Any] | None = None,
    status: CompileStatus | None = None,
    window: int | None = None,
    ledger: Ledger | None = None,
) -> CompileOutcome:
    """Compile a guard program as ``config`` says and write the artifact to ``config.out``.

    ``lms`` may hold ready ``dspy.LM`` objects by role (``task``, ``prompt``,
    ``reflection``) instead of building them from the configs (still budgeted and
    recorded by their configs). ``status`` is kept up to date for a progress display.
    An existing artifact in ``config.out`` is refused unless ``config.force``. With
    ``config.dry_run`` nothing is built, written or called: the outcome holds the plan.
    ``window``: the task LM's context window (a local server's ``n_ctx``); default: LiteLLM's map.
    ``ledger``: the ledger of a job this compile is a step of (an experiment's): its caps hold too.
    """
    from sp_dspy._compile._recorder import CandidateRecorder

    started, clock = datetime.now(UTC), time.monotonic()
    window = window or context_window(task)
    setup = prepare(config, task, prompt, reflection, window=window)
    outcome = CompileOutcome(
        plan=setup.plan, config=config, score_command=eval_command(config, task), window=window,
        warnings=list(setup.warnings),
    )  # fmt: skip
    if config.dry_run:
        return outcome
    status = status or CompileStatus()
    budget = Ledger(config.caps, parent=ledger, replays_count=True)  # a rerun is a replay: every call counts
    failures = CallFailures()
    status.caps, status.budget, status.failures = config.caps, budget, failures
    from sp_dspy._compile._budgeted_lm import BudgetedLM  # imports DSPy

    with (
        claim_out(config.out, force=config.force),
        library_log(config.out / LOG_FILE, on_failure=budget.halt) as log,
    ):
        built = {role: (lms or {}).get(role) or make_lm(cfg) for role, cfg in setup.configs.items()}
        for lm in built.values():
            teach_fake(lm, [*setup.data.train, *setup.data.dev])  # train and dev only: test never
        dev_lm = BudgetedLM(  # refuses case by case
            built["task"], budget, "task", setup.pricing["task"], failures=failures
        )
        optimizer_lms = {  # these stop the optimizer at the first refused call
            role: BudgetedLM(lm, budget, role, setup.pricing[role], stops_optimizer=True, failures=failures)
            for role, lm in built.items()
        }

        def score(state: dict[str, Any]) -> DevScore:
            guard = setup.student.guard(state)
            return evaluate_on_dev(
                guard, setup.data.dev, dev_lm, concurrency=config.concurrency, seed=config.seed
            )

        start = Contender("start", program_state(setup.student.module))
        recorder = CandidateRecorder(type(setup.student.module))
        with budget.hold_back(*_final_scoring(setup)):
            status.enter("scoring the starting program on dev")
            start.dev = score(start.state)
            status.scored(start.dev, start=True)
            status.recorder = recorder
            status.enter(f"optimizing with {setup.recipe.name} on train")
            program = _optimize(setup, optimizer_lms, budget, recorder, failures)
        contenders = _contenders(setup, program, recorder, state_key(start.state))
        status.enter(f"scoring {len(contenders)} candidate(s) on dev")
        for contender in contenders:
            contender.dev = score(contender.state)
            status.scored(contender.dev)
        _raise_failure(setup, budget, failures)
        selection = _select(contenders, start)
        outcome.errors = failures.summary()
        outcome.warnings.extend(_excluded_warnings(start))
        log.check()  # a disk too full for the log: stop before saving a program chosen from refused calls
        status.enter("saving the artifact")
        outcome.manifest = save_artifact(
            setup, budget, start=start, contenders=contenders, selection=selection,
            recorded=len(recorder.states), started=started, wall_s=time.monotonic() - clock,
            warnings=[*outcome.warnings, *_failure_warnings(outcome.errors, outcome.window)],
        )  # fmt: skip
    if log.failure is not None:  # the artifact is whole; the log's last lines were lost
        outcome.warnings.append(f"{config.out / LOG_FILE} is incomplete ({log.failure.strerror})")
    return outcome


def _failure_warnings(errors: ErrorSummary, window: int | None) -> list[str]:
    """What the manifest keeps of the failed calls (the summary prints them as ``eval`` does)."""
    warnings = [
        f"{c.count} of {errors.units} LM call(s) failed with {c.error_class} (first: {c.first_error})"
        for c in errors.classes
    ]
    return warnings + [note.strip() for note in errors.lasting_notes(window)]


def _excluded_warnings(start: Contender) -> list[str]:
    """A dev score that rests on excluded answers says so."""
    dev = start.dev
    if dev is None or not dev.excluded:
        return []
    return [
        f"{dev.excluded} of {dev.n} dev answers of the starting program were excluded (failed calls "
        "or unreadable answers): its dev score counts them as wrong"
    ]
