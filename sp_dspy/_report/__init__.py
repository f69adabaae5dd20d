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
    "._compare": (
        "NOTE_PAIRED",
        "NOTE_TEST",
        "CompareConfig",
        "ComparedResults",
        "Comparison",
        "build_compare_config",
        "compare_results",
    ),
    "._html": ("write_html",),
    "._job": ("ReportConfig", "SummarisedResults", "build_report_config", "summarise_results"),
    "._labels": ("OFFICIAL_PER_POLICY",),
    "._model": ("ComparisonSummary",),
    "._summary": ("build_summary",),
    "._terminal": ("render_terminal",),
}
_EXPORTS = {name: module for module, names in _MODULES.items() for name in names}

if TYPE_CHECKING:  # the names as type checkers see them ("as" re-exports them)
    from ._compare import NOTE_PAIRED as NOTE_PAIRED
    from ._compare import NOTE_TEST as NOTE_TEST
    from ._compare import CompareConfig as CompareConfig
    from ._compare import ComparedResults as ComparedResults
    from ._compare import Comparison as Comparison
    from ._compare import build_compare_config as build_compare_config
    from ._compare import compare_results as compare_results
    from ._html import write_html as write_html
    from ._job import ReportConfig as ReportConfig
    from ._job import SummarisedResults as SummarisedResults
    from ._job import build_report_config as build_report_config
    from ._job import summarise_results as summarise_results
    from ._labels import OFFICIAL_PER_POLICY as OFFICIAL_PER_POLICY
    from ._model import ComparisonSummary as ComparisonSummary
    from ._summary import build_summary as build_summary
    from ._terminal import render_terminal as render_terminal

__all__ = sorted(_EXPORTS)
__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())
