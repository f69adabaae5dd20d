"""mkdocs hook: the CLI reference page is generated from the typer app at build time.

A page holding the marker comment gets, in its place, every command and flag with its help
text as ``sp-dspy COMMAND --help`` prints it (``sp_dspy.cli._reference``), so the reference
is never written by hand and never falls behind a flag.

The package's docstrings cross-reference in Sphinx's way (``:meth:`load```), which the API
reference would show as written; the role is dropped and the name kept as code.
"""

from __future__ import annotations

import re
from typing import Any

MARKER = "<!-- cli-reference -->"
_SPHINX_ROLE = re.compile(r":(?:meth|func|class|attr|mod|data|exc|obj|const):(?=<code>)")


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Replace the marker with the generated reference (pages without it are left as they are)."""
    if MARKER not in markdown:
        return markdown
    from sp_dspy.cli._reference import cli_reference_markdown

    return markdown.replace(MARKER, cli_reference_markdown())


def on_page_content(html: str, page: Any, config: Any, files: Any) -> str:
    """Drop the Sphinx role before a docstring's cross-reference (``:meth:<code>load</code>``)."""
    return _SPHINX_ROLE.sub("", html)
