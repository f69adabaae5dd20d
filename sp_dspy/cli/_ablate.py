"""``sp-dspy ablate``: per-rule vs per-policy (and compiled programs) on one LM, one report.

Flags override an optional YAML ``--plan`` file; on ``--resume`` the plan saved in OUTDIR is the base.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import ValidationError
from rich import box

from .._errors import ConfigError, validation_problem
from .._interrupt import interrupted_exit_code
from .._lm import LMConfig, configure_cache
from .._report import render_terminal
from .._report._html_tables import DASH, count, num
from .._table import FitTable
from . import _lm_options as lmo
from . import _options as opt
from ._console import console, err_console, visible, warn
from ._eval import EXIT_UNFINISHED, LOCAL_DEFAULT_LIMIT, SMALL_MODEL_NOTE
from ._export import MlflowFlags, mlflow_log_plan

if TYPE_CHECKING:
    from .._ablate import AblationOutcome, AblationPlan

VARIANTS_HELP = (
    "Comma-separated variant names or compiled artifact directories. Default: official-per-policy,"
    "official-per-rule,dspy-per-policy,dspy-per-rule. Also: official-per-rule-prefix (cache-friendly, "
    "not official), dspy-cot-per-policy, dspy-cot-per-rule."
)


def register(app: typer.Typer) -> None:
    app.command("ablate")(ablate_command)


def _overlay(base: dict[str, Any], flags: dict[str, Any]) -> dict[str, Any]:
    """Flags given on the command line (not None) replace the plan file's values."""
    merged = dict(base)
    for key, value in flags.items():
        if isinstance(value, dict):
            merged[key] = _overlay(dict(base.get(key) or {}), value)
        elif value is not None:
            merged[key] = value
    return merged


def resolve_lm(
    spec: object,
    config_file: Path | None,
    where: str,
    *,
    role: str = "lm",
    command: str = "ablate",
    **overrides: Any,
) -> LMConfig:
    """``--lm`` (or the plan's ``lm:``; ``role`` names another LM field): a model string or name,
    or a mapping of LM settings."""
    flag = "--" + role.replace("_", "-")
    if spec is None:
        raise ConfigError(f"{command}: no model; pass {flag} MODEL (or set {role}: in the --plan file)")
    if isinstance(spec, str):
        return lmo.lm_configs(spec, None, config_file, default=lmo.LOCAL, flag=flag, **overrides)[0]
    if not isinstance(spec, dict):
        raise ConfigError(f"{where}: field {role}: expected a model string or a mapping of LM settings")
    changes = {key: value for key, value in overrides.items() if value is not None}
    try:
        return LMConfig.model_validate({**spec, **changes})
    except ValidationError as exc:
        field, message = validation_problem(exc)
        raise ConfigError(f"{where}: field {role}.{field}: {message}") from None


PlanFileOption = Annotated[
    Path | None,
    typer.Option("--plan", help="YAML ablation plan (lm, variants, data, ...); flags override."),
]
BenchmarkOption = Annotated[
    str | None, typer.Option("--benchmark", help="safepyramid (default), pku-saferlhf or custom.")
]
ParserOption = Annotated[
    str | None, typer.Option("--parser", help="Official variants' parser: strict (default) or robust.")
]
AllowOverlapOption = Annotated[
    bool,
    typer.Option(
        "--allow-overlap", help="Run artifact variants on cases of their own train/dev split anyway."
    ),
]
ConcurrencyOption = Annotated[
    int | None, typer.Option("--concurrency", min=1, help="LM calls in flight (default 16).")
]
RunIdOption = Annotated[
    str | None, typer.Option("--run-id", help="Run id; variants run as <run-id>-<variant>.")
]
ResumeOption = Annotated[
    bool, typer.Option("--resume", help="Continue the ablation in --out; finished variants are skipped.")
]
RetryErrorsOption = Annotated[
    bool,
    typer.Option("--retry-errors", help="On --resume, re-send errored units (also of finished variants)."),
]
BatchOption = Annotated[
    bool,
    typer.Option(
        "--batch",
        help="Send every variant's requests through the provider's batch API (OpenAI, Anthropic): "
        "half price; --resume collects batches left running.",
    ),
]
BaselineOption = Annotated[
    str | None,
    typer.Option("--baseline", help="Variant to compare against (default official-per-policy)."),
]
NBootOption = Annotated[
    int | None,
    typer.Option("--n-boot", min=0, help="Bootstrap resamples for the 95% CIs (default 1000)."),
]


