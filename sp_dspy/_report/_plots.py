"""The report's six plots, each a function of ``ComparisonSummary`` alone.

Drawn on an explicit Agg canvas (never pyplot, no display needed); fixed size, dpi, font
and no PNG metadata make the bytes depend only on the numbers. matplotlib loads lazily.
"""

from __future__ import annotations

import base64
import io
import math
import textwrap
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._benchmarks import benchmark_kind
from .._metrics import TARGET_TYPES
from ._model import FAILURE_MODES, TAU_KEYS, ComparisonSummary, VariantResult

if TYPE_CHECKING:
    from matplotlib.figure import Figure

DPI = 100
#: The RMR bar plot's title by what the cells besides ALL are (``BenchmarkKind.breakdown``).
_RMR_TITLE = {"level": "RMR by level", "tag": "RMR by tag", "none": "RMR"}
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
def _figure(
    width: float, height: float, ncols: int = 1, legend_entries: int = 0
) -> Iterator[tuple[Figure, list[Any]]]:
    """A figure with ``ncols`` axes and room for a legend of ``legend_entries`` below."""
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    with matplotlib.rc_context(STABLE_RC):
        height += 0.22 * math.ceil(legend_entries / LEGEND_COLUMNS)
        figure = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
        FigureCanvasAgg(figure)
        yield figure, figure.subplots(1, ncols, squeeze=False)[0].tolist()


def _png(figure: Figure, ax: Any = None) -> bytes:
    """PNG bytes without metadata; with ``ax``, first one legend for the figure under the axes."""
    if ax is not None:
        handles, labels = ax.get_legend_handles_labels()
        if handles:
            ncols = min(len(labels), LEGEND_COLUMNS)
            figure.legend(handles, labels, loc="outside lower center", ncols=ncols, frameon=False)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    return buffer.getvalue()


def _colors(n: int) -> list[Any]:
    """One stable colour per variant (tab10, cycling), the same in every plot."""
    import matplotlib

    palette = matplotlib.colormaps["tab10"]
    return [palette(i % 10) for i in range(n)]


def _short(label: str, width: int = 34) -> str:
    """Plot legends truncate long labels; tables keep them whole."""
    return label if len(label) <= width else label[: width - 1] + "…"


def _value(number: float | None) -> float:
    """``None`` (an empty cell) becomes NaN, which matplotlib leaves undrawn."""
    return math.nan if number is None else float(number)


def _grouped_bars(
    ax: Any,
    groups: Sequence[str],
    series: Sequence[tuple[str, list[float], Any]],
    ylabel: str,
    errors: Sequence[list[list[float]]] | None = None,
) -> None:
    """One bar per series in each group, centred on the group; ``errors``: per series, its yerr."""
    width = 0.8 / max(len(series), 1)
    for i, (label, heights, color) in enumerate(series):
        offset = (i - (len(series) - 1) / 2) * width
        extra = {} if errors is None else {"yerr": errors[i], "capsize": 3, "ecolor": "#333333"}
        xs = [j + offset for j in range(len(groups))]
        ax.bar(xs, heights, width, label=_short(label), color=color, **extra)
    ax.set_xticks(range(len(groups)), list(groups))
    ax.set_ylabel(ylabel)
    ax.grid(axis="y", alpha=0.3)


def rmr_by_level(summary: ComparisonSummary) -> Plot:
    """RMR per cell of the breakdown (levels, or a custom benchmark's tags) and ALL."""
    variants, cells = summary.variants, summary.cells
    series, errors = [], []
    for entry, color in zip(variants, _colors(len(variants)), strict=True):
        stats = [entry.cells[c] for c in cells]
        series.append((entry.label, [_value(s.rmr) for s in stats], color))
        bounds = [
            (s.rmr - s.rmr_ci[0], s.rmr_ci[1] - s.rmr) if s.rmr is not None and s.rmr_ci else (0.0, 0.0)
            for s in stats
        ]
        errors.append([[max(low, 0.0) for low, _ in bounds], [max(high, 0.0) for _, high in bounds]])
    with _figure(8, 4, legend_entries=len(variants)) as (figure, (ax,)):
        _grouped_bars(ax, cells, series, "RMR (%)", errors)
        ax.set_ylim(0, 105)
        png = _png(figure, ax)
    return Plot(
        "rmr_by_level",
        _RMR_TITLE[benchmark_kind(summary.benchmark).breakdown],
        "RMR is the mean of RMR@tau over tau = 1.0, 0.9, 0.8, 0.7: the share of scored cases whose "
        "false positives and false negatives both stay within floor((1 - tau) x |G|). Error bars: 95% "
        "percentile bootstrap CI over scored cases. ALL pools every case (the paper's Avg. column).",
        png,
    )


