"""Failure modes and error attribution (contract section 2, last two bullets): why cases miss.

Denominator (the reference harness is looser): a failure mode is counted on *scored*
cases that fail exact match, and its ``pct`` is ``round(100 * count / total, 2)`` over
every case of that level, excluded and missing ones included. The reference's console
print also classifies refused records from their partial prediction, inflating its
FM-V1; here an excluded case has no prediction and shows only in the cell's ``refusal``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._data._schema import Case
from ._official import CELLS, RULE_TYPES, CaseOutcome

_MODES_BY_LEVEL: dict[str, tuple[str, ...]] = {
    "L0": ("FM-V1", "FM-D1"),
    "L1": ("FM-V1", "FM-D1", "FM-C1", "FM-C3"),
    "L2": ("FM-V1", "FM-D1", "FM-C1", "FM-C3"),
}


def classify_failure(case: Case, outcome: CaseOutcome) -> list[str]:
    """The failure modes of one scored case (empty when it matches exactly or is excluded).

    FM-V1 a missed violation, FM-D1 a distractor flagged; at L1/L2, FM-C1 a waived rule
    flagged and FM-C3 a conditional's tightening missed.
    """
    if outcome.excluded or outcome.exact:
        return []
    missed = outcome.gt - outcome.pred
    meta = case.failure_mode_metadata
    modes: list[str] = []
    if missed:
        modes.append("FM-V1")
    if not outcome.pred.isdisjoint(meta.distractor_rules):
        modes.append("FM-D1")
    if case.level in ("L1", "L2"):
        if not outcome.pred.isdisjoint(meta.waived_rules):
            modes.append("FM-C1")
        if not missed.isdisjoint(meta.contradicted_rules):
            modes.append("FM-C3")
    return modes


def failure_modes(cases: Sequence[Case], outcomes: Sequence[CaseOutcome]) -> dict[str, dict[str, Any]]:
    """Per level: ``total``, ``failed`` (scored, not exact) and each mode's count and pct."""
    totals = dict.fromkeys(_MODES_BY_LEVEL, 0)
    failing: dict[str, list[list[str]]] = {level: [] for level in _MODES_BY_LEVEL}
    for case, outcome in zip(cases, outcomes, strict=True):
        if outcome.level in totals:
            totals[outcome.level] += 1
            if not (outcome.excluded or outcome.exact):
                failing[outcome.level].append(classify_failure(case, outcome))
    report: dict[str, dict[str, Any]] = {}
    for level, names in _MODES_BY_LEVEL.items():
        total = totals[level]
        report[level] = {"total": total, "failed": len(failing[level])}
        for name in names:
            count = sum(name in modes for modes in failing[level])
            report[level][name] = {"count": count, "pct": round(100 * count / total, 2) if total else None}
    return report


def error_attribution(cases: Sequence[Case], outcomes: Sequence[CaseOutcome]) -> dict[str, dict[str, Any]]:
    """Per cell (L0/L1/L2/ALL): summed FP and FN counts by rule type over scored cases.

    FP: a waived rule counts as ``exception``, otherwise its rubric type (``decisive``
    when the rule is not in the rubric). FN: a contradicted rule counts as
    ``conditional``, an exception-typed rule as ``exception``, else ``decisive``.
    """
    report = {
        cell: {"fp": dict.fromkeys(RULE_TYPES, 0), "fn": dict.fromkeys(RULE_TYPES, 0)} for cell in CELLS
    }
    for case, outcome in zip(cases, outcomes, strict=True):
        if outcome.excluded or not (outcome.fp or outcome.fn):
            continue
        types = case.rule_types
        meta = case.failure_mode_metadata
        for rule in outcome.pred - outcome.gt:
            bucket = "exception" if rule in meta.waived_rules else types.get(rule, "decisive")
            for cell in (outcome.level, "ALL"):
                report[cell]["fp"][bucket if bucket in RULE_TYPES else "decisive"] += 1
        for rule in outcome.gt - outcome.pred:
            if rule in meta.contradicted_rules:
                bucket = "conditional"
            else:
                bucket = "exception" if types.get(rule) == "exception" else "decisive"
            for cell in (outcome.level, "ALL"):
                report[cell]["fn"][bucket] += 1
    return report
