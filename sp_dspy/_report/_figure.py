"""Rendering plumbing for the report's plots: Agg canvas, PNG bytes, ``data:`` URIs.

Figures are drawn on an explicit Agg canvas (never pyplot), so rendering neither
needs a display nor changes the backend of a notebook the caller may be in. Fixed
size, dpi, font and an empty PNG metadata block make the bytes depend only on the
numbers, which keeps report tests stable.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure

DPI = 100
LEGEND_COLUMNS = 3
#: rcParams that make output reproducible (``svg.hashsalt`` matters if a caller saves SVG).
STABLE_RC: Any = {
    "svg.hashsalt": "sp-dspy-report",
    "font.family": "DejaVu Sans",
    "font.size": 9,
    "axes.titlesize": 10,
    "legend.fontsize": 8,
    "figure.dpi": DPI,
    "savefig.dpi": DPI,
}


@dataclass(frozen=True, slots=True)
class Plot:
    """One rendered figure with the caption that explains what it measures."""

    key: str
    title: str
    caption: str
    png: bytes

    @property
    def data_uri(self) -> str:
        return "data:image/png;base64," + base64.b64encode(self.png).decode("ascii")


@contextmanager
def new_figure(
    width: float, height: float, ncols: int = 1, legend_entries: int = 0
) -> Iterator[tuple[Figure, list[Any]]]:
    """A figure on an Agg canvas with ``ncols`` axes, inside the stable rc context.

    ``legend_entries`` adds room for a ``legend_below`` of that many entries.
    """
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    with matplotlib.rc_context(STABLE_RC):
        height += 0.22 * math.ceil(legend_entries / LEGEND_COLUMNS)
        figure = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
        FigureCanvasAgg(figure)
        axes = figure.subplots(1, ncols, squeeze=False)[0].tolist()
        yield figure, axes


def to_png(figure: Figure) -> bytes:
    """PNG bytes with no metadata (no matplotlib version, no timestamp)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    return buffer.getvalue()


def colors(n: int) -> list[Any]:
    """One stable colour per variant (tab10, cycling), the same in every plot."""
    import matplotlib

    palette = matplotlib.colormaps["tab10"]
    return [palette(i % 10) for i in range(n)]


def short(label: str, width: int = 34) -> str:
    """Plot legends truncate long labels; tables keep them whole."""
    return label if len(label) <= width else label[: width - 1] + "…"


def value(number: float | None) -> float:
    """``None`` (an empty cell) becomes NaN, which matplotlib leaves undrawn."""
    return math.nan if number is None else float(number)


def bar_offsets(n: int, group_width: float = 0.8) -> tuple[list[float], float]:
    """x offsets of ``n`` bars centred on a group, and each bar's width."""
    width = group_width / max(n, 1)
    return [(i - (n - 1) / 2) * width for i in range(n)], width


def legend_below(figure: Figure, ax: Any) -> None:
    """One legend for the whole figure, under the axes, so it never hides data."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        figure.legend(
            handles, labels, loc="outside lower center", ncols=min(len(labels), LEGEND_COLUMNS), frameon=False
        )
