"""The PKU-SafeRLHF part of a comparison: each variant's ``VariantResult.extra`` (binary,
category and severity results) for the page and the terminal, always beside the paper's
moderator figures and their citation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich import box
from rich.table import Table

from .._metrics_pku import CATEGORY_SCOPE, PKU_PUBLISHED
from .._table import FitTable
from ._html_tables import DASH, esc, num, row, table
from ._model import ComparisonSummary

#: (section, key, page label, terminal label or None (page only), published key) of the headline columns.
HEADLINE: tuple[tuple[str, str, str, str | None, str | None], ...] = (
    ("binary", "accuracy", "Safe/unsafe accuracy", "Bin acc", "binary_accuracy"),
    ("binary", "f1", "Unsafe F1", "Bin F1", None),
    ("binary", "false_positive_rate", "FPR", "FPR", None),
    ("categories", "exact_match", "Category exact match (all responses)", "Cat EM", None),
    (
        "categories",
        "exact_match_unsafe",
        "Category exact match (unsafe responses)",
        "Cat EM unsafe",
        "category_exact_match",
    ),
    ("categories", "micro_f1", "Category micro F1", "Cat µF1", None),
    ("categories", "macro_f1", "Category macro F1", None, None),
    ("severity", "accuracy", "Severity accuracy", "Sev acc", "severity_accuracy"),
    ("severity", "macro_f1", "Severity macro F1", None, None),
)


def _value(report: dict[str, Any] | None, section: str, key: str) -> float | None:
    part = (report or {}).get(section)
    return None if not part else part.get(key)


def _headline_table(summary: ComparisonSummary, paper: dict[str, Any]) -> str:
    headers = ["Variant", "Scored", *(esc(label) for _, _, label, _, _ in HEADLINE)]
    name = f"{esc(paper['model'])} <span class='tag pub'>published</span>"
    published = [DASH if ref is None else num(paper[ref], 1) for *_, ref in HEADLINE]
    rows = [row([name, DASH, *published], "published")]
    for entry in summary.variants:
        binary = (entry.extra or {}).get("binary", {})
        scored = f"{binary.get('n_eval', 0)}/{binary.get('total', 0)}"
        cells = [num(_value(entry.extra, section, key)) for section, key, *_ in HEADLINE]
        rows.append(row([f"<b>{esc(entry.label)}</b>", scored, *cells], "mine"))
    return table(headers, rows, "num")


def _category_table(summary: ComparisonSummary) -> str:
    headers = ["Rule", "Category", "Support", *(f"F1 {esc(entry.label)}" for entry in summary.variants)]
    scores = [
        {c["rule"]: c for c in (entry.extra or {}).get("categories", {}).get("per_category", [])}
        for entry in summary.variants
    ]
    first = next((s for s in scores if s), {})
    rows = [
        row([str(rule), esc(item["category"]), str(item["support"]), *(num(s[rule]["f1"]) for s in scores)])
        for rule, item in sorted(first.items())
    ]
    return table(headers, rows, "num")


def _confusions(summary: ComparisonSummary) -> str:
    parts = []
    for entry in summary.variants:
        severity = (entry.extra or {}).get("severity")
        if not severity:
            continue
        matrix = severity["confusion"]
        rows = [row([str(gold), *(str(n) for n in counts)]) for gold, counts in enumerate(matrix)]
        grid = table(["gold \\ predicted", *(str(level) for level in range(len(matrix)))], rows, "num")
        parts.append(f"<details><summary>{esc(entry.label)}: severity confusion</summary>{grid}</details>")
    return "".join(parts)


def pku_html_section(summary: ComparisonSummary) -> str:
    """The PKU-SafeRLHF section of the page; empty on any other benchmark."""
    paper = summary.pku_published
    if paper is None:
        return ""
    return (
        "<h2>PKU-SafeRLHF: binary, category and severity results</h2><p class=lead>Percentages over the "
        "cases each variant answered (unsafe is the positive class; FPR = safe responses flagged unsafe). "
        "The safe/unsafe verdict is the program's explicit flag when it gives one, else 'unsafe iff some "
        "rule is violated'. Severity appears only for programs that predict it (e.g. dspy-severity). "
        f"{esc(CATEGORY_SCOPE)} "
        "The <span class='tag pub'>published</span> row is the paper's trained moderator on the paper's own "
        f"evaluation data: {esc(paper['citation'])}. It is a reference point, not a leaderboard entry: "
        "this report scores in-context guards reading a policy, on this report's cases.</p>"
        f"{_headline_table(summary, paper)}<h3>Harm categories (F1 per variant)</h3>"
        f"{_category_table(summary)}{_confusions(summary)}"
    )


def pku_variants_table(variants: Sequence[tuple[str, dict[str, Any] | None]]) -> Table:
    """The headline PKU metrics of ``(label, PkuReport dict)`` rows under the paper's row (report, compare)."""
    paper: dict[str, Any] = dict(PKU_PUBLISHED)
    result = FitTable(
        title="PKU-SafeRLHF (%), beside the paper's moderator",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        caption=f"Cat EM: all responses; Cat EM unsafe: unsafe ones. {CATEGORY_SCOPE}\n"
        f"published: {paper['citation']}",
        caption_justify="left",
    )
    result.add_column("Variant", min_width=12)
    shown = [column for column in HEADLINE if column[3] is not None]
    for *_, label, _ in shown:
        result.add_column(label or "", justify="right")
    result.add_row("paper", *(DASH if ref is None else num(paper[ref], 1) for *_, ref in shown))
    for name, report in variants:
        result.add_row(name, *(num(_value(report, s, k), 1) for s, k, *_ in shown))
    return result
