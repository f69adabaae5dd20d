"""The ``sp-dspy`` command line: one module per command, loaded only when it runs.

A command's module is imported only when that command is invoked (``--help`` lists the
static table below), so it imports its layers at module level; only what pulls in numpy
(the runner, compile, ablations, the report's assembly) waits inside the command.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Annotated, Any

import typer
from rich.markup import escape
from typer.core import TyperCommand, TyperGroup

from .._errors import ConfigError, SpDspyError
from .._interrupt import interrupted_exit_code, sigterm_interrupts
from .._redact import install_log_redaction, redact
from .._version import __version__
from ._console import err_console

#: Command name -> one-line help shown by ``--help``; the command lives in module ``_<name>``.
#: The help must be the first paragraph of the command's own help;
#: ``tests/test_cli_lazy.py`` checks the listing against the eagerly built app.
COMMANDS: dict[str, str] = {
    "eval": "Evaluate a guard (official baseline, DSPy program or compiled artifact) and score it.",
    "score": "Score result JSONL files (per-policy records or per-rule judgments).",
    "show": "Show a run case by case: gold and predicted rules with their texts, FP/FN, status and the answer.",
    "split": "Split a dataset into train/dev/test by conversation (all levels on one side).",
    "compile": "Compile a better guard: optimize a DSPy program on train, select on dev, save the artifact.",
    "compare": "Compare two result sets on the same cases: paired differences with CIs and a paired randomization test.",
    "check": "Check one conversation against a policy with a guard and print the violated rules.",
    "ablate": "Run several guard variants on one LM and the same cases; write summary.json and report.html.",
    "experiment": "Compile guards with several optimizers and seeds and compare each to the official baseline on test.",
    "report": "Compare result sets (protocols, programs, models) in one self-contained HTML report.",
    "view": "See a run's cases, or several runs' side by side: outcomes, rules, answers, won and lost cases.",
    "export": "Export results as inspect_ai logs (one per variant) or MLflow runs, scored as `score` scores them.",
    "list-models": "List configured models (configs/models.yaml, ~/.config/sp-dspy, --config) and the built-in ones.",
    "list-programs": "List the guard programs --program can name, the protocols each runs, and what each is.",
    "list-benchmarks": "List the benchmarks --benchmark can name: their task, cells and the unit intervals resample.",
    "runs": "List the runs in an output directory: id, benchmark, protocol, program, model, status, scores, cost, date.",
    "serve": "Serve a model (llama.cpp, vLLM) or, with --guard, a guard over HTTP until Ctrl-C.",
}


#: The ``--help`` panel of every flag, panels in the order they are shown: a flag means the
#: same on every command, so it sits in the same panel everywhere.
PANELS: dict[str, tuple[str, ...]] = {
    "Data": (
        "--dataset", "--benchmark", "--level", "--domain", "--split", "--splits", "--ratios", "--limit",
        "--start-idx", "--split-seed", "--split-per-seed", "--shard", "--lenient", "--with-evidence", "--allow-overlap", "--policy", "--conversation", "--batch",
        "--framework", "--id", "--failed",
    ),
    "Guard": (
        "--program", "--guard", "--protocol", "--parser", "--per-rule-layout", "--variants", "--baseline-program",
        "--scope", "--on-error",
    ),
    "Model": (
        "--lm", "--models", "--config", "--api-base", "--api-key-env", "--temperature", "--max-tokens",
        "--reasoning-effort", "--timeout", "--num-retries", "--no-cache", "--json-schema", "--transport",
        "--show-request",
    ),
    "Rate limits": ("--rate-limit-timeout", "--no-adaptive", "--rpm", "--tpm"),
    "Optimizer": (
        "--optimizer", "--optimizers", "--seeds", "--seed-lm", "--optimizer-config", "--set", "--top-k", "--prompt-lm", "--prompt-api-base",
        "--prompt-api-key-env", "--reflection-lm", "--reflection-api-base", "--reflection-api-key-env",
    ),
    "Budget": ("--max-calls", "--max-total-tokens", "--max-usd", "--dry-run"),
    "Scoring": (
        "--cap-aware", "--per-rule", "--skip-bad-lines", "--no-data-cache", "--n-boot", "--seed", "--baseline",
        "--label", "--fail-under",
    ),
    "Run and output": (
        "--out", "--to", "--mlflow-uri", "--mlflow-experiment", "--force", "--output-dir", "--json", "--run-id",
        "--resume", "--retry-errors", "--resubmit", "--run-config", "--plan",
        "--concurrency", "--quiet", "--verbose", "--log-requests", "--open",
    ),
    "Server": (
        "--backend", "--model", "--port", "--n-ctx", "--n-parallel", "--threads", "--max-model-len",
        "--gpu-memory-utilization", "--tensor-parallel-size", "--chat-template", "--reasoning-parser", "--host", "--auth-token-env", "--request-timeout",
        "--max-in-flight", "--max-body-kb", "--max-messages", "--max-rules", "--max-batch",
    ),
}  # fmt: skip
PANEL_ORDER = tuple(PANELS)
PANEL_OF = {flag: panel for panel, flags in PANELS.items() for flag in flags}
#: Where a flag's panel depends on the command: ``compile --seed`` seeds the split and the optimizer.
COMMAND_PANELS: dict[tuple[str, str], str] = {("compile", "--seed"): "Optimizer"}


def assign_panels(command_name: str, command: Any) -> None:
    """Put each option of a built click ``command`` in its panel (one it declares wins), panel by panel."""
    for param in command.params:
        long_flags = [opt for opt in param.opts if opt.startswith("--")]
        if long_flags and not param.rich_help_panel:
            flag = long_flags[0]
            param.rich_help_panel = COMMAND_PANELS.get((command_name, flag)) or PANEL_OF.get(flag)

    def rank(param: Any) -> int:
        panel = param.rich_help_panel
        return PANEL_ORDER.index(panel) if panel in PANEL_ORDER else len(PANEL_ORDER)

    command.params.sort(key=rank)  # stable: a panel keeps the command's own order


def load_command(name: str) -> typer.models.CommandInfo:
    """Import the module of command ``name`` and return what its ``register`` adds."""
    module = importlib.import_module(f"{__name__}._{name.replace('-', '_')}")
    holder = typer.Typer()
    module.register(holder)
    (info,) = holder.registered_commands
    return info


class LazyGroup(TyperGroup):
    """A typer group that imports and builds a command only when it is invoked.

    Until then each command is a parameterless stand-in carrying its name and one-line
    help, so the listing of ``--help`` and "did you mean" suggestions cost no imports.
    """

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        for name, short_help in COMMANDS.items():
            self.commands[name] = TyperCommand(name=name, help=short_help)

    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[str | None, Any, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        if name is not None and command is not None and command.callback is None:
            command = typer.main.get_command_from_info(
                load_command(name),
                pretty_exceptions_short=app.pretty_exceptions_short,
                rich_markup_mode=self.rich_markup_mode,
            )
            assign_panels(name, command)
            self.commands[name] = command
        return name, command, rest

    def invoke(self, ctx: Any) -> Any:
        """Run the command; a value the flag's own type refuses (``--concurrency 0``) is a
        ``ConfigError``, so it prints as every other bad input does: one ``error:`` line, exit 2."""
        try:
            return super().invoke(ctx)
        except typer.BadParameter as error:
            raise ConfigError(bad_parameter_line(error)) from None


def bad_parameter_line(error: typer.BadParameter) -> str:
    """click's ``Invalid value for '--limit': why`` as ``--limit: why``, on one line."""
    param = error.param
    if type(error) is not typer.BadParameter or param is None:  # a missing value, or no flag to name
        return " ".join(error.format_message().split())
    name = next((opt for opt in param.opts if opt.startswith("--")), None)
    return f"{name or param.get_error_hint()}: {' '.join(error.message.split())}"


