"""Comparison reports: several result sets on the same cases, one page to decide by.

``build_summary`` scores each variant as ``sp-dspy score`` does and adds cost, paired
differences to a baseline and caveats; ``render_html`` writes one self-contained page,
``render_terminal`` the short version. matplotlib loads only when plotting.
"""

from ._html import render_html, write_html
from ._labels import OFFICIAL_PER_POLICY, Provenance, auto_label, describe
from ._leaderboard import Leaderboard, PublishedRow, load_leaderboard
from ._model import CellStats, ComparisonSummary, DiffRow, RuleTypeStats, VariantResult
from ._pku import pku_html_section, pku_terminal_table
from ._plots import Plot, render_plots
from ._summary import VariantSpec, build_summary
from ._terminal import render_terminal

__all__ = [
    "OFFICIAL_PER_POLICY",
    "CellStats",
    "ComparisonSummary",
    "DiffRow",
    "Leaderboard",
    "Plot",
    "Provenance",
    "PublishedRow",
    "RuleTypeStats",
    "VariantResult",
    "VariantSpec",
    "auto_label",
    "build_summary",
    "describe",
    "load_leaderboard",
    "pku_html_section",
    "pku_terminal_table",
    "render_html",
    "render_plots",
    "render_terminal",
    "write_html",
]