@opt.with_flag_groups
def ablate_command(
    out: Annotated[Path, typer.Option("--out", help="Output directory (plan, results, summary, report).")],
    lm: lmo.Lm = None,
    variants: Annotated[str | None, typer.Option("--variants", help=VARIANTS_HELP)] = None,
    plan_file: PlanFileOption = None,
    dataset: opt.Dataset = None,
    benchmark: BenchmarkOption = None,
    level: opt.Level = None,
    domain: opt.Domain = None,
    split: opt.Split = None,
    limit: opt.Limit = None,
    start_idx: Annotated[int | None, typer.Option("--start-idx", min=0, help="Skip this many cases.")] = None,
    lenient: opt.Lenient = False,
    with_evidence: opt.WithEvidence = False,
    parser: ParserOption = None,
    allow_overlap: AllowOverlapOption = False,
    concurrency: ConcurrencyOption = None,
    run_id: RunIdOption = None,
    resume: ResumeOption = False,
    retry_errors: RetryErrorsOption = False,
    log_requests: opt.LogRequests = False,
    batch: BatchOption = False,
    baseline: BaselineOption = None,
    n_boot: NBootOption = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Bootstrap seed (default 0).")] = None,
    config: lmo.ModelsConfig = None,
    lm_flags: lmo.LmFlags = lmo.LmFlags(),
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")] = False,
    mlflow: MlflowFlags = MlflowFlags(),
) -> None:
    """Run several guard variants on one LM and the same cases; write summary.json and report.html.

    Exit status: 0 every unit answered; 2 bad input, an error, or a variant stopped early
    on a failure retrying cannot fix; 3 some units ended in error; 130 Ctrl-C, 143 SIGTERM
    (finished units kept: --resume continues).
    """
    flags: dict[str, Any] = {
        "variants": variants, "parser": parser, "allow_overlap": allow_overlap or None,
        "concurrency": concurrency, "batch": batch or None,
        "run_id": run_id, "baseline": baseline, "n_boot": n_boot, "seed": seed,
        "data": {
            "dataset": dataset, "benchmark": benchmark, "level": level, "domain": domain, "split": split,
            "limit": limit, "start_idx": start_idx, "lenient": lenient or None,
            "with_evidence": with_evidence or None,
        },
    }  # fmt: skip
    plan = _plan(out, plan_file, flags, lm, config=config, lm_flags=lm_flags, resume=resume)
    _run(
        plan,
        out,
        resume=resume,
        retry_errors=retry_errors,
        log_requests=log_requests,
        quiet=quiet,
        mlflow=mlflow,
    )