def rmr_tau_curve(summary: ComparisonSummary) -> Plot | None:
    if not benchmark_kind(summary.benchmark).tau_curve:
        return None
    taus = [float(tau) for tau, _ in TAU_KEYS]
    palette = _colors(len(summary.variants))
    cells = summary.cells
    with _figure(2.75 * len(cells), 3.4, len(cells), len(summary.variants)) as (figure, axes):
        for ax, cell in zip(axes, cells, strict=True):
            for entry, color in zip(summary.variants, palette, strict=True):
                ys = [_value(entry.cells[cell].rmr_tau.get(tau)) for tau, _ in TAU_KEYS]
                ax.plot(taus, ys, marker="o", markersize=3, color=color, label=_short(entry.label))
            ax.set_title(cell)
            ax.set_xlim(1.02, 0.48)
            ax.set_xticks(taus, [f"{tau:.1f}" for tau in taus])
            ax.set_ylim(0, 105)
            ax.set_xlabel("tau")
            ax.grid(alpha=0.3)
        axes[0].set_ylabel("RMR@tau (%)")
        png = _png(figure, axes[0])
    return Plot(
        "rmr_tau",
        "RMR@tau from strict to lenient",
        "RMR@tau for tau from 1.0 (exact match: the predicted set equals the ground truth) down to 0.5 "
        "(up to half of |G| false positives and, separately, false negatives tolerated). A curve that "
        "rises steeply is nearly right on many cases; a flat low curve misses badly.",
        png,
    )


def failure_modes(summary: ComparisonSummary) -> Plot | None:
    if not any(v.failure_modes for v in summary.variants):  # a benchmark without levels has none
        return None
    levels = summary.breakdown or ("L0",)
    palette = _colors(len(summary.variants))
    with _figure(3.7 * len(levels), 3.4, len(levels), len(summary.variants)) as (figure, axes):
        for ax, level in zip(axes, levels, strict=True):
            modes = [
                m for m in FAILURE_MODES if any(m in v.failure_modes.get(level, {}) for v in summary.variants)
            ]
            series = [
                (v.label, [_value(v.failure_modes.get(level, {}).get(m)) for m in modes], color)
                for v, color in zip(summary.variants, palette, strict=True)
            ]
            _grouped_bars(ax, modes, series, "% of the level's cases" if ax is axes[0] else "")
            ax.set_title(level)
        png = _png(figure, axes[0])
    return Plot(
        "failure_modes",
        "Failure modes",
        "Share of each level's cases (excluded ones included in the denominator) that fail exact match "
        "with: FM-V1 a missed violation; FM-D1 a distractor rule flagged; FM-C1 (L1/L2) a rule waived "
        "by an exception flagged anyway; FM-C3 (L1/L2) a violation created by a conditional missed. "
        "Lower is better; one case can show several modes.",
        png,
    )


def domain_heatmap(summary: ComparisonSummary) -> Plot:
    domains = sorted({d for v in summary.variants for d in v.domain_rmr})
    grid = [[_value(v.domain_rmr.get(d)) for v in summary.variants] for d in domains]
    width = 3.0 + 1.3 * len(summary.variants)
    with _figure(min(width, 14), 1.2 + 0.4 * max(len(domains), 1)) as (figure, (ax,)):
        image = ax.imshow(grid, cmap="viridis", vmin=0, vmax=100, aspect="auto")
        ax.set_yticks(range(len(domains)), domains)
        ax.set_xticks(
            range(len(summary.variants)),
            ["\n".join(textwrap.wrap(_short(v.label, 48), 16)) for v in summary.variants],
        )
        for row, numbers in enumerate(grid):
            for col, number in enumerate(numbers):
                text = "–" if math.isnan(number) else f"{number:.1f}"
                ax.text(col, row, text, ha="center", va="center", color="white" if number < 60 else "black")
        figure.colorbar(image, ax=ax, label="RMR (%)")
        png = _png(figure)
    return Plot(
        "domain_heatmap",
        "RMR by domain",
        "RMR of every variant in every domain, all levels pooled. With few cases per domain a single "
        "case moves a cell by many points; read rows for patterns, not single cells.",
        png,
    )


