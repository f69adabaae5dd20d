"""mkdocs hook: the CLI reference page is generated from the typer app at build time.

A page holding the marker comment gets, in its place, every command and flag with its help
text as ``sp-dspy COMMAND --help`` prints it (``sp_dspy.cli._reference``), so the reference
is never written by hand and never falls behind a flag.
"""

from __future__ import annotations

from typing import Any

MARKER = "<!-- cli-reference -->"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Replace the marker with the generated reference (pages without it are left as they are)."""
    if MARKER not in markdown:
        return markdown
    from sp_dspy.cli._reference import cli_reference_markdown

    return markdown.replace(MARKER, cli_reference_markdown())
