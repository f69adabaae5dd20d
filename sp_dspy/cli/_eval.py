"""``sp-dspy eval``: run a guard program on an LM over benchmark cases, then score.

With no arguments: the official per-policy baseline on the bundled sample with the embedded model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .._benchmarks import DEFAULT_BENCHMARK, benchmark_kind, kind_of_cases
from .._errors import ConfigError
from .._executor import run_eval
from .._export import mlflow_log_eval
from .._interrupt import interrupted_exit_code
from .._lm import configure_cache, key_for
from .._metrics import EXIT_BELOW_THRESHOLD, JudgmentRecord
from .._runner import EvalPlan, build_eval_config, first_request, new_run_id, plan_run
from .._table import FitTable
from . import _lm_options as lmo
from . import _options as opt
from ._console import console, err_console, say_note, visible, warn
from ._export import MlflowFlags
from ._fail_under import FailUnder, check_known_cells, meets, parse_fail_under

if TYPE_CHECKING:
    from .._compile import BudgetCaps
    from .._lm import HttpRequest, LMConfig
    from .._runner import EvalConfig

# Some units ended in error, or a budget cap stopped the run.
EXIT_UNFINISHED = 3
# Enough of the sample to show every level within a few minutes on a 2-core CPU.
LOCAL_DEFAULT_LIMIT = 3
SMALL_MODEL_NOTE = (
    "SmolLM2-135M is a plumbing check, not a guard: its verdicts are noise. "
    "To evaluate a real model change one flag, e.g. --lm openai/gpt-5-mini (reads OPENAI_API_KEY)."
)


def register(app: typer.Typer) -> None:
    app.command("eval")(eval_command)


ProgramOption = Annotated[
    str,
    typer.Option(
        "--program",
        help="official, dspy, dspy-cot, dspy-severity[-cot] (PKU-SafeRLHF), or a compiled artifact directory.",
    ),
]
ProtocolOption = Annotated[
    str | None,
    typer.Option("--protocol", help="per-policy or per-rule (default: per-policy, or the artifact's own)."),
]
AllowOverlapOption = Annotated[
    bool,
    typer.Option("--allow-overlap", help="Score an artifact on cases of its own train/dev split anyway."),
]
PerRuleLayoutOption = Annotated[
    str, typer.Option("--per-rule-layout", help="official, or prefix (cache-friendly; not official).")
]
RunIdOption = Annotated[str | None, typer.Option("--run-id", help="Run id (default: RUN_ID or a timestamp).")]
ResumeOption = Annotated[
    bool, typer.Option("--resume", help="Continue a run (same --run-id, or the newest).")
]
RetryErrorsOption = Annotated[bool, typer.Option("--retry-errors", help="On --resume, retry errored units.")]
RunConfigOption = Annotated[
    Path | None, typer.Option("--run-config", help="YAML file of eval settings; flags override it.")
]
ShowRequestOption = Annotated[
    bool,
    typer.Option(
        "--show-request",
        help="Print the first request exactly as it would be sent (URL, headers with keys masked, "
        "body) and send nothing.",
    ),
]
BatchOption = Annotated[
    bool,
    typer.Option(
        "--batch",
        help="Send every request through the provider's batch API (OpenAI, Anthropic): half price, "
        "answers within 24 h; --resume collects batches left running.",
    ),
]

ResubmitOption = Annotated[
    bool,
    typer.Option(
        "--resubmit",
        help="With --batch --resume: send again the requests of a batch the run was creating when it "
        "stopped, when the provider cannot tell whether it was created (it may pay them twice).",
    ),
]
ParserOption = Annotated[str, typer.Option("--parser", help="strict (official) or robust.")]
ConcurrencyOption = Annotated[int, typer.Option("--concurrency", min=1, help="LM calls in flight.")]
OutputDirOption = Annotated[Path, typer.Option("--output-dir", help="Where results go.")]
QuietOption = Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")]
VerboseOption = Annotated[bool, typer.Option("--verbose", "-v", help="Per-case lines and LM settings.")]


@opt.with_flag_groups
def eval_command(
    data: opt.DataFlags = opt.DataFlags(),
    program: ProgramOption = "official",
    protocol: ProtocolOption = None,
    allow_overlap: AllowOverlapOption = False,
    parser: ParserOption = "strict",
    per_rule_layout: PerRuleLayoutOption = "official",
    concurrency: ConcurrencyOption = 16,
    output_dir: OutputDirOption = Path("output/results"),
    run_id: RunIdOption = None,
    resume: ResumeOption = False,
    retry_errors: RetryErrorsOption = False,
    run_config: RunConfigOption = None,
    lm: lmo.Lm = None,
    models: lmo.Models = None,
    config: lmo.ModelsConfig = None,
    lm_flags: lmo.LmFlags = lmo.LmFlags(),
    dry_run: opt.DryRun = False,
    caps: opt.CapFlags = opt.CapFlags(),
    show_request: ShowRequestOption = False,
    log_requests: opt.LogRequests = False,
    batch: BatchOption = False,
    resubmit: ResubmitOption = False,
    quiet: QuietOption = False,
    verbose: VerboseOption = False,
    fail_under: FailUnder = None,
    mlflow: MlflowFlags = MlflowFlags(),
) -> None:
    """Evaluate a guard (official baseline, DSPy program or compiled artifact) and score it.

    Exit status: 0 every unit answered; 2 bad input, an error, or a run stopped early on a
    failure retrying cannot fix (key, model, address); 3 some units ended in error, or a
    budget cap stopped the run; 4 every unit answered but a --fail-under threshold is not met;
    130 Ctrl-C, 143 SIGTERM (finished units kept: --resume continues).
    """
    configs = lmo.lm_configs(lm, models, config, default=lmo.LOCAL, **lm_flags.overrides())
    local_default = (
        any(map(lmo.is_local, configs)) and data.limit is None and data.dataset is data.split is None
    )
    flags = {"data": data.selection(limit=LOCAL_DEFAULT_LIMIT if local_default else data.limit),
             "program": program, "protocol": protocol, "allow_overlap": allow_overlap, "parser": parser,
             "per_rule_layout": per_rule_layout, "concurrency": concurrency, "output_dir": output_dir,
             "run_id": run_id, "resume": resume, "batch": batch, "resubmit": resubmit, "caps": caps.caps()}  # fmt: skip
    settings, thresholds = _checked(build_eval_config(flags, run_config), fail_under)
    if dry_run:
        for lm_config in configs:  # no local server is started, no LM built
            _print_plan(plan_run(settings, lm_config), settings.caps, window=lmo.context_window(lm_config))
        return
    settings = _ready(settings, configs, no_cache=lm_flags.no_cache, local_default=local_default)
    if show_request:  # each model's first request as JSON on stdout, unwrapped for jq
        _show_requests(settings, configs)
        return
    _run_models(settings, configs, retry_errors=retry_errors, log_requests=log_requests, quiet=quiet,
                verbose=verbose, mlflow=mlflow, thresholds=thresholds)  # fmt: skip


def _checked(settings: EvalConfig, fail_under: list[str] | None) -> tuple[EvalConfig, Any]:
    """The settings, refused where flags contradict (``--resubmit`` without ``--batch --resume``), and the
    ``--fail-under`` thresholds, each naming a cell the benchmark has."""
    thresholds = parse_fail_under(fail_under)
    if settings.resubmit and not (settings.batch and settings.resume):
        raise ConfigError(
            "--resubmit: only with --batch --resume (it sends again the requests of a batch a stopped "
            "run was creating, when the provider cannot say whether it exists)"
        )
    check_known_cells(thresholds, settings.data.benchmark)
    return settings, thresholds


def _ready(
    settings: EvalConfig, configs: list[LMConfig], *, no_cache: bool, local_default: bool
) -> EvalConfig:
    """The settings every model of this invocation runs with, after the checks that need no LM call."""
    if settings.run_id is None and not settings.resume:
        # One run id for every model of this invocation, so they share one manifest.
        settings = settings.model_copy(update={"run_id": new_run_id()})
    if any(lmo.is_local(c) for c in configs) and settings.concurrency > lmo.LOCAL_CONCURRENCY:
        # One llama.cpp slot: more requests in flight only wait in its queue (and time out).
        settings = settings.model_copy(update={"concurrency": lmo.LOCAL_CONCURRENCY})
    configure_cache(enabled=not no_cache, warn=warn)
    if local_default:
        err_console.print(
            f"[dim]Embedded model: the first {LOCAL_DEFAULT_LIMIT} cases of the bundled sample "
            "(one conversation at L0, L1, L2). Pass --limit 24 for the whole sample.[/dim]"
        )
    for lm_config in configs:  # a missing key fails now, not after the models before it ran
        if not lmo.is_local(lm_config):  # the embedded server's address is known once it runs
            key_for(lm_config, lm_config.api_bases[0] if lm_config.api_bases else None)
        if settings.batch:  # a provider without a batch API fails before any model is run
            batch_wire(lm_config)
    return settings


def _show_requests(settings: EvalConfig, configs: list[LMConfig]) -> None:
    """``--show-request``: each model's first request (or its batch line) as JSON on stdout."""
    configure_cache(enabled=False)
    for lm_config in configs:
        with lmo.lm_session(lm_config) as live:
            request = first_request(settings, live)
        if len(configs) > 1:
            typer.echo(f"# {live.display_name()}")
        shown = batch_line(live, request) if settings.batch else request.shown()
        typer.echo(json.dumps(shown, indent=2, ensure_ascii=False))


