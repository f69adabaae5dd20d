"""``sp-dspy compile``: compile a guard program with a DSPy optimizer into an artifact directory.

Trains on train, selects on dev, never reads test. Progress (phase, spend, best dev score) goes
to stderr, the optimizers' own logs to ``compile.log``, and the final summary to stdout.
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.live import Live
from rich.text import Text

from sp_dspy.optimizers import parse_overrides

from .._benchmarks import benchmark_kind
from .._data import parse_ratios
from .._errors import ConfigError, validation_problem
from .._interrupt import interrupted_exit_code
from .._lm import configure_cache
from .._table import FitTable
from . import _lm_options as lmo
from . import _options as opt
from ._console import console, err_console, visible, warn
from ._eval import EXIT_UNFINISHED
from ._export import MlflowFlags, mlflow_log_compile

if TYPE_CHECKING:
    from rich.console import RenderableType

    from .._compile import CompileConfig, CompileOutcome, CompilePlan, CompileStatus
    from .._lm import LMConfig

#: The DSPy programs a compile can start from (``--program``); ``eval --program`` runs them too.
COMPILABLE = ("dspy", "dspy-cot")


def register(app: typer.Typer) -> None:
    app.command("compile")(compile_command)


ProgramOption = Annotated[
    str,
    typer.Option("--program", help="DSPy program to start from: dspy, or dspy-cot (chain of thought)."),
]
OptimizerOption = Annotated[str, typer.Option("--optimizer", help="mipro, gepa, bootstrap, simba or copro.")]
ApiBaseOption = Annotated[
    str | None,
    typer.Option("--api-base", help="Endpoint for every LM of the command (unless overridden)."),
]
ApiKeyEnvOption = Annotated[
    str | None, typer.Option("--api-key-env", help="Key variable for every LM (unless overridden).")
]
PromptLmOption = Annotated[
    str | None, typer.Option("--prompt-lm", help="LM that proposes instructions (default: --lm).")
]
PromptApiBaseOption = Annotated[
    str | None, typer.Option("--prompt-api-base", help="Endpoint of the prompt LM (default: --api-base).")
]
PromptApiKeyEnvOption = Annotated[
    str | None,
    typer.Option("--prompt-api-key-env", help="Key variable of the prompt LM (default: --api-key-env)."),
]
ReflectionLmOption = Annotated[
    str | None,
    typer.Option("--reflection-lm", help="GEPA's reflection LM (default: --prompt-lm, else --lm)."),
]
ReflectionApiBaseOption = Annotated[
    str | None,
    typer.Option("--reflection-api-base", help="Endpoint of the reflection LM (default: --api-base)."),
]
ReflectionApiKeyEnvOption = Annotated[
    str | None,
    typer.Option(
        "--reflection-api-key-env", help="Key variable of the reflection LM (default: --api-key-env)."
    ),
]
SplitsOption = Annotated[
    Path | None,
    typer.Option("--splits", help="Split file (sp-dspy split); default: a new split made with --seed."),
]
RatiosOption = Annotated[str, typer.Option("--ratios", help="train,dev,test ratios of the default split.")]
OptimizerConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--optimizer-config", help="Optimizer YAML (default: the package's configs/optimizers.yaml)."
    ),
]
SetOption = Annotated[
    list[str] | None, typer.Option("--set", help="Override an optimizer setting, KEY=VALUE (repeatable).")
]
TopKOption = Annotated[
    int, typer.Option("--top-k", min=1, help="Optimizer candidates scored on dev at the end.")
]


@dataclass
class SamplingFlags:
    """The task LM's per-call flags."""

    temperature: lmo.Temperature = None
    max_tokens: lmo.MaxTokens = None
    reasoning_effort: lmo.ReasoningEffort = None
    timeout: lmo.Timeout = None
    num_retries: lmo.NumRetries = None
    rate_limit_timeout: lmo.RateLimitTimeout = None
    no_adaptive: lmo.NoAdaptive = False
    json_schema: lmo.JsonSchema = False

    def overrides(self) -> dict[str, Any]:
        """The ``LMConfig`` fields these flags set (``None``: keep the model's)."""
        changes = {name: value for name, value in vars(self).items() if name != "no_adaptive"}
        return {
            **changes,
            "json_schema": self.json_schema or None,
            "adaptive": False if self.no_adaptive else None,
        }


