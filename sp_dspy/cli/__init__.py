"""The ``sp-dspy`` command line: one module per command, registered on one typer app.

Start-up stays fast: command modules import dspy/litellm only inside the command
function, so ``sp-dspy --help`` and ``sp-dspy score`` never load them.
"""

from __future__ import annotations

import importlib
import os
import sys

import typer

from .._errors import SpDspyError
from ._console import err_console

COMMAND_MODULES = ("_eval", "_score", "_split", "_compile", "_compare", "_check", "_ablate", "_report", "_serve")

app = typer.Typer(
    name="sp-dspy",
    help="In-context policy guardrailing with DSPy: evaluate, compile and compare guard models.",
    no_args_is_help=False,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _register_commands() -> None:
    for name in COMMAND_MODULES:
        module = importlib.import_module(f"{__name__}.{name}")
        module.register(app)


_register_commands()


def main() -> None:
    """Console-script entry point: every ``SpDspyError`` becomes one line and exit 2."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        code = app(standalone_mode=False)
    except SpDspyError as error:
        err_console.print(f"[bold red]error:[/bold red] {error}", highlight=False, soft_wrap=True)
        sys.exit(error.exit_code)
    except KeyboardInterrupt:
        err_console.print("interrupted")
        sys.exit(130)
    except typer.Exit as exit_:
        sys.exit(exit_.exit_code)
    except typer.Abort:
        sys.exit(1)
    except Exception as error:  # click usage errors
        import click

        if isinstance(error, click.exceptions.ClickException):
            error.show()
            sys.exit(error.exit_code)
        raise
    sys.exit(code if isinstance(code, int) else 0)
