"""The ``sp-dspy`` command line: one module per command, loaded only when it runs.

Start-up stays fast: command modules import dspy/litellm only inside the command
function, and this package imports a command's module (and builds its click command
from the signature) only when that command is invoked. ``sp-dspy score`` thus never
imports the eval, compile or serve modules, and ``sp-dspy --help`` lists every
command from the static table below without importing any of them.
"""

from __future__ import annotations

import importlib
import io
import os
import sys
from collections.abc import Iterator, MutableMapping
from typing import Annotated, Any

import typer
from typer.core import TyperCommand, TyperGroup

from .._errors import SpDspyError
from .._redact import install_log_redaction, redact
from ._console import err_console
from ._panels import assign_panels

#: Command name -> (module under ``sp_dspy.cli``, one-line help shown by ``--help``).
#: The help must be the first paragraph of the command's own help;
#: ``tests/test_cli_lazy.py`` checks the listing against the eagerly built app.
COMMANDS: dict[str, tuple[str, str]] = {
    "eval": (
        "_eval",
        "Evaluate a guard (official baseline, DSPy program or compiled artifact) and score it.",
    ),
    "score": ("_score", "Score result JSONL files (per-policy records or per-rule judgments)."),
    "show": (
        "_show",
        "Show a run case by case: gold and predicted rules with their texts, FP/FN, status and the answer.",
    ),
    "split": ("_split", "Split a dataset into train/dev/test by conversation (all levels on one side)."),
    "compile": (
        "_compile",
        "Compile a better guard: optimize a DSPy program on train, select on dev, save the artifact.",
    ),
    "compare": (
        "_compare",
        "Compare two result sets on the same cases: paired differences with CIs and McNemar's test.",
    ),
    "check": ("_check", "Check one conversation against a policy with a guard and print the violated rules."),
    "ablate": (
        "_ablate",
        "Run several guard variants on one LM and the same cases; write summary.json and report.html.",
    ),
    "report": (
        "_report",
        "Compare result sets (protocols, programs, models) in one self-contained HTML report.",
    ),
    "list-models": (
        "_list_models",
        "List configured models (configs/models.yaml, ~/.config/sp-dspy, --config) and the built-in ones.",
    ),
    "serve": ("_serve", "Serve a model on 127.0.0.1 until Ctrl-C; other commands can use it meanwhile."),
}
COMMAND_MODULES = tuple(module for module, _ in COMMANDS.values())


def load_command(name: str) -> typer.models.CommandInfo:
    """Import the module of command ``name`` and return what its ``register`` adds."""
    module = importlib.import_module(f"{__name__}.{COMMANDS[name][0]}")
    holder = typer.Typer()
    module.register(holder)
    (info,) = holder.registered_commands
    return info


class _LazyCommands(MutableMapping[str, Any]):
    """The group's command table: every name is listed, each is built on first lookup.

    Typer hands a group its commands as a dict and consults its keys for "did you
    mean" suggestions; this mapping keeps those working while deferring the import.
    """

    def __init__(self, loaded: MutableMapping[str, Any], build: Any) -> None:
        self._loaded = dict(loaded)
        self._build = build

    def __getitem__(self, name: str) -> Any:
        if name not in self._loaded:
            if name not in COMMANDS:
                raise KeyError(name)
            self._loaded[name] = self._build(name)
        return self._loaded[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        del self._loaded[name]

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys([*COMMANDS, *self._loaded]))

    def __len__(self) -> int:
        return len(set(COMMANDS) | set(self._loaded))

    def is_loaded(self, name: str) -> bool:
        return name in self._loaded


class LazyGroup(TyperGroup):
    """A typer group that imports and builds a command only when it is looked up.

    While the group's own help is being formatted, an unloaded command is stood in
    for by a parameterless command carrying its name and one-line help, so the
    listing costs no imports.
    """

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = _LazyCommands(self.commands, self._build)
        self._listing = False

    def _build(self, name: str) -> Any:
        command = typer.main.get_command_from_info(
            load_command(name),
            pretty_exceptions_short=app.pretty_exceptions_short,
            rich_markup_mode=self.rich_markup_mode,
        )
        assign_panels(name, command)
        return command

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        commands = self.commands
        listing = self._listing and cmd_name in COMMANDS
        if listing and isinstance(commands, _LazyCommands) and not commands.is_loaded(cmd_name):
            return TyperCommand(name=cmd_name, help=COMMANDS[cmd_name][1])
        return commands.get(cmd_name)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


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
        from .. import __version__

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


def main() -> None:
    """Console-script entry point: every ``SpDspyError`` becomes one line and exit 2."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    install_log_redaction()  # no library log line (DSPy's, LiteLLM's) may print a key
    try:
        code = app(standalone_mode=False)
    except SpDspyError as error:
        from rich.markup import escape  # an error may quote "[model]" or "[1, 2]": not markup

        err_console.print(
            f"[bold red]error:[/bold red] {escape(redact(str(error)))}", highlight=False, soft_wrap=True
        )
        sys.exit(error.exit_code)
    except KeyboardInterrupt:
        err_console.print("interrupted")
        sys.exit(130)
    except typer.Exit as exit_:
        sys.exit(exit_.exit_code)
    except typer.Abort:
        sys.exit(1)
    except typer.TyperException as error:  # usage errors (typer's bundled click)
        show = getattr(error, "show", None)
        if show is None:
            raise
        shown = io.StringIO()  # the usage error may echo a stray argument: a key pasted by mistake
        show(file=shown)
        sys.stderr.write(redact(shown.getvalue()))
        sys.exit(getattr(error, "exit_code", 2))
    sys.exit(code if isinstance(code, int) else 0)