@dataclass
class HelperLmFlags:
    """The prompt and reflection LMs, each with its own endpoint and key flags."""

    prompt_lm: PromptLmOption = None
    prompt_api_base: PromptApiBaseOption = None
    prompt_api_key_env: PromptApiKeyEnvOption = None
    reflection_lm: ReflectionLmOption = None
    reflection_api_base: ReflectionApiBaseOption = None
    reflection_api_key_env: ReflectionApiKeyEnvOption = None


@opt.with_flag_groups
def compile_command(
    out: Annotated[Path, typer.Option("--out", help="Artifact directory to write.", show_default=False)],
    program: ProgramOption = "dspy",
    protocol: Annotated[str, typer.Option("--protocol", help="per-policy or per-rule.")] = "per-policy",
    optimizer: OptimizerOption = "mipro",
    lm: lmo.Lm = None,
    config: lmo.ModelsConfig = None,
    api_base: ApiBaseOption = None,
    api_key_env: ApiKeyEnvOption = None,
    sampling: SamplingFlags = SamplingFlags(),
    helpers: HelperLmFlags = HelperLmFlags(),
    dataset: opt.Dataset = None,
    benchmark: opt.Benchmark = "safepyramid",
    splits: SplitsOption = None,
    ratios: RatiosOption = "0.1,0.1,0.8",
    lenient: opt.Lenient = False,
    seed: opt.Seed = 0,
    caps: opt.CapFlags = opt.CapFlags(),
    dry_run: opt.DryRun = False,
    no_cache: lmo.NoCache = False,
    optimizer_config: OptimizerConfigOption = None,
    set_: SetOption = None,
    top_k: TopKOption = 1,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, help="Dev cases in flight.")] = 8,
    force: Annotated[bool, typer.Option("--force", help="Replace an artifact already in --out.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Hide the progress display.")] = False,
    mlflow: MlflowFlags = MlflowFlags(),
) -> None:
    """Compile a better guard: optimize a DSPy program on train, select on dev, save the artifact."""
    from .._compile import CompileConfig, compile_guard  # numpy

    if program not in COMPILABLE:
        raise ConfigError(f"--program {program!r}: expected {' or '.join(COMPILABLE)}")
    if protocol not in ("per-policy", "per-rule"):
        raise ConfigError(f"--protocol {protocol!r}: expected per-policy or per-rule")
    benchmark_kind(benchmark)  # an unknown name fails here, naming --benchmark and the choices
    task, prompt, reflection = _lms(lm, config, api_base, api_key_env, sampling, helpers, no_cache=no_cache)
    fields = {
        "protocol": protocol, "cot": program == "dspy-cot", "optimizer": optimizer,
        "optimizer_config": optimizer_config, "overrides": parse_overrides(set_ or []), "dataset": dataset,
        "benchmark": benchmark, "splits": splits,
        "ratios": parse_ratios(ratios), "lenient": lenient, "seed": seed, "out": out, "caps": caps.caps(),
        "top_k": top_k, "concurrency": concurrency, "dry_run": dry_run, "force": force,
    }  # fmt: skip
    try:
        settings = CompileConfig.model_validate(fields)
    except ValidationError as exc:
        field, message = validation_problem(exc)
        name = field.rpartition(".")[2]
        flag = opt.CAP_FLAGS.get(name, "--" + name.replace("_", "-"))  # caps.max_tokens: --max-total-tokens
        raise ConfigError(f"{flag}: {message}") from None
    if dry_run:
        outcome = compile_guard(settings, task, prompt, reflection, window=lmo.context_window(task))
        _print_plan(outcome.plan, settings.caps)
        for warning in outcome.warnings:  # before anything is spent: capped demos, a foreign split
            err_console.print(f"[yellow]warning:[/yellow] {warning}")
        return
    _compile(settings, (task, prompt, reflection), no_cache=no_cache, quiet=quiet, mlflow=mlflow)