def _run_models(
    settings: EvalConfig, configs: list[LMConfig], *, retry_errors: bool, log_requests: bool, quiet: bool,
    verbose: bool, mlflow: MlflowFlags, thresholds: Any,
) -> None:  # fmt: skip
    """Run and print each model in turn; exit 3 when a unit ended in error or a cap stopped a run,
    4 when every unit answered but a ``--fail-under`` threshold is not met."""
    tracking = mlflow.tracking()
    units_failed, below = False, False
    for lm_config in configs:
        with lmo.lm_session(lm_config) as live:
            if verbose:
                err_console.print(f"[dim]LM settings: {live.public_dict()}[/dim]")
            outcome = run_eval(
                settings, live, console=err_console, show_progress=not quiet, retry_errors=retry_errors,
                log_requests=log_requests,
            )  # fmt: skip
        window = lmo.context_window(live) if outcome.errors.errors else None
        _print_outcome(
            outcome, live.display_name(), small=lmo.is_local(lm_config), verbose=verbose, window=window
        )
        _print_batched(outcome, live)
        _print_prompt_cache(outcome, live, batch=settings.batch)
        if tracking is not None:
            for logged in mlflow_log_eval(tracking, [outcome.results_file], notify=say_note):
                console.print(
                    f"MLflow: {logged.label} logged as run {logged.run_id}", markup=False, highlight=False
                )
        if outcome.interrupted:
            # Not typer.Exit: with standalone_mode=False (``main``) click returns its code instead.
            raise SystemExit(interrupted_exit_code())
        if outcome.capped_by:
            raise SystemExit(EXIT_UNFINISHED)
        units_failed = units_failed or outcome.errors.errors > 0
        if outcome.report is not None:
            label = live.display_name() if len(configs) > 1 else ""
            below = not meets(outcome.report, thresholds, label=label) or below
    if units_failed:
        raise SystemExit(EXIT_UNFINISHED)
    if below:
        raise SystemExit(EXIT_BELOW_THRESHOLD)


