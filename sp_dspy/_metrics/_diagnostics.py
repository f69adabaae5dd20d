"""Failure modes and error attribution (contract section 2, last two bullets).

These explain *why* cases miss: a missed violation (FM-V1), a distractor taken for a
violation (FM-D1), a waived rule still flagged (FM-C1, L1/L2), a conditional's
tightening ignored (FM-C3, L1/L2); and which rule type each single FP/FN belongs to.

Denominator (written down because the reference harness is looser): a failure mode
is counted on *scored* cases that fail exact match, and its ``pct`` is
``round(100 * count / total, 2)`` where ``total`` is every case of that level in the
scored dataset, excluded and missing ones included ("a percentage of all that level's
cases"). The reference's console print also classifies refused records from their
partial (usually empty) prediction, so refusals inflate its FM-V1; here an excluded
case has no prediction to diagnose and shows up only in the cell's ``refusal``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._data._schema import Case
from ._official import CELLS, RULE_TYPES, CaseOutcome, select

_MODES_BY_LEVEL: dict[str, tuple[str, ...]] = {
    "L0": ("FM-V1", "FM-D1"),
    "L1": ("FM-V1", "FM-D1", "FM-C1", "FM-C3"),
    "L2": ("FM-V1", "FM-D1", "FM-C1", "FM-C3"),
}

FAILURE_MODE_LABELS: dict[str, str] = {
    "FM-V1": "missed violation",
    "FM-D1": "distractor false positive",
    "FM-C1": "exception mishandling",
    "FM-C3": "conditional neglect",
}


def classify_failure(case: Case, outcome: CaseOutcome) -> list[str]:
    """The failure modes of one scored case (empty when it matches exactly or is excluded)."""
    if outcome.excluded or outcome.exact:
        return []
    meta = case.failure_mode_metadata
    missed = outcome.gt - outcome.pred
    modes: list[str] = []
    if missed:
        modes.append("FM-V1")
    if outcome.pred & set(meta.distractor_rules):
        modes.append("FM-D1")
    if case.level in ("L1", "L2"):
        if outcome.pred & set(meta.waived_rules):
            modes.append("FM-C1")
        if missed & set(meta.contradicted_rules):
            modes.append("FM-C3")
    return modes


def failure_modes(cases: Sequence[Case], outcomes: Sequence[CaseOutcome]) -> dict[str, dict[str, Any]]:
    """Per level: ``total``, ``failed`` (scored, not exact) and each mode's count and pct."""
    modes_of = {o.id: classify_failure(c, o) for c, o in zip(cases, outcomes, strict=True)}
    report: dict[str, dict[str, Any]] = {}
    for level, names in _MODES_BY_LEVEL.items():
        members = select(outcomes, level)
        total = len(members)
        entry: dict[str, Any] = {
            "total": total,
            "failed": sum(1 for o in members if not o.excluded and not o.exact),
        }
        for name in names:
            count = sum(1 for o in members if name in modes_of[o.id])
            entry[name] = {"count": count, "pct": round(100 * count / total, 2) if total else None}
        report[level] = entry
    return report


def attribute_errors(case: Case, outcome: CaseOutcome) -> dict[str, dict[str, int]]:
    """Each FP and FN of one scored case, bucketed by rule type.

    FP: a waived rule counts as ``exception``, otherwise its rubric type (``decisive``
    when the rule is not in the rubric). FN: a contradicted rule counts as
    ``conditional``, an exception-typed rule as ``exception``, else ``decisive``.
    """
    counts = {"fp": dict.fromkeys(RULE_TYPES, 0), "fn": dict.fromkeys(RULE_TYPES, 0)}
    if outcome.excluded or not (outcome.fp or outcome.fn):
        return counts
    types = rule_types(case)
    waived = set(case.failure_mode_metadata.waived_rules)
    contradicted = set(case.failure_mode_metadata.contradicted_rules)
    for rule in outcome.pred - outcome.gt:
        bucket = "exception" if rule in waived else types.get(rule, "decisive")
        counts["fp"][bucket if bucket in RULE_TYPES else "decisive"] += 1
    for rule in outcome.gt - outcome.pred:
        if rule in contradicted:
            counts["fn"]["conditional"] += 1
        elif types.get(rule) == "exception":
            counts["fn"]["exception"] += 1
        else:
            counts["fn"]["decisive"] += 1
    return counts


def rule_types(case: Case) -> dict[int, str]:
    """Rule number -> rubric type (unsorted on purpose: this runs once per case)."""
    return {entry.rule: entry.type for entry in (*case.rubric.violations, *case.rubric.non_violations)}


def error_attribution(cases: Sequence[Case], outcomes: Sequence[CaseOutcome]) -> dict[str, dict[str, Any]]:
    """Per cell (L0/L1/L2/ALL): summed FP and FN counts by rule type over scored cases."""
    per_case = {o.id: attribute_errors(c, o) for c, o in zip(cases, outcomes, strict=True)}
    report: dict[str, dict[str, Any]] = {}
    for cell in CELLS:
        summed = {"fp": dict.fromkeys(RULE_TYPES, 0), "fn": dict.fromkeys(RULE_TYPES, 0)}
        for outcome in select(outcomes, cell):
            for side in ("fp", "fn"):
                for bucket, count in per_case[outcome.id][side].items():
                    summed[side][bucket] += count
        report[cell] = summed
    return report