def _lms(
    lm: str | None, config: Path | None, api_base: str | None, api_key_env: str | None,
    sampling: SamplingFlags, helpers: HelperLmFlags, *, no_cache: bool,
) -> tuple[LMConfig, LMConfig | None, LMConfig | None]:  # fmt: skip
    """The task, prompt and reflection LMs' configs (``--lm`` required)."""
    if lm is None:
        raise ConfigError("--lm is required: a model string, a configured name, fake[/behaviour] or local")
    cache = False if no_cache else None
    task = lmo.lm_configs(
        lm, None, config, default=lm, api_base=api_base, api_key_env=api_key_env, cache=cache,
        **sampling.overrides(),
    )[0]  # fmt: skip

    def helper_lm(spec: str | None, flag: str, base: str | None, key_env: str | None) -> LMConfig | None:
        """The prompt or reflection LM: its own endpoint and key flags, else the task LM's."""
        if spec is None:
            return None
        overrides = {"api_base": base or api_base, "api_key_env": key_env or api_key_env, "cache": cache}
        return lmo.lm_configs(spec, None, config, default=spec, flag=flag, **overrides)[0]

    h = helpers
    prompt = helper_lm(h.prompt_lm, "--prompt-lm", h.prompt_api_base, h.prompt_api_key_env)
    reflection = helper_lm(
        h.reflection_lm, "--reflection-lm", h.reflection_api_base, h.reflection_api_key_env
    )
    return task, prompt, reflection


def _compile(
    settings: CompileConfig, lms: tuple[LMConfig, LMConfig | None, LMConfig | None], *, no_cache: bool,
    quiet: bool, mlflow: MlflowFlags,
) -> None:  # fmt: skip
    """Compile with a live progress display; print the outcome (exit 3: failed calls left answers out)."""
    from .._compile import CompileStatus, compile_guard

    task, prompt, reflection = lms
    out = settings.out
    tracking = mlflow.tracking()
    # The terminal's stderr, bound now: while the compile runs, sys.stderr goes to compile.log.
    terminal = Console(file=sys.stderr)
    configure_cache(enabled=not no_cache, warn=lambda message: warn(message, on=terminal))
    status = CompileStatus()
    had_artifact = (out / "manifest.json").exists()
    with contextlib.ExitStack() as stack:
        live = [
            stack.enter_context(lmo.lm_session(c)) if c is not None else None
            for c in (task, prompt, reflection)
        ]
        if not quiet:
            stack.enter_context(_progress(status, terminal))
        try:
            outcome = compile_guard(
                settings, live[0] or task, live[1], live[2], status=status, window=lmo.context_window(task)
            )
        except KeyboardInterrupt:
            stack.close()  # the display first, then the message below it
            cached = not no_cache and not task.is_fake  # the fake's answers are never cached
            _print_interrupted(status, out, had_artifact=had_artifact, cached=cached)
            raise typer.Exit(interrupted_exit_code()) from None
    _print_outcome(outcome)
    if tracking is not None:
        mlflow_log_compile(tracking, out, experiment=mlflow.mlflow_experiment)
    if outcome.errors.errors:  # an artifact was saved, but on answers its failed calls left out
        raise SystemExit(EXIT_UNFINISHED)


def _spend(status: CompileStatus) -> str:
    """``calls 12 / 40, tokens 3,400, USD unpriced``: the spend so far against the caps."""
    caps = status.caps
    total = status.budget.total() if status.budget is not None else None
    calls, tokens = (total.calls, total.tokens) if total is not None else (0, 0)
    parts = [
        f"calls {calls:,}" + (f" / {caps.max_calls:,}" if caps.max_calls is not None else ""),
        f"tokens {tokens:,}" + (f" / {caps.max_tokens:,}" if caps.max_tokens is not None else ""),
    ]
    if total is not None and total.usd is not None:
        parts.append(f"USD {total.usd:,.4f}" + (f" / {caps.max_usd:g}" if caps.max_usd is not None else ""))
    held = status.budget.reserved() if status.budget is not None else None
    if held is not None and held.calls:  # the worst case of the calls in flight
        usd = f", USD {held.usd:,.4f}" if total is not None and total.usd is not None else ""
        parts.append(f"reserved {held.calls:,} call(s), {held.tokens:,} tokens{usd}")
    failed = status.failures.counts() if status.failures is not None else ""
    return ", ".join(parts) + (f"; failed calls: {failed}" if failed else "")


def _panel(status: CompileStatus) -> RenderableType:
    def fmt(value: float | None) -> str:
        return "-" if value is None else f"{value:.2f}"

    scores = f"dev score: start {fmt(status.start_score)}, best so far {fmt(status.best_score)}"
    tried, best = status.tried()
    if tried:
        scores += f"; {tried} candidate(s) tried, best on the optimizer's metric {fmt(best)}"
    return Text.assemble(("compile: ", "bold"), status.phase, "\n", _spend(status), "\n", scores)


