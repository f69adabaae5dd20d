"""Per-rule judgment diagnostics (contract section 5).

Binary-classification view of per-rule runs, per level and per target type: accuracy
(a judgment without a verdict counts as wrong), precision / recall / F1 of the
"violated" class with the TP/FP/FN/TN behind them (a judgment without a verdict
counts as "not flagged", as in the case-level aggregation), and the share of
judgments without a verdict. Gold labels come from the dataset (``rule in
ground_truth_violations``), not from the ``gt`` a file carries, so a stale or
hand-written judgment file cannot grade itself. All rates are percentages rounded to
2 decimals (the reference prints fractions; the counts are given to recompute them).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .._data._schema import Case
from ._diagnostics import rule_types
from ._official import CELLS
from ._records import JudgmentRecord

TARGET_TYPES: tuple[str, ...] = ("decisive", "distractor", "exception")


@dataclass(frozen=True, slots=True)
class _Judged:
    level: str
    rule_type: str
    gt: bool
    flagged: bool
    has_verdict: bool


def _judged(cases: Iterable[Case], judgments: Iterable[JudgmentRecord]) -> list[_Judged]:
    by_id = {case.id: case for case in cases}
    types: dict[str, dict[int, str]] = {}
    out: list[_Judged] = []
    for judgment in judgments:
        case = by_id.get(judgment.cid)
        if case is None:
            continue
        if case.id not in types:
            types[case.id] = rule_types(case)
        rule_type = judgment.rule_type or types[case.id].get(judgment.rule, "decisive")
        out.append(
            _Judged(
                level=case.level,
                rule_type=rule_type,
                gt=judgment.rule in case.ground_truth_violations,
                flagged=judgment.flagged,
                has_verdict=judgment.has_verdict,
            )
        )
    return out


def _rate(count: int, n: int) -> float:
    return round(100 * count / n, 2) if n else 0.0


def judgment_stats(items: Sequence[_Judged]) -> dict[str, Any]:
    """Accuracy, P/R/F1 of "violated", the confusion counts and the no-verdict rate."""
    tp = sum(1 for j in items if j.gt and j.flagged)
    fp = sum(1 for j in items if not j.gt and j.flagged)
    fn = sum(1 for j in items if j.gt and not j.flagged)
    tn = sum(1 for j in items if not j.gt and not j.flagged)
    correct = sum(1 for j in items if j.has_verdict and j.flagged == j.gt)
    without = sum(1 for j in items if not j.has_verdict)
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "n_judgments": len(items),
        "n_violated_gt": tp + fn,
        "n_not_violated_gt": fp + tn,
        "n_without_verdict": without,
        "accuracy": _rate(correct, len(items)),
        "precision": round(100 * precision, 2),
        "recall": round(100 * recall, 2),
        "f1": round(100 * f1, 2),
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": tn,
        "per_rule_refusal_rate": _rate(without, len(items)),
    }


def judgment_diagnostics(cases: Sequence[Case], judgments: Iterable[JudgmentRecord]) -> dict[str, Any]:
    """Per cell (L0/L1/L2/ALL): overall stats plus ``by_rule_type`` for each target type.

    Judgments of cases outside ``cases`` are ignored (the caller reports unknown ids).
    A target type with no judgment in a cell is left out rather than reported as zeros.
    """
    judged = _judged(cases, judgments)
    report: dict[str, Any] = {}
    for cell in CELLS:
        members = judged if cell == "ALL" else [j for j in judged if j.level == cell]
        stats = judgment_stats(members)
        present = sorted({j.rule_type for j in members}, key=_type_order)
        stats["by_rule_type"] = {t: judgment_stats([j for j in members if j.rule_type == t]) for t in present}
        report[cell] = stats
    return report


def refusal_rates(cases: Sequence[Case], judgments: Iterable[JudgmentRecord]) -> dict[str, float]:
    """``per_rule_refusal_rate`` per cell, as the reference adds it to case-level cells."""
    judged = _judged(cases, judgments)
    rates: dict[str, float] = {}
    for cell in CELLS:
        members = judged if cell == "ALL" else [j for j in judged if j.level == cell]
        rates[cell] = _rate(sum(1 for j in members if not j.has_verdict), len(members))
    return rates


def _type_order(rule_type: str) -> tuple[int, str]:
    return (TARGET_TYPES.index(rule_type) if rule_type in TARGET_TYPES else len(TARGET_TYPES), rule_type)
