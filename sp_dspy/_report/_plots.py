"""The report's six plots, each a function of ``ComparisonSummary`` alone.

matplotlib is imported inside the functions (via ``_figure``), so importing the
report package, and therefore ``sp-dspy --help``, stays fast.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from typing import Any

from ._figure import Plot, bar_offsets, colors, legend_below, new_figure, short, to_png, value
from ._model import FAILURE_MODES, TARGET_TYPES, TAU_KEYS, ComparisonSummary, VariantResult


def _grouped_bars(
    ax: Any, groups: Sequence[str], series: Sequence[tuple[str, list[float], Any]], ylabel: str
) -> None:
    offsets, width = bar_offsets(len(series))
    for (label, heights, color), offset in zip(series, offsets, strict=True):
        ax.bar([i + offset for i in range(len(groups))], heights, width, label=short(label), color=color)
    ax.set_xticks(range(len(groups)), list(groups))
    ax.set_ylabel(ylabel)
    ax.grid(axis="y", alpha=0.3)


def rmr_by_level(summary: ComparisonSummary) -> Plot:
    variants, cells = summary.variants, summary.cells
    palette = colors(len(variants))
    offsets, width = bar_offsets(len(variants))
    with new_figure(8, 4, legend_entries=len(variants)) as (figure, (ax,)):
        for entry, color, offset in zip(variants, palette, offsets, strict=True):
            heights = [value(entry.cells[c].rmr) for c in cells]
            errors: list[list[float]] = [[], []]
            for cell, height in zip(cells, heights, strict=True):
                interval = entry.cells[cell].rmr_ci
                low, high = (
                    (interval[0], interval[1]) if interval and not math.isnan(height) else (height, height)
                )
                errors[0].append(max(height - low, 0.0) if not math.isnan(height) else 0.0)
                errors[1].append(max(high - height, 0.0) if not math.isnan(height) else 0.0)
            xs = [i + offset for i in range(len(cells))]
            ax.bar(
                xs,
                heights,
                width,
                yerr=errors,
                capsize=3,
                label=short(entry.label),
                color=color,
                ecolor="#333333",
            )
        ax.set_xticks(range(len(cells)), list(cells))
        ax.set_ylim(0, 105)
        ax.set_ylabel("RMR (%)")
        ax.grid(axis="y", alpha=0.3)
        legend_below(figure, ax)
        png = to_png(figure)
    return Plot(
        "rmr_by_level",
        "RMR by level",
        "RMR is the mean of RMR@tau over tau = 1.0, 0.9, 0.8, 0.7: the share of scored cases whose "
        "false positives and false negatives both stay within floor((1 - tau) x |G|). Error bars: 95% "
        "percentile bootstrap CI over scored cases. ALL pools every case (the paper's Avg. column).",
        png,
    )


def rmr_tau_curve(summary: ComparisonSummary) -> Plot:
    taus = [float(tau) for tau, _ in TAU_KEYS]
    palette = colors(len(summary.variants))
    cells = summary.cells
    with new_figure(2.75 * len(cells), 3.4, ncols=len(cells), legend_entries=len(summary.variants)) as (
        figure,
        axes,
    ):
        for ax, cell in zip(axes, cells, strict=True):
            for entry, color in zip(summary.variants, palette, strict=True):
                ys = [value(entry.cells[cell].rmr_tau.get(tau)) for tau, _ in TAU_KEYS]
                ax.plot(taus, ys, marker="o", markersize=3, color=color, label=short(entry.label))
            ax.set_title(cell)
            ax.set_xlim(1.02, 0.48)
            ax.set_xticks(taus, [f"{tau:.1f}" for tau in taus])
            ax.set_ylim(0, 105)
            ax.set_xlabel("tau")
            ax.grid(alpha=0.3)
        axes[0].set_ylabel("RMR@tau (%)")
        legend_below(figure, axes[0])
        png = to_png(figure)
    return Plot(
        "rmr_tau",
        "RMR@tau from strict to lenient",
        "RMR@tau for tau from 1.0 (exact match: the predicted set equals the ground truth) down to 0.5 "
        "(up to half of |G| false positives and, separately, false negatives tolerated). A curve that "
        "rises steeply is nearly right on many cases; a flat low curve misses badly.",
        png,
    )


def failure_modes(summary: ComparisonSummary) -> Plot:
    levels = summary.levels or ("L0",)
    palette = colors(len(summary.variants))
    with new_figure(3.7 * len(levels), 3.4, ncols=len(levels), legend_entries=len(summary.variants)) as (
        figure,
        axes,
    ):
        for ax, level in zip(axes, levels, strict=True):
            modes = [
                m for m in FAILURE_MODES if any(m in v.failure_modes.get(level, {}) for v in summary.variants)
            ]
            series = [
                (v.label, [value(v.failure_modes.get(level, {}).get(m)) for m in modes], color)
                for v, color in zip(summary.variants, palette, strict=True)
            ]
            _grouped_bars(ax, modes, series, "% of the level's cases" if level == "L0" else "")
            ax.set_title(level)
        legend_below(figure, axes[0])
        png = to_png(figure)
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
    grid = [[value(v.domain_rmr.get(d)) for v in summary.variants] for d in domains]
    width = 3.0 + 1.3 * len(summary.variants)
    with new_figure(min(width, 14), 1.2 + 0.4 * max(len(domains), 1)) as (figure, (ax,)):
        image = ax.imshow(grid, cmap="viridis", vmin=0, vmax=100, aspect="auto")
        ax.set_yticks(range(len(domains)), domains)
        ax.set_xticks(
            range(len(summary.variants)),
            ["\n".join(textwrap.wrap(short(v.label, 48), 16)) for v in summary.variants],
        )
        for row, numbers in enumerate(grid):
            for col, number in enumerate(numbers):
                text = "–" if math.isnan(number) else f"{number:.1f}"
                ax.text(col, row, text, ha="center", va="center", color="white" if number < 60 else "black")
        figure.colorbar(image, ax=ax, label="RMR (%)")
        png = to_png(figure)
    return Plot(
        "domain_heatmap",
        "RMR by domain",
        "RMR of every variant in every domain, all levels pooled. With few cases per domain a single "
        "case moves a cell by many points; read rows for patterns, not single cells.",
        png,
    )


def rule_type_f1(summary: ComparisonSummary) -> Plot | None:
    per_rule = [v for v in summary.variants if v.rule_types]
    if not per_rule:
        return None
    palette = colors(len(summary.variants))
    color_of = {v.label: c for v, c in zip(summary.variants, palette, strict=True)}
    cells = summary.cells
    with new_figure(2.75 * len(cells), 3.4, ncols=len(cells), legend_entries=len(per_rule)) as (figure, axes):
        for ax, cell in zip(axes, cells, strict=True):
            series = [(v.label, [_f1(v, cell, t) for t in TARGET_TYPES], color_of[v.label]) for v in per_rule]
            _grouped_bars(ax, TARGET_TYPES, series, "F1 of 'violated' (%)" if cell == "L0" else "")
            ax.set_ylim(0, 105)
            ax.set_title(cell)
        legend_below(figure, axes[0])
        png = to_png(figure)
    return Plot(
        "rule_type_f1",
        "Per-rule judgments by target type",
        "Per-rule variants only: F1 of the 'violated' verdict per target type. Decisive rules are judged "
        "from the conversation's evidence, distractors look relevant but are never violated (their F1 "
        "is 0 by construction when nothing is violated; watch their false positives), exceptions must "
        "be judged on their own alternative standard. A judgment without a verdict counts as 'not flagged'.",
        png,
    )


def _f1(entry: VariantResult, cell: str, rule_type: str) -> float:
    stats = (entry.rule_types or {}).get(cell, {}).get(rule_type)
    return math.nan if stats is None else stats.f1


def _cost_points(summary: ComparisonSummary) -> tuple[bool, list[tuple[VariantResult, float, float, Any]]]:
    """(use dollars?, points): dollars when every variant that reported usage reported a cost."""
    palette = colors(len(summary.variants))
    measured = [
        (v, v.cells["ALL"], color)
        for v, color in zip(summary.variants, palette, strict=True)
        if v.cells["ALL"].rmr is not None
        and (v.cells["ALL"].dollars_per_case is not None or v.cells["ALL"].prompt_tokens_per_case is not None)
    ]
    use_dollars = bool(measured) and all(cell.dollars_per_case is not None for _, cell, _ in measured)
    points = []
    for entry, cell, color in measured:
        if use_dollars:
            x = cell.dollars_per_case
        else:
            x = (
                None
                if cell.prompt_tokens_per_case is None
                else cell.prompt_tokens_per_case + (cell.completion_tokens_per_case or 0.0)
            )
        if x is not None and cell.rmr is not None:
            points.append((entry, x, cell.rmr, color))
    return use_dollars, points


def cost_vs_rmr(summary: ComparisonSummary) -> Plot | None:
    use_dollars, points = _cost_points(summary)
    if not points:
        return None
    with new_figure(7, 4.2, legend_entries=len(points)) as (figure, (ax,)):
        for entry, x, rmr, color in points:
            interval = entry.cells["ALL"].rmr_ci or [rmr, rmr]
            ax.errorbar(
                [x],
                [rmr],
                yerr=[[rmr - interval[0]], [interval[1] - rmr]],
                fmt="o",
                capsize=3,
                color=color,
                label=short(entry.label),
            )
        xs = [p[1] for p in points]
        if min(xs) > 0 and max(xs) / min(xs) > 20:
            ax.set_xscale("log")
        ax.set_xlabel(
            "dollars per case" if use_dollars else "tokens per case (prompt + completion; cost not reported)"
        )
        ax.set_ylabel("RMR, ALL (%)")
        ax.set_ylim(0, 105)
        ax.grid(alpha=0.3)
        legend_below(figure, ax)
        png = to_png(figure)
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