def _plan(
    out: Path, plan_file: Path | None, flags: dict[str, Any], lm: str | None, *, config: Path | None,
    lm_flags: lmo.LmFlags, resume: bool,
) -> AblationPlan:  # fmt: skip
    """The ablation plan: the flags over the ``--plan`` file (on ``--resume``, the saved plan)."""
    from .._ablate import PLAN_FILE, build_plan, read_plan_file

    if plan_file is None and resume and (out / PLAN_FILE).exists():
        plan_file = out / PLAN_FILE
    where = "flags" if plan_file is None else str(plan_file)
    base: dict[str, Any] = {} if plan_file is None else read_plan_file(plan_file)
    lm_config = resolve_lm(lm or base.get("lm"), config, where, **lm_flags.overrides())
    settings = {**_overlay(base, flags), "lm": lm_config.model_dump()}
    data = settings.get("data") or {}
    if lmo.is_local(lm_config):
        if not any(data.get(key) is not None for key in ("dataset", "split", "limit")):
            settings["data"] = {**data, "limit": LOCAL_DEFAULT_LIMIT}
            err_console.print(
                f"[dim]Embedded model: the first {LOCAL_DEFAULT_LIMIT} cases of the bundled sample. "
                "Pass --limit 24 for the whole sample.[/dim]"
            )
        # One llama.cpp slot: more requests in flight only wait in its queue (and time out).
        settings["concurrency"] = min(settings.get("concurrency") or 16, lmo.LOCAL_CONCURRENCY)
    return build_plan(settings, where)


def _run(
    plan: AblationPlan, out: Path, *, resume: bool, retry_errors: bool, log_requests: bool, quiet: bool,
    mlflow: MlflowFlags,
) -> None:  # fmt: skip
    """Run the ablation and print its outcome; exit 3 when units ended in error."""
    from .._ablate import run_ablation

    configure_cache(enabled=plan.lm.cache, warn=warn)
    tracking = mlflow.tracking()
    outcome = run_ablation(
        plan,
        out,
        resume=resume,
        retry_errors=retry_errors,
        log_requests=log_requests,
        session=lmo.lm_session,
        console=err_console,
        show_progress=not quiet,
    )
    if outcome.interrupted:
        err_console.print(
            f"[yellow]interrupted[/yellow]: continue with sp-dspy ablate --out {out} --resume "
            "(finished variants are not run again)",
            highlight=False,
        )
        # SystemExit, not typer.Exit: ``main`` runs the app with standalone_mode=False.
        raise SystemExit(interrupted_exit_code())
    _print_outcome(outcome, small=lmo.is_local(plan.lm))
    if tracking is not None:
        mlflow_log_plan(tracking, outcome.out, experiment=mlflow.mlflow_experiment)
    if outcome.units_failed:
        raise SystemExit(EXIT_UNFINISHED)


def _print_outcome(outcome: AblationOutcome, *, small: bool) -> None:
    from .._ablate import RESULTS_DIR

    summary = outcome.summary
    assert summary is not None  # set unless interrupted
    console.print(render_terminal(summary))
    runs = FitTable(title="Runs", title_justify="left", box=box.SIMPLE_HEAD)
    for header in ("Variant", "This time", "Wall time", "LM calls / case", "Tokens / case"):
        runs.add_column(header, justify="left" if header in ("Variant", "This time") else "right")
    for run in outcome.runs:
        entry = summary.variant(run.variant.label)
        cell = entry.cells["ALL"]
        tokens = (cell.prompt_tokens_per_case or 0) + (cell.completion_tokens_per_case or 0)
        runs.add_row(
            entry.label,
            "finished earlier" if run.status == "skipped" else f"{run.units_run} unit(s) sent",
            DASH if entry.wall_s is None else f"{entry.wall_s:.1f} s",
            num(cell.lm_calls_per_case, 1),
            count(None if cell.prompt_tokens_per_case is None else tokens),
        )
    console.print(runs)
    for note in summary.notes:
        err_console.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
    retry = f"sp-dspy ablate --out {outcome.out} --resume --retry-errors"
    for run in outcome.runs:
        for number, line in enumerate(run.errors.lines(retry)):
            text = f"{run.variant.label}: {line}" if number == 0 else line
            err_console.print(visible(text), markup=False, highlight=False, soft_wrap=True)
    if small:
        console.print(f"[yellow]{SMALL_MODEL_NOTE}[/yellow]")
    console.print(
        f"Results in {outcome.out / RESULTS_DIR}\nSummary written to {outcome.summary_file}\n"
        f"Report written to {outcome.report_file}",
        markup=False,
        highlight=False,
    )
