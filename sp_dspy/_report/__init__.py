"""Comparison reports: several result sets scored on the same cases, with cost, paired
differences to a baseline and caveats, as one self-contained HTML page or a terminal table.
"""

from ._html import write_html
from ._labels import OFFICIAL_PER_POLICY
from ._model import ComparisonSummary
from ._summary import build_summary
from ._terminal import render_terminal

__all__ = ["OFFICIAL_PER_POLICY", "ComparisonSummary", "build_summary", "render_terminal", "write_html"]