def _f1(entry: VariantResult, cell: str, rule_type: str) -> float:
    stats = (entry.rule_types or {}).get(cell, {}).get(rule_type)
    return math.nan if stats is None else stats.f1


def rule_type_f1(summary: ComparisonSummary) -> Plot | None:
    per_rule = [v for v in summary.variants if v.rule_types]
    if not per_rule:
        return None
    color_of = {v.label: c for v, c in zip(summary.variants, _colors(len(summary.variants)), strict=True)}
    cells = summary.cells
    with _figure(2.75 * len(cells), 3.4, len(cells), len(per_rule)) as (figure, axes):
        for ax, cell in zip(axes, cells, strict=True):
            series = [(v.label, [_f1(v, cell, t) for t in TARGET_TYPES], color_of[v.label]) for v in per_rule]
            _grouped_bars(ax, TARGET_TYPES, series, "F1 of 'violated' (%)" if ax is axes[0] else "")
            ax.set_ylim(0, 105)
            ax.set_title(cell)
        png = _png(figure, axes[0])
    return Plot(
        "rule_type_f1",
        "Per-rule judgments by target type",
        "Per-rule variants only: F1 of the 'violated' verdict per target type. Decisive rules are judged "
        "from the conversation's evidence, distractors look relevant but are never violated (their F1 "
        "is 0 by construction when nothing is violated; watch their false positives), exceptions must "
        "be judged on their own alternative standard. A judgment without a verdict counts as 'not flagged'.",
        png,
    )


def cost_vs_rmr(summary: ComparisonSummary) -> Plot | None:
    # Dollars when every variant that reported usage reported a cost, else tokens.
    measured = [
        (v, v.cells["ALL"], color)
        for v, color in zip(summary.variants, _colors(len(summary.variants)), strict=True)
        if v.cells["ALL"].rmr is not None
        and (v.cells["ALL"].dollars_per_case is not None or v.cells["ALL"].prompt_tokens_per_case is not None)
    ]
    use_dollars = bool(measured) and all(cell.dollars_per_case is not None for _, cell, _ in measured)
    points = []
    for entry, cell, color in measured:
        x = cell.dollars_per_case if use_dollars else cell.prompt_tokens_per_case
        if x is not None and not use_dollars:
            x += cell.completion_tokens_per_case or 0.0
        if x is not None and cell.rmr is not None:
            points.append((entry, x, cell.rmr, color))
    if not points:
        return None
    with _figure(7, 4.2, legend_entries=len(points)) as (figure, (ax,)):
        for entry, x, rmr, color in points:
            low, high = entry.cells["ALL"].rmr_ci or [rmr, rmr]
            yerr = [[rmr - low], [high - rmr]]
            ax.errorbar([x], [rmr], yerr=yerr, fmt="o", capsize=3, color=color, label=_short(entry.label))
        xs = [p[1] for p in points]
        if min(xs) > 0 and max(xs) / min(xs) > 20:
            ax.set_xscale("log")
        ax.set_xlabel(
            "dollars per case" if use_dollars else "tokens per case (prompt + completion; cost not reported)"
        )
        ax.set_ylabel("RMR, ALL (%)")
        ax.set_ylim(0, 105)
        ax.grid(alpha=0.3)
        png = _png(figure, ax)
    missing = len(summary.variants) - len(points)
    return Plot(
        "cost_vs_rmr",
        "Cost against accuracy",
        (
            "Mean dollars per case"
            if use_dollars
            else "Mean tokens per case (dollar cost was not reported for every variant)"
        )
        + " against pooled RMR with its 95% CI. Up and to the left is better; per-rule runs pay one call per rule."
        + (f" {missing} variant(s) without usage or RMR are not shown." if missing else ""),
        png,
    )


def render_plots(summary: ComparisonSummary) -> list[Plot]:
    """Every plot that has data, in report order."""
    candidates = (
        rmr_by_level(summary),
        rmr_tau_curve(summary),
        failure_modes(summary),
        domain_heatmap(summary),
        rule_type_f1(summary),
        cost_vs_rmr(summary),
    )
    return [plot for plot in candidates if plot is not None]