def batch_wire(lm_config: LMConfig) -> Any:
    """The batch API of the model's provider (``ConfigError``: it has none sp-dspy drives)."""
    from .._batch import wire_class

    return wire_class(lm_config.provider, lm_config.display_name())


def batch_line(lm_config: LMConfig, request: HttpRequest) -> dict[str, Any]:
    """``--show-request --batch``: the request's line in the provider's batch input (its body as sent alone)."""
    from .._batch import custom_id

    return dict(batch_wire(lm_config).line(custom_id(request), request))


def _print_plan(plan: EvalPlan, caps: BudgetCaps, *, window: int | None) -> None:
    """The projection of one model's run, which cap would stop it, and whether its largest
    prompt fits the model's context window (``window``, where known)."""
    est = plan.estimate
    table = FitTable(title=f"Projected eval of {plan.model} (dry run: nothing was sent)")
    batched = ("USD batched",) if plan.batch_usd is not None else ()
    for column in ("program", "cases", "calls", "prompt tokens", "completion tokens", "USD", *batched):
        table.add_column(column, justify="left" if column == "program" else "right")
    cells = opt.estimate_cells(est) + ((opt.money(plan.batch_usd),) if batched else ())
    table.add_row(f"{plan.program} {plan.protocol}", f"{plan.cases:,}", *cells)
    console.print(table)
    for flag, cap in opt.caps_below(caps, est):
        console.print(
            f"[yellow]{flag} {cap:g} is below the projection: the run would stop there, keep its "
            "records and say how to continue[/yellow]"
        )
    needed = plan.largest_prompt + plan.completion_guess
    if window and needed > window:
        console.print(
            f"[yellow]the largest projected prompt (~{plan.largest_prompt:,} tokens, with its "
            f"{plan.completion_guess}-token answer) does not fit {plan.model}'s context window of "
            f"{window:,} tokens: such calls would fail with context_length; shrink them with fewer "
            "demonstrations or a smaller --max-tokens, or use a larger-context model[/yellow]"
        )
    elif window:
        console.print(
            f"[dim]largest projected prompt ~{plan.largest_prompt:,} of {window:,} context tokens[/dim]"
        )
    if plan.cache_read_tokens:
        saved = "" if plan.cache_saved_usd is None else f", saving ~{opt.money(plan.cache_saved_usd)}"
        console.print(
            f"prompt cache: ~{plan.cache_read_tokens:,} of the {est.usage.prompt_tokens:,} prompt tokens "
            f"repeat a stable prefix the provider's cache can serve{saved} (not subtracted from the USD shown)",
            highlight=False,
        )
    if plan.limit_bound_s is not None:
        console.print(
            f"wall time at the model's rate limits ({plan.limits}): at least "
            f"{_minutes(plan.limit_bound_s)} (calls wait out rate limits; concurrency adapts to them)",
            highlight=False,
        )
    for line in plan.assumptions:
        console.print(f"[dim]assumes: {line}[/dim]")


