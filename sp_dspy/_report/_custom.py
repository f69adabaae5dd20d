"""The custom-policy part of a comparison: each variant's binary view (over-blocking, recall,
precision per conversation) and per-rule precision/recall/F1, from ``VariantResult.extra``
(``sp_dspy._metrics._policy_view``), for the page and the terminal (``report``, ``compare``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich import box
from rich.table import Table

from .._metrics import PolicyView
from .._table import FitTable
from ._html_tables import DASH, esc, num, row, table
from ._model import ComparisonSummary

#: (field, page label, terminal label) of the binary view's columns.
BINARY: tuple[tuple[str, str, str], ...] = (
    ("over_blocking_rate", "Over-blocking % ↓ (clean flagged)", "Over-block %"),
    ("recall", "Recall % (violating caught)", "Recall %"),
    ("precision", "Precision % (flags on violating)", "Precision %"),
)
LEAD = (
    "Per conversation, a flag is the guard naming any rule: over-blocking is the share of "
    "conversations violating no rule that were flagged (lower is better), recall the share of "
    "violating ones that were flagged, precision the share of flagged ones that violate a rule. "
    "Per rule: precision, recall and F1 of naming it. Excluded cases are in no denominator."
)


def _views(variants: Sequence[tuple[str, dict[str, Any] | None]]) -> list[tuple[str, PolicyView]]:
    return [(label, PolicyView.model_validate(extra)) for label, extra in variants if extra]


def custom_variants_table(variants: Sequence[tuple[str, dict[str, Any] | None]]) -> Table | None:
    """The binary view of ``(label, variant_report)`` rows (report, compare); None when none has one."""
    views = _views(variants)
    if not views:
        return None
    result = FitTable(
        title="Your policy: violation or not, per conversation",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        caption="flagged = names any rule; over-blocking: clean conversations flagged (lower is better)",
        caption_justify="left",
    )
    result.add_column("Variant", min_width=12)
    for column in ("Scored", *(label for *_, label in BINARY), "Clean flagged", "Violating caught"):
        result.add_column(column, justify="right")
    for label, view in views:
        b = view.binary
        rates = (num(getattr(b, name), 1) for name, *_ in BINARY)
        result.add_row(
            label, str(b.scored), *rates, f"{b.flagged_clean}/{b.clean}", f"{b.caught}/{b.violating}"
        )
    return result


def _binary_rows(views: Sequence[tuple[str, PolicyView]]) -> list[str]:
    rows = []
    for label, view in views:
        b = view.binary
        cells = [f"<b>{esc(label)}</b>", f"{b.scored} ({b.excluded} excl.)"]
        cells += [
            f"{num(b.over_blocking_rate)} <span class=ci>{b.flagged_clean} / {b.clean}</span>",
            f"{num(b.recall)} <span class=ci>{b.caught} / {b.violating}</span>",
            f"{num(b.precision)} <span class=ci>{b.caught} / {b.caught + b.flagged_clean}</span>",
        ]
        rows.append(row(cells))
    return rows


def _rule_rows(views: Sequence[tuple[str, PolicyView]]) -> list[str]:
    by_variant = [{(s.rule, s.text): s for s in view.rules} for _, view in views]
    keys = sorted({key for scores in by_variant for key in scores})
    rows = []
    for key in keys:
        first = next(scores[key] for scores in by_variant if key in scores)
        cells = [str(key[0]), esc(key[1]) or "(not a rule of the policy)", str(first.support)]
        for scores in by_variant:
            s = scores.get(key)
            cells.append(
                DASH
                if s is None
                else f"<b>{num(s.f1)}</b> <span class=ci>P {num(s.precision)} · R {num(s.recall)}</span>"
            )
        rows.append(row(cells))
    return rows


def custom_html_section(summary: ComparisonSummary) -> str:
    """The page's section on a custom policy: binary view, then per-rule scores, per variant."""
    views = _views([(entry.label, entry.extra) for entry in summary.variants])
    if not views:
        return ""
    binary_headers = ["Variant", "Scored", *(esc(label) for _, label, _ in BINARY)]
    rule_headers = ["Rule", "Text", "Support", *(f"F1 {esc(label)}" for label, _ in views)]
    return (
        f"<h2>Your policy: violation or not, and per rule</h2><p class=lead>{esc(LEAD)}</p>"
        f"{table(binary_headers, _binary_rows(views), 'num')}<h3>Per rule (F1, with precision and recall)</h3>"
        f"{table(rule_headers, _rule_rows(views))}"
    )
