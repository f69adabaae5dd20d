"""Comparison reports: several result sets scored on the same cases, with cost, paired
differences to a baseline and caveats, as one self-contained HTML page or a terminal table.

Names are imported from their modules on first use, so a benchmark kind built on the
report's model and tables (``_model``, ``_html_tables``, ``_pku``) does not import the
report's assembly (``_summary``, ``_html``), which asks the kinds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_getattr

_MODULES: dict[str, tuple[str, ...]] = {
    "._html": ("write_html",),
    "._labels": ("OFFICIAL_PER_POLICY",),
    "._model": ("ComparisonSummary",),
    "._summary": ("build_summary",),
    "._terminal": ("render_terminal",),
}
_EXPORTS = {name: module for module, names in _MODULES.items() for name in names}

if TYPE_CHECKING:  # the names as type checkers see them ("as" re-exports them)
    from ._html import write_html as write_html
    from ._labels import OFFICIAL_PER_POLICY as OFFICIAL_PER_POLICY
    from ._model import ComparisonSummary as ComparisonSummary
    from ._summary import build_summary as build_summary
    from ._terminal import render_terminal as render_terminal

__all__ = sorted(_EXPORTS)
__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())