def _minutes(seconds: float) -> str:
    """``45 s``, ``12.5 min``, ``3.2 h``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


def _print_batched(outcome: Any, lm_config: LMConfig) -> None:
    """How many answers came through the provider's batch API, and at what rate (not cache hits)."""
    if outcome.totals.batched:
        from .._pricing import batch_price_basis

        err_console.print(
            f"batch: {outcome.totals.batched} LM answer(s) came from the provider's batch API, priced at "
            f"{batch_price_basis(lm_config)}",
            highlight=False,
            soft_wrap=True,
        )


def _print_prompt_cache(outcome: Any, lm_config: LMConfig, *, batch: bool) -> None:
    """The prompt tokens the provider's prompt cache served (and wrote), and what that saved."""
    from .._pricing import cache_savings

    usage = outcome.totals.usage
    read, written = usage.cache_read_tokens or 0, usage.cache_write_tokens or 0
    if not (read or written):
        return
    saved = cache_savings(lm_config, usage, batch=batch)
    wrote = f", {written:,} written to it" if written else ""
    worth = f"; it saved {opt.money(saved)} at the price map's rates" if saved is not None else ""
    err_console.print(
        f"prompt cache: {read:,} of {usage.prompt_tokens:,} prompt tokens read from the provider's cache"
        f"{wrote}{worth}",
        highlight=False,
        soft_wrap=True,
    )


def _print_outcome(outcome: Any, model: str, *, small: bool, verbose: bool, window: int | None) -> None:
    if outcome.skipped_on_resume:
        errors = (
            f" ({outcome.skipped_errors} of them ended in error; --retry-errors re-sends them)"
            if outcome.skipped_errors
            else ""
        )
        err_console.print(
            f"resumed: {outcome.skipped_on_resume} unit(s) already done were not sent again{errors}",
            highlight=False,
        )
    if outcome.interrupted:
        err_console.print(
            f"[yellow]interrupted[/yellow]: {outcome.units_run} unit(s) written to {outcome.results_file}; "
            f"continue with --resume --run-id {outcome.paths.run_id}"
        )
        return
    if outcome.capped_by:
        spent = outcome.spent
        flag = opt.CAP_FLAGS[outcome.capped_by]
        err_console.print(
            f"[yellow]stopped at {flag}[/yellow]: spent {spent.calls:,} call(s), {spent.tokens:,} tokens"
            f"{f', ${spent.usd:,.4f}' if spent.usd is not None else ''}; {outcome.units_run} unit(s) written to "
            f"{outcome.results_file}; continue with --resume --run-id {outcome.paths.run_id} "
            f"and a larger {flag} (or none)"
            + (
                ""
                if flag == "--max-calls"
                else "; a unit starts only when its worst case (its prompt and the model's output limit, "
                "--max-tokens) fits what the cap leaves"
            ),
            soft_wrap=True,
        )
        return

    if verbose:
        for record in outcome.results.lines:
            unit = f"{record.cid} {record.rule}" if isinstance(record, JudgmentRecord) else f"{record.id} "
            console.print(f"{unit} {record.parse_status}")
    console.print(f"\n[bold]{model}[/bold]: {len(outcome.cases)} case(s)")
    # The score tables of the cases' benchmark kind (PKU-SafeRLHF's beside the paper's figures).
    kind = kind_of_cases(outcome.cases) or benchmark_kind(DEFAULT_BENCHMARK)
    extra = kind.extra_scores(outcome.cases, outcome.results) if outcome.cases else {}
    for table in kind.score_tables(outcome.report, extra):
        console.print(table)
    console.print(f"results: {outcome.results_file}\nmanifest: {outcome.paths.manifest}")
    if outcome.totals.cache_hits:
        err_console.print(
            f"cache: {outcome.totals.cache_hits} LM answer(s) came from the response cache; "
            "their tokens and dollars count as when first produced",
            highlight=False,
            soft_wrap=True,
        )
    retry = f"the same command plus --resume --retry-errors --run-id {outcome.paths.run_id}"
    for line in outcome.errors.lines(retry, window=window):
        err_console.print(visible(line), markup=False, highlight=False, soft_wrap=True)
    if small:
        console.print(f"[yellow]{SMALL_MODEL_NOTE}[/yellow]")
