"""The CLI's rich consoles: results on stdout, diagnostics and errors on stderr."""

from __future__ import annotations

from rich.console import Console

console = Console()
err_console = Console(stderr=True)