def _progress(status: CompileStatus, console: Console) -> contextlib.AbstractContextManager[Any]:
    """One progress display: a live panel on a terminal, else one line per phase."""
    if console.is_terminal:
        return Live(
            get_renderable=lambda: _panel(status), console=console, refresh_per_second=4,
            transient=True, redirect_stdout=False, redirect_stderr=False,
        )  # fmt: skip

    def line(s: CompileStatus) -> None:
        best = "" if s.best_score is None else f"; best dev score so far {s.best_score:.2f}"
        console.print(f"compile: {s.phase} ({_spend(s)}{best})", highlight=False, soft_wrap=True)

    status.on_phase = line
    return contextlib.nullcontext()


def _print_interrupted(status: CompileStatus, out: Path, *, had_artifact: bool, cached: bool) -> None:
    calls = status.budget.total().calls if status.budget is not None else 0
    artifact = "the artifact already there is unchanged" if had_artifact else "no artifact was written"
    if cached:
        keep = (f"the {calls:,} LM call(s) made so far are in the response cache, so rerunning the same "
                "command continues where this one stopped")  # fmt: skip
    else:
        keep = f"the {calls:,} LM call(s) made so far were not cached: a rerun starts over"
    log = f" (its log: {out}/compile.log)" if status.budget is not None else ""  # set once the log is open
    err_console.print(f"interrupted during '{status.phase}': {artifact} in {out}{log}; {keep}",
                      highlight=False, soft_wrap=True)  # fmt: skip


def _print_plan(plan: CompilePlan, caps: Any) -> None:
    table = FitTable(title="Estimated compile (dry run: nothing was sent)")
    for column in ("phase", "LM", "calls", "prompt tokens", "completion tokens", "USD"):
        table.add_column(column, justify="left" if column in ("phase", "LM") else "right")
    for phase, roles in plan.phases.items():
        for role, est in roles.items():
            table.add_row(phase, role, *opt.estimate_cells(est))
    total = plan.total
    table.add_row("total", "", *opt.estimate_cells(total), style="bold")
    console.print(table)
    for flag, cap in opt.caps_below(caps, total):
        console.print(f"[yellow]{flag} {cap:g} is below the estimate: the compile "
                      "would stop there and save the best program found (budget-limited)[/yellow]")  # fmt: skip
    console.print("[dim]These are estimates, not limits; only --max-calls, --max-total-tokens and --max-usd "
                  "bound what a compile spends.[/dim]")  # fmt: skip
    for line in plan.assumptions:
        console.print(f"[dim]assumes: {line}[/dim]")


def _print_outcome(outcome: CompileOutcome) -> None:
    manifest = outcome.manifest
    if manifest is None:
        return
    before, after, usage = manifest.dev.before, manifest.dev.after, manifest.usage
    out = outcome.config.out
    console.print(
        f"[bold]{manifest.program} {manifest.protocol}[/bold] compiled with {manifest.optimizer.name}"
    )
    console.print(f"dev score (strict RMR): {before.describe()} -> {after.describe()}")
    console.print(f"{manifest.dev.reason[0].upper()}{manifest.dev.reason[1:]}.")
    console.print(f"calls {usage['calls']:,} ({usage['cache_hits']:,} from cache), "
                  f"tokens {usage['total_tokens']:,}, USD {opt.money(usage['usd_paid'])}, {manifest.wall_s:.1f}s")  # fmt: skip
    if manifest.budget_limited:
        refused_by = manifest.budget.refused_by
        console.print(f"[yellow]budget-limited ({opt.CAP_FLAGS.get(refused_by or '', refused_by)}): saved the best "
                      "program found before the cap[/yellow]")  # fmt: skip
    for warning in outcome.warnings:
        err_console.print(f"[yellow]warning:[/yellow] {warning}")
    retry = "the same command (the calls that answered come from the response cache)"
    for line in outcome.errors.lines(retry, window=outcome.window, what="LM call(s)"):
        err_console.print(visible(line), markup=False, highlight=False, soft_wrap=True)
    console.print(f"artifact: {out} (program.json, manifest.json, prompt.md, splits.json; log: compile.log)")
    console.print(f"score on test: {outcome.score_command}", soft_wrap=True)
