"""``sp-dspy experiment``: the official baseline against compiled guards, several optimizer seeds each.

Flags override an optional YAML ``--plan`` file; on ``--resume`` the plan saved in OUTDIR
(``experiment.json``) is the base.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich import box

from sp_dspy.optimizers import parse_overrides

from .._data import parse_ratios
from .._errors import ConfigError
from .._export import mlflow_log_plan
from .._interrupt import interrupted_exit_code
from .._lm import configure_cache
from .._metrics import format_p
from .._table import FitTable
from . import _lm_options as lmo
from . import _options as opt
from ._ablate import _overlay, resolve_lm
from ._console import console, err_console, say_note
from ._eval import EXIT_UNFINISHED
from ._export import MlflowFlags, print_logged_plan

if TYPE_CHECKING:
    from .._ablate import ExperimentOutcome, ExperimentPlan, ExperimentPrice


def register(app: typer.Typer) -> None:
    app.command("experiment")(experiment_command)


def parse_settings(pairs: list[str]) -> dict[str, dict[str, Any]]:
    """``["mipro.num_trials=2"]`` -> ``{"mipro": {"num_trials": 2}}``."""
    settings: dict[str, dict[str, Any]] = {}
    for pair in pairs:
        name, dot, rest = pair.partition(".")
        if not dot or "=" in name or not name.strip():
            raise ConfigError(f"--set {pair!r}: expected OPTIMIZER.KEY=VALUE, e.g. --set mipro.num_trials=10")
        settings.setdefault(name.strip(), {}).update(parse_overrides([rest]))
    return settings


OutOption = Annotated[
    Path, typer.Option("--out", help="Output directory (split, artifacts, results, summary, report).")
]
PromptLmOption = Annotated[
    str | None, typer.Option("--prompt-lm", help="LM that proposes instructions (default: --lm).")
]
ReflectionLmOption = Annotated[
    str | None,
    typer.Option("--reflection-lm", help="GEPA's reflection LM (default: --prompt-lm, else --lm)."),
]
PlanFileOption = Annotated[
    Path | None,
    typer.Option("--plan", help="YAML experiment plan (lm, optimizers, seeds, ...); flags override."),
]
BenchmarkOption = Annotated[
    str | None, typer.Option("--benchmark", help="safepyramid (default), pku-saferlhf or custom.")
]
ProtocolOption = Annotated[str | None, typer.Option("--protocol", help="per-policy (default) or per-rule.")]
ProgramOption = Annotated[
    str | None, typer.Option("--program", help="DSPy program to compile: dspy (default) or dspy-cot.")
]
OptimizersOption = Annotated[
    str | None,
    typer.Option(
        "--optimizers", help="Comma-separated optimizers: mipro (default), gepa, bootstrap, simba, copro."
    ),
]
SeedsOption = Annotated[
    str | None, typer.Option("--seeds", help="Comma-separated optimizer seeds (default 0,1,2).")
]
SplitSeedOption = Annotated[
    int | None, typer.Option("--split-seed", help="Seed of the one train/dev/test split (default 0).")
]
SplitPerSeedOption = Annotated[
    bool,
    typer.Option(
        "--split-per-seed", help="A split of its own per seed; test on the cases every split tests on."
    ),
]
SeedLmOption = Annotated[
    bool,
    typer.Option("--seed-lm", help="Send each compile's seed to its LMs too (providers that take a seed)."),
]
RatiosOption = Annotated[
    str | None, typer.Option("--ratios", help="train,dev,test ratios of the split (default 0.1,0.1,0.8).")
]
SetOption = Annotated[
    list[str] | None,
    typer.Option("--set", help="Override an optimizer setting, OPTIMIZER.KEY=VALUE (repeatable)."),
]
OptimizerConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--optimizer-config", help="Optimizer YAML (default: the package's configs/optimizers.yaml)."
    ),
]
TopKOption = Annotated[
    int | None, typer.Option("--top-k", min=1, help="Optimizer candidates scored on dev at the end.")
]
BatchOption = Annotated[
    bool,
    typer.Option(
        "--batch",
        help="Send the test evaluations through the provider's batch API (OpenAI, Anthropic): half "
        "price; compiles still call one at a time (an optimizer's next call depends on earlier answers).",
    ),
]
ConcurrencyOption = Annotated[
    int | None, typer.Option("--concurrency", min=1, help="LM calls in flight (default 8).")
]
NBootOption = Annotated[
    int | None,
    typer.Option("--n-boot", min=0, help="Bootstrap resamples for the 95% CIs (default 1000)."),
]
ResumeOption = Annotated[
    bool,
    typer.Option(
        "--resume", help="Continue the experiment in --out; finished compiles and evaluations are kept."
    ),
]
RetryErrorsOption = Annotated[
    bool, typer.Option("--retry-errors", help="On --resume, re-send test units that ended in error.")
]

BaselineProgramOption = Annotated[
    str | None,
    typer.Option(
        "--baseline-program",
        help="Fixed-prompt program the artifacts are compared to: official (default) or a guard model's "
        "own format (llama-guard, granite-guardian, shieldgemma, dynaguard, gpt-oss-safeguard).",
    ),
]


@opt.with_flag_groups
def experiment_command(
    out: OutOption,
    lm: lmo.Lm = None,
    prompt_lm: PromptLmOption = None,
    reflection_lm: ReflectionLmOption = None,
    plan_file: PlanFileOption = None,
    dataset: opt.Dataset = None,
    benchmark: BenchmarkOption = None,
    lenient: opt.Lenient = False,
    protocol: ProtocolOption = None,
    program: ProgramOption = None,
    baseline_program: BaselineProgramOption = None,
    optimizers: OptimizersOption = None,
    seeds: SeedsOption = None,
    split_seed: SplitSeedOption = None,
    split_per_seed: SplitPerSeedOption = False,
    seed_lm: SeedLmOption = False,
    ratios: RatiosOption = None,
    set_: SetOption = None,
    optimizer_config: OptimizerConfigOption = None,
    top_k: TopKOption = None,
    caps: opt.CapFlags = opt.CapFlags(),
    dry_run: opt.DryRun = False,
    batch: BatchOption = False,
    concurrency: ConcurrencyOption = None,
    n_boot: NBootOption = None,
    resume: ResumeOption = False,
    retry_errors: RetryErrorsOption = False,
    config: lmo.ModelsConfig = None,
    lm_flags: lmo.LmFlags = lmo.LmFlags(),
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars.")] = False,
    mlflow: MlflowFlags = MlflowFlags(),
) -> None:
    """Compile guards with several optimizers and seeds and compare each to the official baseline on test.

    Exit status: 0 every step finished; 2 bad input or an error; 3 a cap stopped the experiment
    or some units ended in error; 130 Ctrl-C, 143 SIGTERM (finished steps kept: --resume continues).
    """
    from .._ablate import price_experiment

    flags: dict[str, Any] = {
        "data": {"dataset": dataset, "benchmark": benchmark, "lenient": lenient or None},
        "protocol": protocol, "program": program, "baseline_program": baseline_program,
        "optimizers": optimizers, "seeds": seeds,
        "split_seed": split_seed, "seed_lm": seed_lm or None, "split_per_seed": split_per_seed or None,
        "ratios": None if ratios is None else parse_ratios(ratios), "optimizer_config": optimizer_config,
        "top_k": top_k, "concurrency": concurrency, "n_boot": n_boot, "batch": batch or None,
        "settings": parse_settings(set_ or []) or None, "caps": caps.caps() if caps.given else None,
    }  # fmt: skip
    lms = {"lm": lm, "prompt_lm": prompt_lm, "reflection_lm": reflection_lm}
    plan = _plan(out, plan_file, flags, lms, config=config, lm_flags=lm_flags, resume=resume)
    if dry_run:
        _print_price(price_experiment(plan, out, window=lmo.context_window(plan.lm)), plan)
        return
    _run(plan, out, resume=resume, retry_errors=retry_errors, quiet=quiet, mlflow=mlflow)


def _plan(
    out: Path, plan_file: Path | None, flags: dict[str, Any], lm_specs: dict[str, str | None], *,
    config: Path | None, lm_flags: lmo.LmFlags, resume: bool,
) -> ExperimentPlan:  # fmt: skip
    """The experiment plan: the flags over the ``--plan`` file (on ``--resume``, the saved plan)."""
    from .._ablate import EXPERIMENT_FILE, build_experiment, read_experiment_file

    if plan_file is None and resume and (out / EXPERIMENT_FILE).exists():
        plan_file = out / EXPERIMENT_FILE
    where = "flags" if plan_file is None else str(plan_file)
    base: dict[str, Any] = {} if plan_file is None else read_experiment_file(plan_file)
    overrides = lm_flags.overrides()
    lms: dict[str, Any] = {
        "lm": resolve_lm(lm_specs["lm"] or base.get("lm"), config, where, command="experiment", **overrides)
    }
    helper = {key: overrides[key] for key in ("api_base", "api_key_env", "cache")}
    for role in ("prompt_lm", "reflection_lm"):
        spec = lm_specs[role] or base.get(role)
        lms[role] = None if spec is None else resolve_lm(spec, config, where, role=role, **helper)
    settings = {**_overlay(base, flags), **{role: c and c.model_dump() for role, c in lms.items()}}
    if lmo.is_local(lms["lm"]):  # one llama.cpp slot: more requests in flight only wait in its queue
        settings["concurrency"] = min(settings.get("concurrency") or 8, lmo.LOCAL_CONCURRENCY)
    return build_experiment(settings, where)


def _run(
    plan: ExperimentPlan, out: Path, *, resume: bool, retry_errors: bool, quiet: bool, mlflow: MlflowFlags
) -> None:
    """Run the experiment and print its outcome; exit 3 when a cap stopped it or units ended in error."""
    from .._ablate import run_experiment

    configure_cache(enabled=plan.lm.cache)
    tracking = mlflow.tracking()
    try:
        outcome = run_experiment(
            plan, out, resume=resume, retry_errors=retry_errors, session=lmo.lm_session, console=err_console,
            show_progress=not quiet, window=lmo.context_window(plan.lm),
        )  # fmt: skip
    except KeyboardInterrupt:
        _stopped(out, "interrupted")
        raise SystemExit(interrupted_exit_code()) from None
    if outcome.interrupted:
        _stopped(out, "interrupted")
        raise SystemExit(interrupted_exit_code())
    if outcome.capped_by is not None:
        flag = opt.CAP_FLAGS.get(outcome.capped_by, outcome.capped_by)
        cap = f"{flag} {getattr(plan.caps, outcome.capped_by)}"
        why = f"{cap} would be overrun: {outcome.cap_note}" if outcome.cap_note else f"{cap} was reached"
        _stopped(out, why, cap=True)
        raise SystemExit(EXIT_UNFINISHED)
    _print_outcome(outcome)
    if tracking is not None:
        print_logged_plan(mlflow_log_plan(tracking, out, notify=say_note))
    if outcome.ablation is not None and outcome.ablation.units_failed:
        raise SystemExit(EXIT_UNFINISHED)


def _stopped(out: Path, why: str, *, cap: bool = False) -> None:
    keep = "raise the cap and continue" if cap else "continue"
    err_console.print(
        f"[yellow]{why}[/yellow]: finished compiles and evaluations are kept; {keep} with "
        f"sp-dspy experiment --out {out} --resume",
        highlight=False,
        soft_wrap=True,
    )


def _print_price(price: ExperimentPrice, plan: ExperimentPlan) -> None:
    table = FitTable(title="Estimated experiment (dry run: nothing was sent)")
    batched = ("USD batched",) if plan.batch else ()
    columns = ("step", "variant", "calls", "prompt tokens", "completion tokens", "USD", *batched, "")
    for column in columns:
        table.add_column(column, justify="left" if column in ("step", "variant", "") else "right")

    def batch_cell(usd: float | None, step: str = "test") -> tuple[str, ...]:
        """The batched price: a test evaluation's own, a compile's is its one-at-a-time price."""
        return (opt.money(usd) if step == "test" else "(not batched)",) if plan.batch else ()

    for step in price.steps:
        cells = opt.estimate_cells(step.estimate) + batch_cell(step.batch_usd, step.step)
        table.add_row(step.step, step.name, *cells, "done" if step.done else "")
    table.add_row(
        "total", "", *opt.estimate_cells(price.total), *batch_cell(price.total_batch_usd), "", style="bold"
    )
    if price.left != price.total:
        cells = opt.estimate_cells(price.left) + batch_cell(price.left_batch_usd)
        table.add_row("left to run", "", *cells, "", style="bold")
    console.print(table)
    left = price.left
    if plan.batch:  # the cap counts batched evaluations at the batch rate
        left = left.model_copy(update={"usage": left.usage.model_copy(update={"cost": price.left_batch_usd})})
    for flag, cap in opt.caps_below(plan.caps, left):
        console.print(
            f"[yellow]{flag} {cap:g} is below the estimate: the experiment would stop at the cap "
            "(raise it and --resume to continue)[/yellow]"
        )
    console.print(
        "[dim]Estimates, not limits; --max-calls, --max-total-tokens and --max-usd bound the whole "
        "experiment (every compile and every evaluation together).[/dim]"
    )
    if plan.batch:
        console.print(
            "[dim]With --batch the caps count the test evaluations at the batch rate; a batch is paid as a "
            "whole, so each is checked against what is left of the caps before it is submitted.[/dim]"
        )
    for line in price.assumptions:
        console.print(f"[dim]assumes: {line}[/dim]")


def _signed(value: float | None, interval: list[float] | None = None) -> str:
    text = "–" if value is None else f"{value:+.2f}"
    return text + ("" if not interval else f" [{interval[0]:+.1f}, {interval[1]:+.1f}]")


def _print_outcome(outcome: ExperimentOutcome) -> None:
    summary = outcome.summary
    assert summary is not None  # set when every step finished
    base = summary.baseline_test
    console.print(
        f"baseline {summary.baseline} on {summary.comparison.n_cases} test cases: RMR {base['rmr_avg']}, "
        f"RMR@1.0 {base['rmr_exact']}, RDR {base['rdr']}",
        highlight=False,
    )
    for result in summary.optimizers:
        table = FitTable(title=result.optimizer, title_justify="left", box=box.SIMPLE_HEAD)
        for header in (
            "Seed",
            "RMR",
            "Δ RMR [95% CI]",
            "Δ RMR@1.0",
            "Δ RDR",
            "Paired test p",
            "Compile calls",
            "Test calls",
        ):
            table.add_column(header, justify="left" if header == "Seed" else "right")
        for seed in result.seeds:
            table.add_row(
                seed.label + (" (budget-limited)" if seed.budget_limited else ""),
                "–" if seed.test.get("rmr_avg") is None else f"{seed.test['rmr_avg']:.2f}",
                _signed(seed.diff.get("rmr_avg"), seed.ci.get("rmr_avg")),
                _signed(seed.diff.get("rmr_exact")),
                _signed(seed.diff.get("rdr")),
                format_p(seed.test_p),
                f"{seed.compile.get('calls', 0):,}",
                f"{seed.evaluation.get('calls', 0):,}",
            )
        console.print(table)
        console.print(result.verdict, highlight=False, soft_wrap=True)
    for note in summary.comparison.notes:
        err_console.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
    if outcome.ablation is not None:
        retry = f"sp-dspy experiment --out {outcome.out} --resume --retry-errors"
        for run in outcome.ablation.runs:
            for number, line in enumerate(run.errors.lines(retry)):
                text = f"{run.variant.label}: {line}" if number == 0 else line
                err_console.print(text, markup=False, highlight=False, soft_wrap=True)
    console.print(
        f"Summary written to {outcome.summary_file}\nReport written to {outcome.report_file}",
        markup=False,
        highlight=False,
    )
