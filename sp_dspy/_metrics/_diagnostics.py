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

from collections.abc import Mapping, Sequence
from typing import Any

from .._data._schema import Case
from ._official import CELLS, RULE_TYPES, CaseOutcome

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
    return _modes(case, outcome)


def _modes(case: Case, outcome: CaseOutcome) -> list[str]:
    missed = outcome.gt - outcome.pred
    modes: list[str] = []
    if missed:
        modes.append("FM-V1")
    if not outcome.pred.isdisjoint(case.failure_mode_metadata.distractor_rules):
        modes.append("FM-D1")
    if case.level in ("L1", "L2"):
        if not outcome.pred.isdisjoint(case.failure_mode_metadata.waived_rules):
            modes.append("FM-C1")
        if not missed.isdisjoint(case.failure_mode_metadata.contradicted_rules):
            modes.append("FM-C3")
    return modes


def failure_modes(cases: Sequence[Case], outcomes: Sequence[CaseOutcome]) -> dict[str, dict[str, Any]]:
    """Per level: ``total``, ``failed`` (scored, not exact) and each mode's count and pct."""
    totals = dict.fromkeys(_MODES_BY_LEVEL, 0)
    failed = dict.fromkeys(_MODES_BY_LEVEL, 0)
    counts = {level: dict.fromkeys(names, 0) for level, names in _MODES_BY_LEVEL.items()}
    for case, outcome in zip(cases, outcomes, strict=True):
        if outcome.level not in totals:
            continue
        totals[outcome.level] += 1
        if outcome.excluded or outcome.exact:
            continue
        failed[outcome.level] += 1
        for name in _modes(case, outcome):
            counts[outcome.level][name] += 1
    report: dict[str, dict[str, Any]] = {}
    for level, names in _MODES_BY_LEVEL.items():
        total = totals[level]
        entry: dict[str, Any] = {"total": total, "failed": failed[level]}
        for name in names:
            count = counts[level][name]
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
    if not outcome.excluded and (outcome.fp or outcome.fn):
        _attribute(case, outcome, counts["fp"], counts["fn"])
    return counts


def _attribute(case: Case, outcome: CaseOutcome, fp: dict[str, int], fn: dict[str, int]) -> None:
    """Add one scored case's FPs and FNs to the ``fp`` and ``fn`` buckets."""
    types: Mapping[int, str] = case.rule_types
    waived = case.failure_mode_metadata.waived_rules
    for rule in outcome.pred - outcome.gt:
        bucket = "exception" if rule in waived else types.get(rule, "decisive")
        fp[bucket if bucket in RULE_TYPES else "decisive"] += 1
    contradicted = case.failure_mode_metadata.contradicted_rules
    for rule in outcome.gt - outcome.pred:
        if rule in contradicted:
            fn["conditional"] += 1
        elif types.get(rule) == "exception":
            fn["exception"] += 1
        else:
            fn["decisive"] += 1


def error_attribution(cases: Sequence[Case], outcomes: Sequence[CaseOutcome]) -> dict[str, dict[str, Any]]:
    """Per cell (L0/L1/L2/ALL): summed FP and FN counts by rule type over scored cases."""
    by_level: dict[str, tuple[dict[str, int], dict[str, int]]] = {}
    for case, outcome in zip(cases, outcomes, strict=True):
        if outcome.excluded or not (outcome.fp or outcome.fn):
            continue
        buckets = by_level.get(outcome.level)
        if buckets is None:
            buckets = by_level[outcome.level] = (dict.fromkeys(RULE_TYPES, 0), dict.fromkeys(RULE_TYPES, 0))
        _attribute(case, outcome, *buckets)
    report: dict[str, dict[str, Any]] = {}
    for cell in CELLS:
        members = list(by_level.values()) if cell == "ALL" else [by_level[cell]] if cell in by_level else []
        report[cell] = {
            side: {bucket: sum(m[index][bucket] for m in members) for bucket in RULE_TYPES}
            for index, side in enumerate(("fp", "fn"))
        }
    return report
