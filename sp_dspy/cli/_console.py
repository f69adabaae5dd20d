"""The CLI's rich consoles: results on stdout, diagnostics and errors on stderr."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from .._errors import ConfigError

console = Console()
err_console = Console(stderr=True)


def warn(message: str, *, on: Console | None = None) -> None:
    """One plain line on stderr, or ``on`` a console of it (no rich markup: paths and ids may contain brackets)."""
    (on or err_console).print(f"warning: {message}", markup=False, highlight=False, soft_wrap=True)


def write_json_report(json_out: str, document: str) -> Path:
    """Write a ``--json`` document to its file (not ``-``); a failure is one ``ConfigError`` line."""
    target = Path(json_out)
    try:
        target.write_text(document + "\n", encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"--json {target}: cannot write: {exc.strerror or exc}") from None
    return target
