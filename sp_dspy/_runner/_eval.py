"""``sp-dspy eval`` as a library call: select cases, run a program on an LM unit by unit, score."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError
from rich.console import Console

from sp_dspy.programs import GUARD_PROGRAMS, RAW_PROGRAMS, judge_target, resolve_program, run_case

from .._benchmarks import benchmark_kind, load_benchmark
from .._budget import BudgetExceeded, Ledger, Spend, require_prices
from .._data import Benchmark, Case, conversation_id
from .._data._scan import read_regular
from .._data._selection import resolved_path
from .._errors import ConfigError, DataError, OutputError, validation_problem
from .._lm import closing_transports, import_dspy, make_lm
from .._lm._direct import RequestCaptured, client_of
from .._lm._prompt_cache import before_last_message, marking_prefix
from .._lm._rate import RateWatch
from .._lm._replicas import display_endpoint
from .._metrics import ResultSet, score
from .._protocol import build_targets
from .._protocol._targets import prefix_layout_end
from .._provenance import git_commit, package_versions, redacted_argv
from .._run_manifest import (
    RUNNING,
    ErrorSummary,
    ModelRun,
    RunManifest,
    RunTotals,
    previous_run,
    read_run_manifest,
    write_manifest,
)
from .._user_dirs import ensure_writable_dir
from ..files import read_json_file
from ._admission import run_admission
from ._config import EvalConfig
from ._cost import EvalPlan, plan_eval, run_pricing
from ._engine import Record, Unit, UnitEngine
from ._failures import EarlyStop
from ._fake_gold import teach_fake
from ._paths import RunLock, RunPaths, resolve_run
from ._progress import ProgressView
from ._resume import refuse_a_changed_resume
from ._store import JsonlStore, StoreWriteError, read_run_results, repair_torn_tail
from ._units import PerPolicyJob, PerRuleJob

if TYPE_CHECKING:
    import dspy

    from .._batch import AnswerBook
    from .._lm import HttpRequest, LMConfig
    from .._metrics import ScoreReport


@dataclass
class EvalOutcome:
    """What an eval invocation produced; ``results``: the results file as it stands after the run
    (read once, then scored, counted and summarised from memory)."""

    paths: RunPaths
    results_file: Path
    cases: list[Case]
    results: ResultSet = field(default_factory=ResultSet)
    report: ScoreReport | None = None
    interrupted: bool = False
    capped_by: str | None = None  # the cap (max_calls, max_tokens, max_usd) that stopped the run
    spent: Spend | None = None  # what the capped units used (runs with caps only)
    failed: bool = False  # a results write failed (a full disk): the run stopped
    stopped: bool = False  # a lasting failure ended the run early (run_eval raised RunStopped)
    skipped_on_resume: int = 0
    skipped_errors: int = 0  # of those skipped, units whose record is an error
    units_run: int = 0
    errors: ErrorSummary = field(default_factory=ErrorSummary)  # units whose latest record is an error
    totals: RunTotals = field(default_factory=RunTotals)  # over the whole results file


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


def run_eval(
    config: EvalConfig,
    lm_config: LMConfig,
    *,
    console: Console | None = None,
    lm: dspy.LM | None = None,
    show_progress: bool = True,
    retry_errors: bool = False,
    log_requests: bool = False,
    ledger: Ledger | None = None,
) -> EvalOutcome:
    """Run one model over the selected cases, append results durably, score them.

    ``log_requests`` keeps with each record the requests its unit sent (``--log-requests``).
    ``ledger``: a job's ledger this run is a step of (an experiment's): its caps hold too.

    Raises:
        RunStopped: the run stopped early on a lasting failure (after writing the
            manifest); every record written is kept.
        RunLockedError: another process is writing this run.
        ConfigError: a resume whose dataset, program, selection or model differs from
            the run's manifest (checked before anything is written or sent).
        OutputError: the output directory cannot be written, or a write failed
            mid-run (the run stops at once; ``--resume`` continues it).
    """
    console = console or Console(stderr=True)
    loaded, cases = select_cases(config)
    program, protocol, label = build_program(config, constrained=lm_config.json_schema, cases=cases)
    typed = config.data  # the dataset and split as given, for display
    # The manifest records what ran, its files resolved: scoring it from elsewhere reads the same cases.
    config = config.model_copy(update={"protocol": protocol, "data": typed.resolved()})
    paths = resolve_run(
        config.output_dir, lm_config.short_name(), config.run_id, resume=config.resume, protocol=protocol
    )
    ensure_writable_dir(config.output_dir, what="--output-dir")  # before any model is called
    with RunLock(paths):  # one writer per run: a second --resume would send and record units twice
        model = lm_config.display_name()
        results_file = paths.results_for(protocol)
        if results_file.exists() and not config.resume:
            raise ConfigError(
                f"{results_file} exists: pass --resume to continue that run, or choose another --run-id"
            )
        # The same run (resumed, or another model joining its run id): same dataset, program, selection.
        refuse_a_changed_resume(
            read_run_manifest(paths.manifest), config, dataset=(loaded.source, loaded.content_hash),
            model=model, lm=lm_config, results_file=results_file, resume=config.resume,
        )  # fmt: skip
        lm = lm if lm is not None else make_lm(lm_config)
        teach_fake(lm, cases)
        run_fields: dict[str, Any] = {
            "run_id": paths.run_id,
            "program": label,
            "protocol": protocol,
            "parser": _parser_label(config),
        }
        if protocol == "per-rule" and config.program == "official":
            run_fields["layout"] = config.per_rule_layout
            run_fields["official_protocol"] = config.per_rule_layout == "official"
        started, clock = datetime.now(UTC), time.perf_counter()
        outcome = EvalOutcome(paths=paths, results_file=results_file, cases=cases)
        runner = PerRuleJob if protocol == "per-rule" else PerPolicyJob
        job = runner(
            cases, program, lm, model=model, run_fields=run_fields, retry_errors=retry_errors,
            log_requests=log_requests,
        )  # fmt: skip
        with contextlib.suppress(OSError):  # the writer's open reports a file it cannot write
            repair_torn_tail(results_file)  # a torn last line is no unit done
        existing = read_run_results(results_file)
        units = job.pending(existing)
        caps = run_admission(config.caps, program, protocol, lm_config, parent=ledger)
        outcome.skipped_on_resume, outcome.skipped_errors = job.skipped, job.skipped_errors

        work, endpoint_requests = _counting(job.work, lm, lm_config)
        rate = RateWatch(client.rate if (client := client_of(lm)) is not None else None)

        batch_answers: dict[str, int] = {}  # answers the provider's batch API sent this invocation
        # Read before this invocation's start entry replaces it: a resumed run's time adds up.
        earlier = previous_run(paths.manifest, model) if config.resume else None

        def manifest(results: ResultSet, *, status: str | None = None) -> None:
            """Write the run's manifest: as it starts (``status`` running: a run killed before its end
            is still scored on its own data and selection), and again as it ends."""
            outcome.totals = RunTotals.of(results.lines)  # over the whole results file
            wall_s = time.perf_counter() - clock
            split_info = None
            if config.data.split:
                split_bytes = read_regular(Path(config.data.split.rpartition(":")[0]), "split file")
                split_info = {"spec": typed.split, "sha256": hashlib.sha256(split_bytes).hexdigest()}
            started_at = started.isoformat(timespec="seconds")
            limited = rate.stats()
            if earlier is not None:  # a resumed run: its time and start include the earlier invocations
                wall_s += earlier.wall_s or 0.0
                started_at = earlier.started_at
                limited.rate_limited += earlier.rate_limited
                limited.wait_s += earlier.rate_limit_wait_s
            run = ModelRun(
                model=model,
                lm=lm_config.public_dict(),
                results_file=str(results_file),
                status=status or _status(outcome),
                started_at=started_at,
                finished_at=None if status else datetime.now(UTC).isoformat(timespec="seconds"),
                wall_s=round(wall_s, 3),
                units_total=len(job.units),
                units_skipped_on_resume=outcome.skipped_on_resume,
                totals=outcome.totals,
                errors=outcome.errors,
                endpoint_requests={**endpoint_requests(), **batch_answers},
                transport="direct" if client_of(lm) is not None else "dspy",
                rate_limited=limited.rate_limited,
                rate_limit_wait_s=round(limited.wait_s, 3),
                # The benchmark's own cells: no level cell for a kind without levels.
                metrics=None if outcome.report is None else dict(outcome.report.cells),
            )
            dataset = {
                "source": resolved_path(loaded.source),  # the file scored from any directory
                "typed": typed.dataset,  # as given (none: the benchmark's default data)
                "sha256": loaded.content_hash,
                "benchmark": loaded.benchmark,
                "cases": len(cases),
            }
            written = RunManifest(
                run_id=paths.run_id,
                command=redacted_argv(),
                settings=config.model_dump(mode="json"),
                dataset=dataset,
                split=split_info,
                versions=package_versions(),
                git_commit=git_commit(),
                runs={model: run},
            )
            write_manifest(paths.manifest, written)

        if config.resume and not config.batch:  # a batched run's open batches are collected with --batch only
            from .._batch import refuse_open_batches

            refuse_open_batches(paths.batch_dir_for(protocol))
        manifest(existing, status=RUNNING)
        if config.batch:  # the provider's batch API answers the units first; the runner reads those
            try:
                book = _fill_by_batch(
                    config, job, units, lm, paths=paths, console=console, retry_errors=retry_errors,
                    json_adapter=lm_config.json_schema and config.program not in RAW_PROGRAMS,
                )  # fmt: skip
                if (client := client_of(lm)) is not None:  # always: the batch path needs sp-dspy's engine
                    batch_answers[f"{display_endpoint(client.api_base)} (batch)"] = book.received
            except KeyboardInterrupt:  # left while batches run: --resume collects them
                outcome.interrupted, units = True, []
            except OutputError:  # a batch ended unanswered (or a write failed): the manifest says so
                outcome.failed = True
                with contextlib.suppress(OutputError):
                    manifest(read_run_results(results_file))
                raise
        early = EarlyStop()
        try:
            with (
                JsonlStore(results_file) as store,
                ProgressView(
                    len(units),
                    label=f"{model} {protocol}",
                    console=console,
                    enabled=show_progress,
                    ledger=None if caps is None else caps.ledger,
                    rate=rate,
                ) as view,  # fmt: skip
            ):
                engine: UnitEngine[Any, Record] = UnitEngine(
                    work=work if caps is None else caps.wrap(work),
                    stop_on=(BudgetExceeded,),
                    on_error=job.on_error,
                    store=store,
                    concurrency=config.concurrency,
                    on_record=lambda record: view.record(record, case_finished=job.case_finished(record)),
                    stop_when=early.observe,
                )
                try:
                    with (
                        _adapter_context(lm_config.json_schema and config.program not in RAW_PROGRAMS),
                        _prompt_marks(config),
                    ):
                        asyncio.run(closing_transports(engine.run(units)))
                except KeyboardInterrupt:
                    outcome.interrupted = True
                finally:
                    outcome.units_run = engine.stats.done
                outcome.stopped = engine.stats.stopped_early and not outcome.interrupted
        except StoreWriteError as failure:  # a full disk: stop, keep what is written, say how to go on
            outcome.failed = True
            with contextlib.suppress(OutputError):  # the disk may be too full for the manifest as well
                manifest(read_run_results(results_file))
            raise OutputError(
                f"{failure}: the run stopped after {outcome.units_run} new unit(s); everything written is kept: "
                f"free space (or fix the cause), then continue with --resume --run-id {paths.run_id}"
            ) from None
        if caps is not None:
            outcome.spent = caps.ledger.total()
            outcome.capped_by = caps.ledger.refused_by if engine.stats.stopped else None
        complete = not (outcome.interrupted or outcome.stopped) and outcome.capped_by is None
        outcome.results = read_run_results(results_file, strict=complete)  # the one read after the units
        if complete:
            outcome.report = score(
                cases,
                outcome.results,
                per_rule=protocol == "per-rule",
                all_ids={c.id for c in cases},
                by=benchmark_kind(loaded.benchmark).breakdown,
            )
        outcome.errors = job.error_summary(outcome.results)
        manifest(outcome.results)
        if outcome.stopped:
            raise early.error(
                lm_config,
                results_file=results_file,
                kept=job.skipped + engine.stats.done,
                resume=f"--resume --retry-errors --run-id {paths.run_id}",
            )
        return outcome


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
        with (
            _adapter_context(lm_config.json_schema and config.program not in RAW_PROGRAMS),
            _prompt_marks(config),
        ):
            if protocol == "per-rule":
                asyncio.run(closing_transports(judge_target(program, case, build_targets(case)[0], lm)))
            else:
                asyncio.run(closing_transports(run_case(program, case, lm)))
    except RequestCaptured as captured:
        return captured.request
    finally:
        client.capturing = False
    raise ConfigError(f"--show-request: case {case.id} sent no request")  # a program that never calls its LM


def _fill_by_batch(
    config: EvalConfig,
    job: PerPolicyJob | PerRuleJob,
    units: list[Any],
    lm: Any,
    *,
    paths: RunPaths,
    console: Console,
    retry_errors: bool,
    json_adapter: bool,
) -> AnswerBook:
    """``--batch``: the pending units' requests answered through the provider's batch API, logged
    beside the results file (``sp_dspy._batch``); the book of the run's batch answers. Caps are
    refused: a batch is paid as a whole, not call by call."""
    from .._batch import fill_by_batch

    caps = [
        flag
        for flag, value in (
            ("--max-calls", config.caps.max_calls),
            ("--max-total-tokens", config.caps.max_tokens),
            ("--max-usd", config.caps.max_usd),
        )
        if value is not None
    ]
    if caps:
        raise ConfigError(
            f"--batch: {', '.join(caps)} stop a run call by call, and a batch is paid as a whole; "
            "see its price with --dry-run --batch, then run without the cap"
        )
    protocol = str(config.protocol)
    try:  # the run exists from its first batch on: --resume finds it whatever stops this invocation
        paths.results_for(protocol).touch()
    except OSError as exc:
        raise OutputError(f"cannot write {paths.results_for(protocol)}: {exc.strerror or exc}") from None
    return fill_by_batch(
        job.work, units, job.key, lm,
        directory=paths.batch_dir_for(protocol),
        console=console,
        resume_hint=f"--resume --run-id {paths.run_id}",
        retry_errors=retry_errors,
        concurrency=config.concurrency,
        resubmit=config.resubmit,
        context=lambda: _in_both(_adapter_context(json_adapter), _prompt_marks(config)),
    )  # fmt: skip


def _parser_label(config: EvalConfig) -> str:
    """How a run's answers are read: the official parser's mode, a guard model's own format, DSPy's adapter."""
    if config.program == "official":
        return config.parser
    return "native" if config.program in GUARD_PROGRAMS else "dspy-adapter"


def _prompt_marks(config: EvalConfig) -> contextlib.AbstractContextManager[Any]:
    """Anthropic prompt-cache marks: a DSPy program's instructions and demonstrations, the
    ``prefix`` layout's per-case prefix; none in the official baselines' bytes."""
    if config.program not in RAW_PROGRAMS:
        return marking_prefix(before_last_message)
    if config.program == "official" and config.protocol == "per-rule" and config.per_rule_layout == "prefix":
        return marking_prefix(prefix_layout_end)
    return contextlib.nullcontext()


@contextlib.contextmanager
def _in_both(
    first: contextlib.AbstractContextManager[Any], second: contextlib.AbstractContextManager[Any]
) -> Iterator[None]:
    with first, second:
        yield


def _adapter_context(json_adapter: bool) -> contextlib.AbstractContextManager[Any]:
    """DSPy programs on a schema-constrained server use the JSON adapter (it sends the schema)."""
    if not json_adapter:
        return contextlib.nullcontext()
    dspy = import_dspy()
    return dspy.context(adapter=dspy.JSONAdapter())


def _status(outcome: EvalOutcome) -> str:
    """The manifest's word for how the invocation ended."""
    if outcome.failed:
        return "failed"
    if outcome.interrupted:
        return "interrupted"
    if outcome.stopped:
        return "stopped"
    return "capped" if outcome.capped_by else "complete"


def _counting(
    work: Callable[[Unit], Awaitable[Record]], lm: Any, lm_config: LMConfig
) -> tuple[Callable[[Unit], Awaitable[Record]], Callable[[], dict[str, int]]]:
    """``work``, and the requests each endpoint answered in this invocation so far: a replica pool and
    sp-dspy's HTTP engine count their own, DSPy's engine on one ``--api-base`` what it tracks."""
    counts: Mapping[str, int] | None = getattr(lm, "endpoint_requests", None)
    client = client_of(lm)
    if counts is not None:
        return work, lambda: dict(counts)
    if client is not None:
        return work, lambda: {display_endpoint(client.api_base): client.answered}
    if len(lm_config.api_bases) != 1:
        return work, dict
    calls = 0

    async def tracked(unit: Unit) -> Record:
        nonlocal calls
        with import_dspy().track_usage() as tracker:
            try:
                return await work(unit)
            finally:
                calls += sum(len(entries) for entries in tracker.usage_data.values())

    return tracked, lambda: {display_endpoint(lm_config.api_bases[0]): calls}
