"""What an evaluation step needs before it runs: the cases, the program, the run's paths; the dry
run's projection, the first request, and compile's in-memory scoring of a program on cases."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from sp_dspy.programs import judge_target, resolve_program, run_case

from .._benchmarks import load_benchmark
from .._budget import require_prices
from .._data import Benchmark, Case, conversation_id
from .._errors import ConfigError, DataError, validation_problem
from .._lm import RequestCaptured, client_of, closing_transports, make_lm
from .._protocol import build_targets
from .._user_dirs import ensure_writable_dir
from ..files import read_json_file
from ._config import EvalConfig
from ._cost import EvalPlan, plan_eval, run_pricing
from ._engine import Record, UnitEngine
from ._invocation import StepInputs
from ._paths import resolve_run
from ._sending import sending_context
from ._units import PerPolicyJob

if TYPE_CHECKING:
    from .._lm import HttpRequest, LMConfig


def select_cases(config: EvalConfig) -> tuple[Benchmark, list[Case]]:
    """The dataset (all its cases) and the run's cases: ``CaseSelection.apply``, as readers re-apply it."""
    data = config.data
    loaded = load_benchmark(
        data.dataset, benchmark=data.benchmark, with_evidence=data.with_evidence, lenient=data.lenient
    )
    return loaded, data.apply(loaded)


def build_program(
    config: EvalConfig, *, constrained: bool = False, cases: list[Case] | None = None
) -> tuple[Any, str, str]:
    """The program to run, its protocol and a label for records (name or artifact dir).

    ``constrained``: the official baselines send a JSON-schema ``response_format``.
    An artifact is refused on ``cases`` of its own train/dev split (unless ``allow_overlap``).
    """
    program, artifact = resolve_program(
        config.program, config.protocol, parser=config.parser, constrained=constrained,
        layout=config.per_rule_layout, flags=True,
    )  # fmt: skip
    if artifact is not None and cases is not None and not config.allow_overlap:
        check_no_overlap(artifact, cases)
    return program, str(program.protocol), config.program


class _ArtifactSplit(BaseModel):
    """The part of an artifact manifest's ``split`` record the overlap check reads."""

    train: list[str]
    dev: list[str]


def check_no_overlap(artifact_dir: Path, cases: list[Case]) -> None:
    """Refuse (one ``ConfigError``) the cases an artifact was compiled on, or sharing their conversation."""
    path = artifact_dir / "manifest.json"
    split = read_json_file(path, "artifact manifest").get("split")  # a JSON object: load_program checked it
    if split is None:
        return
    try:
        parts = _ArtifactSplit.model_validate(split)
    except ValidationError as exc:
        where, message = validation_problem(exc)
        raise DataError(f"{path}: field 'split.{where}': {message}") from None
    part_of = {case_id: part for part in ("dev", "train") for case_id in getattr(parts, part)}
    group_of = {conversation_id(case_id): part for case_id, part in part_of.items()}
    clashes: list[str] = []
    for case in cases:
        if case.id in part_of:
            clashes.append(f"{case.id} (in {part_of[case.id]})")
        elif case.conversation_id in group_of:
            clashes.append(
                f"{case.id} (conversation {case.conversation_id} in {group_of[case.conversation_id]})"
            )
    if clashes:
        shown = ", ".join(clashes[:3]) + (f" and {len(clashes) - 3} more" if len(clashes) > 3 else "")
        raise ConfigError(
            f"--program {artifact_dir}: {len(clashes)} of the {len(cases)} case(s) to evaluate overlap the "
            f"artifact's train/dev split: {shown}; evaluate on --split {artifact_dir / 'splits.json'}:test, "
            "or pass --allow-overlap to score them anyway"
        )


def plan_run(config: EvalConfig, lm_config: LMConfig) -> EvalPlan:
    """What ``run_eval`` would send (``eval --dry-run``), after the checks a run makes before its first call."""
    _, cases = select_cases(config)
    program, protocol, label = build_program(config, constrained=lm_config.json_schema, cases=cases)
    if config.batch:  # a provider without a batch API: one line, as the run would say
        from .._batch import wire_class

        wire_class(lm_config.provider, lm_config.display_name())
    plan = plan_eval(program, protocol, label, cases, lm_config, batch=config.batch)
    require_prices(config.caps, {lm_config.model: run_pricing(program, protocol, lm_config)})
    return plan


def prepare_evaluation(config: EvalConfig, lm_config: LMConfig) -> StepInputs:
    """What an evaluation step resolves before its run's lock is taken, failing fast (nothing written,
    nothing sent): the cases, the program, the run's paths, and the output directory checked writable.

    The settings come back as the manifest records them: the protocol resolved, the dataset and split
    files absolute, so the run is scored on the same cases from any directory.
    """
    loaded, cases = select_cases(config)
    program, protocol, label = build_program(config, constrained=lm_config.json_schema, cases=cases)
    typed = config.data  # the dataset and split as given, for display
    config = config.model_copy(update={"protocol": protocol, "data": typed.resolved()})
    paths = resolve_run(
        config.output_dir, lm_config.short_name(), config.run_id, resume=config.resume, protocol=protocol
    )
    ensure_writable_dir(config.output_dir, what="--output-dir")  # before any model is called
    return StepInputs(config, typed, loaded, cases, program, label, paths)


def evaluate_cases(
    program: Any,
    cases: Sequence[Case],
    lm: Any,
    *,
    concurrency: int,
    skip_on: tuple[type[Exception], ...] = (),
) -> list[Record]:
    """The per-policy records of ``program`` on ``cases``, built and run as ``run_eval`` runs a case,
    but kept in memory: no results file, manifest or progress (compile's dev scoring).

    A case whose call raises one of ``skip_on`` (a budget refusal) has no record; the others run.
    """
    job = PerPolicyJob(
        list(cases), program, lm, model=str(getattr(lm, "model", "")), run_fields={}, retry_errors=False
    )
    records: list[Record] = []
    engine: UnitEngine[Case, Record] = UnitEngine(
        work=job.work, on_error=job.on_error, store=records, concurrency=concurrency, skip_on=skip_on
    )
    asyncio.run(closing_transports(engine.run(job.units)))
    return records


def first_request(config: EvalConfig, lm_config: LMConfig) -> HttpRequest:
    """The first request ``run_eval`` would send, captured by sp-dspy's HTTP engine, not sent (cache off);
    ``ConfigError`` when no case is selected or the LM goes through another engine."""
    _, cases = select_cases(config)
    if not cases:
        raise ConfigError("--show-request: no case selected")
    program, protocol, _ = build_program(config, constrained=lm_config.json_schema)
    lm = make_lm(lm_config.model_copy(update={"cache": False}))
    client = client_of(lm)
    if client is None:
        raise ConfigError(
            f"--show-request: model '{lm_config.display_name()}' does not go through sp-dspy's HTTP engine "
            "(fake, replicas or --transport dspy), whose requests it builds and can show"
        )
    case = cases[0]
    client.capturing = True
    try:
        with sending_context(config, lm_config):
            if protocol == "per-rule":
                asyncio.run(closing_transports(judge_target(program, case, build_targets(case)[0], lm)))
            else:
                asyncio.run(closing_transports(run_case(program, case, lm)))
    except RequestCaptured as captured:
        return captured.request
    finally:
        client.capturing = False
    raise ConfigError(f"--show-request: case {case.id} sent no request")  # a program that never calls its LM
