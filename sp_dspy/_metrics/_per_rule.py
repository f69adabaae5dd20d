"""Per-rule judgment diagnostics (contract section 5), per level and per target type.

Accuracy counts a judgment without a verdict as wrong; precision / recall / F1 of
"violated" count it as "not flagged" (as the case-level aggregation does). Gold labels
come from the dataset, not the file's ``gt``, so a judgment file cannot grade itself.
Rates are percentages rounded to 2 decimals (the reference prints fractions).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from ._judgments import Key
from ._official import CELLS

TARGET_TYPES: tuple[str, ...] = ("decisive", "distractor", "exception")


def _rate(count: int, n: int) -> float:
    return round(100 * count / n, 2) if n else 0.0


def judgment_stats(counts: Mapping[Key, int]) -> dict[str, Any]:
    """Accuracy, P/R/F1 of "violated", the confusion counts and the no-verdict rate."""
    tp = fp = fn = tn = correct = without = 0
    for (_, _, gold, flagged, has_verdict), n in counts.items():
        if gold and flagged:
            tp += n
        elif gold:
            fn += n
        elif flagged:
            fp += n
        else:
            tn += n
        if has_verdict and flagged == gold:
            correct += n
        if not has_verdict:
            without += n
    total = tp + fp + fn + tn
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "n_judgments": total,
        "n_violated_gt": tp + fn,
        "n_not_violated_gt": fp + tn,
        "n_without_verdict": without,
        "accuracy": _rate(correct, total),
        "precision": round(100 * precision, 2),
        "recall": round(100 * recall, 2),
        "f1": round(100 * f1, 2),
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": tn,
        "per_rule_refusal_rate": _rate(without, total),
    }


def _type_order(rule_type: str) -> tuple[int, str]:
    return (TARGET_TYPES.index(rule_type) if rule_type in TARGET_TYPES else len(TARGET_TYPES), rule_type)


def diagnostics(counts: Counter[Key]) -> dict[str, Any]:
    """Per cell (L0/L1/L2/ALL) from the counts of a ``judgment_pass``: overall stats plus
    ``by_rule_type`` for each target type judged in the cell (absent types are left out).
    """
    report: dict[str, Any] = {}
    for cell in CELLS:
        members = {key: n for key, n in counts.items() if cell == "ALL" or key[0] == cell}
        stats = judgment_stats(members)
        present = sorted({key[1] for key in members}, key=_type_order)
        stats["by_rule_type"] = {
            t: judgment_stats({key: n for key, n in members.items() if key[1] == t}) for t in present
        }
        report[cell] = stats
    return report
