"""HTML tables of the report. Every user-provided string goes through ``esc``, which is
what keeps a label such as ``<script>`` inert text.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence

from .._metrics import TARGET_TYPES, format_p
from ._leaderboard import Leaderboard
from ._model import FAILURE_MODES, ComparisonSummary, DiffRow, VariantResult

DASH = "–"
#: Settings already shown in the variant and protocol columns.
_IN_OTHER_COLUMNS = frozenset({"model_name", "program", "protocol", "layout"})


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def num(value: float | None, digits: int = 2) -> str:
    return DASH if value is None else f"{value:.{digits}f}"


def ci(interval: Sequence[float] | None) -> str:
    return "" if not interval else f"<span class=ci>[{interval[0]:.1f}, {interval[1]:.1f}]</span>"


def count(value: float | None) -> str:
    return DASH if value is None else f"{value:,.0f}"


def dollars(value: float | None) -> str:
    return DASH if value is None else f"${value:.4f}" if value >= 0.01 else f"${value:.6f}"


def seconds(value: float | None) -> str:
    return DASH if value is None else f"{value:,.1f} s"


def table(headers: Iterable[str], rows: Iterable[str], cls: str = "") -> str:
    """``headers`` and ``rows`` are already-escaped HTML fragments."""
    head = "".join(f"<th>{h}</th>" for h in headers)
    attr = f' class="{cls}"' if cls else ""
    # A wide table scrolls inside its own box: the page never cuts a column.
    return f"<div class=scroll><table{attr}><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"


def row(cells: Iterable[str], cls: str = "") -> str:
    attr = f' class="{cls}"' if cls else ""
    return f"<tr{attr}>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"


def variant_name(entry: VariantResult, baseline: str) -> str:
    tag = " <span class=tag>baseline</span>" if entry.label == baseline else ""
    parts = [part for part in (entry.model, entry.variant) if part]
    if all(part in entry.label for part in parts):  # a derived label already says it
        return f"<b>{esc(entry.label)}</b>{tag}"
    return f"<b>{esc(entry.label)}</b>{tag}<div class=sub>{' · '.join(esc(p) for p in parts)}</div>"


def variants_table(summary: ComparisonSummary) -> str:
    rows = []
    for entry in summary.variants:
        shown = {k: v for k, v in entry.settings.items() if k not in _IN_OTHER_COLUMNS}
        protocol = esc(entry.protocol) + (f" ({esc(entry.layout)} layout)" if entry.layout else "")
        cells = [variant_name(entry, summary.baseline), protocol]
        cells.append("<br>".join(f"<code>{esc(f)}</code>" for f in entry.files))
        cells.append("<br>".join(f"{esc(k)} = {esc(v)}" for k, v in shown.items()) or DASH)
        rows.append(row([*cells, seconds(entry.wall_s), seconds(entry.latency_s_per_case)]))
    headers = ["Variant", "Protocol", "Result files", "Settings (records, run manifest)"]
    return table([*headers, "Wall time", "LM latency / case"], rows)


def level_table(summary: ComparisonSummary, cell: str) -> str:
    rows = []
    for entry in summary.variants:
        s = entry.cells[cell]
        cells = [variant_name(entry, summary.baseline), f"{s.n_eval} / {s.total}", num(s.excluded_pct, 1)]
        cells += [f"<b>{num(s.rmr)}</b> {ci(s.rmr_ci)}", f"{num(s.rmr_exact)} {ci(s.rmr_exact_ci)}"]
        cells += [f"{num(s.rdr)} {ci(s.rdr_ci)}", num(s.lm_calls_per_case, 1)]
        cells += [count(s.prompt_tokens_per_case), count(s.completion_tokens_per_case)]
        cells.append(dollars(s.dollars_per_case))
        rows.append(row(cells, "baseline" if entry.label == summary.baseline else ""))
    headers = ["Variant", "Scored / cases", "Excluded %", "RMR [95% CI]", "RMR@1.0", "RDR ↓"]
    headers += ["LM calls / case", "Prompt tok / case", "Completion tok / case", "$ / case"]
    return table(headers, rows, "num")


def _delta(diff: DiffRow, metric: str, lower_is_better: bool = False) -> str:
    value = diff.diff.get(metric)
    cls = ""
    if diff.significant(metric) and value is not None:
        better = value < 0 if lower_is_better else value > 0
        cls = " class=better" if better else " class=worse"
    sign = "" if value is None or value < 0 else "+"
    withheld = f"<span class=ci>{esc(diff.ci_note)}</span>" if diff.ci_note else ""
    return f"<span{cls}>{sign}{num(value)}</span> {ci(diff.ci.get(metric)) or withheld}"


def diff_table(summary: ComparisonSummary, cell: str) -> str:
    rows = []
    for d in summary.diffs_for(cell):
        cells = [esc(d.label), f"{d.n_pairs} ({d.n_units})", _delta(d, "rmr_avg"), _delta(d, "rmr_exact")]
        cells += [_delta(d, "rdr", lower_is_better=True), f"{d.variant_only_exact} / {d.baseline_only_exact}"]
        rows.append(row([*cells, DASH if d.test_p is None else format_p(d.test_p)]))
    headers = ["Variant", "Paired cases (units)", "Δ RMR [95% CI]", "Δ RMR@1.0", "Δ RDR"]
    return table([*headers, "Exact: only variant / only baseline", "Paired test p"], rows, "num")


def published_table(summary: ComparisonSummary, board: Leaderboard, cell: str) -> str:
    """User rows and published rows of one cell, ranked together by RMR."""
    entries: list[tuple[float, str]] = []
    for entry in summary.variants:
        if entry.pipeline_check:  # a fake LM's figures are the script's, not a model's
            continue
        s = entry.cells[cell]
        cells = [
            variant_name(entry, summary.baseline),
            esc(entry.protocol),
            "<span class=tag>this report</span>",
        ]
        cells += [num(s.rmr), num(s.rmr_exact), num(s.rdr)]
        entries.append((-1.0 if s.rmr is None else s.rmr, row(cells, "mine")))
    for item in [*board.per_policy, *board.per_rule]:
        figures = item.at(cell)
        who = f"{esc(item.model)}<div class=sub>{esc(item.org or '')}</div>"
        cells = [who, esc(item.protocol), "<span class='tag pub'>published</span>"]
        cells += [num(figures["rmr"], 1), num(figures["rmr_exact"], 1), num(figures["rdr"], 1)]
        entries.append((figures["rmr"], row(cells, "published")))
    entries.sort(key=lambda pair: -pair[0])
    headers = ["Model / variant", "Protocol", "Source", "RMR", "RMR@1.0", "RDR ↓"]
    return table(headers, (html_row for _, html_row in entries), "num")


def failure_table(summary: ComparisonSummary) -> str:
    """The failure-mode section (SafePyramid only: the modes come from its metadata)."""
    cells = summary.cells
    late = [cell for cell in cells if cell != "L0"] if any(c in cells for c in ("L1", "L2")) else []
    columns = [(mode, level) for mode in FAILURE_MODES[:2] for level in cells]
    columns += [(mode, level) for mode in FAILURE_MODES[2:] for level in late]
    headers = ["Variant", *(f"{mode} {level}" for mode, level in columns)]
    rows = []
    for entry in summary.variants:
        values = (num(entry.failure_modes.get(level, {}).get(mode), 1) for mode, level in columns)
        rows.append(row([esc(entry.label), *values]))
    return (
        "<h2>Failure modes</h2><p class=lead>Percent of each level's cases failing exact match with the mode "
        "(ALL pools counts; FM-C1 and FM-C3 exist at L1/L2 only).</p>" + table(headers, rows, "num")
    )


def rule_type_table(summary: ComparisonSummary) -> str:
    rows = []
    for entry in summary.variants:
        for rule_type in TARGET_TYPES:
            stats = (entry.rule_types or {}).get("ALL", {}).get(rule_type)
            if stats is None:
                continue
            cells = [esc(entry.label), esc(rule_type), f"{stats.n_judgments:,}"]
            cells += [num(stats.precision), num(stats.recall), f"<b>{num(stats.f1)}</b>", num(stats.accuracy)]
            rows.append(row(cells))
    if not rows:
        return ""
    headers = ["Variant", "Target type", "Judgments", "Precision", "Recall", "F1", "Accuracy"]
    return "<h2>Per-rule judgments (all levels)</h2>" + table(headers, rows, "num")
