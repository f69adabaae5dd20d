"""The score every optimizer maximises: the benchmark's own case-level number.

Averaged over cases it is ``rmr_avg_strict``: unreadable answers score 0, so a format-breaking
instruction cannot win by leaving the denominator. A ``trace`` means DSPy asks "keep this demo?".
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sp_dspy.metrics import TAUS, rmr_match


def predicted_rules(prediction: Any) -> list[int] | None:
    """The rule numbers a prediction names, or ``None`` when there is no usable answer."""
    try:
        rules = prediction["violated_rules"]
    except (KeyError, TypeError, AttributeError):
        rules = getattr(prediction, "violated_rules", None)
    if rules is None or isinstance(rules, str | bytes):
        return None
    try:
        return sorted({int(rule) for rule in rules if not isinstance(rule, bool)})
    except (TypeError, ValueError):
        return None


def case_score(gold: Iterable[int], predicted: Iterable[int] | None) -> float:
    """Fraction of the four main RMR@tau tolerances at which ``predicted`` matches ``gold`` (``None``: 0)."""
    if predicted is None:
        return 0.0
    gold_set, pred_set = set(gold), set(predicted)
    fp, fn = len(pred_set - gold_set), len(gold_set - pred_set)
    return sum(rmr_match(fp, fn, len(gold_set), eps) for _, eps in TAUS) / len(TAUS)


def case_metric(example: Any, prediction: Any, trace: Any = None) -> float | bool:
    """DSPy metric for case examples: the case score; with a ``trace``, whether it is perfect."""
    score = case_score(example.ground_truth_violations, predicted_rules(prediction))
    return score >= 1.0 if trace is not None else score


def predicted_verdict(prediction: Any) -> str | None:
    """``"violated"``/``"not_violated"`` from a judge prediction, else ``None``."""
    verdict = getattr(prediction, "verdict", None)
    if isinstance(verdict, str) and verdict.strip() in ("violated", "not_violated"):
        return verdict.strip()
    return None


def judgment_metric(example: Any, prediction: Any, trace: Any = None) -> float | bool:
    """DSPy metric for judgment examples: 1 for the gold verdict, 0 otherwise (also unreadable)."""
    correct = predicted_verdict(prediction) == example.verdict
    return correct if trace is not None else float(correct)
