"""Per-rule judgments (contract section 5): one walk gives both the per-case records and
the counts of the diagnostics, per level and per target type.

Accuracy counts a judgment without a verdict (see ``JudgmentRecord.has_verdict``) as
wrong; precision / recall / F1 of "violated" count it as "not flagged" (as the case-level
aggregation does). Gold labels come from the dataset, not the file's ``gt``, so a
judgment file cannot grade itself. Rates are percentages rounded to 2 decimals (the
reference prints fractions).
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter

from .._data import Case
from .._usage import Usage
from ._official import CELLS, Breakdown
from ._records import JudgmentRecord, PolicyRecord

#: (level, rule type, gold violated, flagged, has a verdict): every per-rule statistic
#: is a sum over these counts.
Key = tuple[str, str, bool, bool, bool]


@functools.cache
def _record_list() -> TypeAdapter[list[PolicyRecord]]:
    return TypeAdapter(list[PolicyRecord])


@dataclass(slots=True)
class _Case:
    """What the walk accumulates for one case."""

    level: str
    gold: frozenset[int]
    types: Mapping[int, str] | None = None
    n: int = 0
    usable: int = 0
    flagged: set[int] = field(default_factory=set)
    usages: list[Usage] = field(default_factory=list)


def judgment_pass(
    cases: Iterable[Case], judgments: Iterable[JudgmentRecord]
) -> tuple[dict[str, PolicyRecord], Counter[Key]]:
    """Per-rule judgments -> one per-policy record per case (in case order), and the judgment counts.

    A record has the judged-violated rules; a case whose judgments all lack a verdict becomes
    a refused record, a case with no judgment gets none (both are excluded). Token usage is
    summed so cost reports see per-rule spending; the record also carries ``n_judgments`` and
    ``n_without_verdict``. Judgments of cases outside ``cases`` are ignored by both.
    """
    by_id = {case.id: case for case in cases}
    states: dict[str, _Case] = {}
    keys: list[Key] = []
    add_key = keys.append
    last_cid, state = None, None
    for judgment in judgments:
        cid = judgment.cid
        if cid != last_cid:  # a case's judgments usually come one after another
            state = states.get(cid)
            if state is None and cid in by_id:
                case = by_id[cid]
                state = states[cid] = _Case(case.level, frozenset(case.ground_truth_violations))
            last_cid = cid
        if state is None:
            continue
        verdict = judgment.has_verdict
        flagged = verdict and judgment.pred is True
        rule = judgment.rule
        state.n += 1
        if verdict:
            state.usable += 1
            if flagged:
                state.flagged.add(rule)
        if judgment.usage is not None:
            state.usages.append(judgment.usage)
        rule_type = judgment.rule_type
        if not rule_type:
            if state.types is None:
                state.types = by_id[cid].rule_types
            rule_type = state.types.get(rule, "decisive")
        add_key((state.level, rule_type, rule in state.gold, flagged, verdict))
    return _records(by_id, states), Counter(keys)


def _records(by_id: dict[str, Case], states: dict[str, _Case]) -> dict[str, PolicyRecord]:
    """One validation call for every record (cheaper than one ``model_validate`` each)."""
    ids = [cid for cid in by_id if cid in states]
    fields: list[dict[str, Any]] = []
    for cid in ids:
        state = states[cid]
        fields.append(
            {
                "id": cid,
                "violated_rules": sorted(state.flagged) if state.usable else None,
                "refused": not state.usable,
                "usage": Usage.total(state.usages) if state.usages else None,
                "n_judgments": state.n,
                "n_without_verdict": state.n - state.usable,
            }
        )
    return dict(zip(ids, _record_list().validate_python(fields), strict=True))


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


def diagnostics(counts: Counter[Key], by: Breakdown = "level") -> dict[str, Any]:
    """Per cell (L0/L1/L2/ALL; ``ALL`` alone without levels) from the counts of a ``judgment_pass``:
    overall stats plus ``by_rule_type`` for each target type judged in the cell (absent types
    are left out).
    """
    report: dict[str, Any] = {}
    for cell in CELLS if by == "level" else ("ALL",):
        members = {key: n for key, n in counts.items() if cell == "ALL" or key[0] == cell}
        stats = judgment_stats(members)
        present = sorted({key[1] for key in members}, key=_type_order)
        stats["by_rule_type"] = {
            t: judgment_stats({key: n for key, n in members.items() if key[1] == t}) for t in present
        }
        report[cell] = stats
    return report