app = typer.Typer(
    name="sp-dspy",
    cls=LazyGroup,
    help="In-context policy guardrailing with DSPy: evaluate, compile and compare guard models.",
    no_args_is_help=False,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"sp-dspy {__version__}")
        raise typer.Exit()


@app.callback()
def _group(
    version: Annotated[
        bool,
        typer.Option(
            "--version", is_eager=True, callback=_print_version, help="Print the version of sp-dspy and exit."
        ),
    ] = False,
) -> None:
    # Makes ``app`` a group although no command is registered on it up front.
    pass


def usage_line(error: Exception) -> str | None:
    """A usage error (mistyped flag, missing argument) as one line naming the command, its
    message (with click's suggestion: ``Possible options: --dataset``) and where help is; None
    for an exception that is not click's."""
    format_message = getattr(error, "format_message", None)
    if format_message is None:
        return None
    message = str(format_message()).replace("\n", " ").strip()
    ctx = getattr(error, "ctx", None)
    command = "sp-dspy" if ctx is None or ctx.parent is None else f"sp-dspy {ctx.info_name}"
    return f"{command}: {message[:1].lower()}{message[1:]} (see {command} --help)"


def main() -> None:
    """Console-script entry point: every ``SpDspyError`` becomes one line and exit 2; SIGTERM
    stops a command as Ctrl-C does (records kept, manifest ``interrupted``), exit 143 vs 130."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    install_log_redaction()  # no library log line (DSPy's, LiteLLM's) may print a key
    try:
        with sigterm_interrupts():
            code = app(standalone_mode=False)
    except SpDspyError as error:
        err_console.print(  # escaped: an error may quote "[model]" or "[1, 2]", which is not markup
            f"[bold red]error:[/bold red] {escape(redact(str(error)))}", highlight=False, soft_wrap=True
        )
        sys.exit(error.exit_code)
    except KeyboardInterrupt:
        err_console.print("interrupted")
        sys.exit(interrupted_exit_code())
    except typer.Exit as exit_:
        sys.exit(exit_.exit_code)
    except typer.Abort:
        sys.exit(1)
    except typer.TyperException as error:  # usage errors (typer's bundled click)
        line = usage_line(error)
        if line is None:
            raise
        # One line, like every other refusal; the message may echo a stray argument: a key pasted by mistake.
        err_console.print(
            f"[bold red]error:[/bold red] {escape(redact(line))}", highlight=False, soft_wrap=True
        )
        sys.exit(getattr(error, "exit_code", 2))
    sys.exit(code if isinstance(code, int) else 0)
