"""Comparison reports: several result sets scored on the same cases, with cost, paired
differences to a baseline and caveats, as one self-contained HTML page or a terminal table.
"""

from ._html import render_html, write_html
from ._labels import OFFICIAL_PER_POLICY
from ._leaderboard import load_leaderboard
from ._model import ComparisonSummary
from ._plots import Plot, render_plots
from ._summary import build_summary
from ._terminal import render_terminal

__all__ = [
    "OFFICIAL_PER_POLICY",
    "ComparisonSummary",
    "Plot",
    "build_summary",
    "load_leaderboard",
    "render_html",
    "render_plots",
    "render_terminal",
    "write_html",
]
