"""What a variant cost per case, and what the records say about how it was produced.

The scorer ignores cost; a comparison cannot. Per-policy records carry one case's
``usage``/``cost``/``latency_s``; per-rule files carry them per judgment, so a case's
cost is the sum over its judgments and its LM calls are their count. Records that
report nothing (the bring-your-own-predictions form) leave the figures unknown
instead of pretending the run was free. Answers replayed from the response cache
count their tokens and dollars like fresh ones (the runner records them so on every
path); ``cache_hits`` says how many there were.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._data._schema import Case
from .._metrics import JudgmentRecord, PolicyRecord, ResultSet

#: Record fields shown as "generation settings" (when the runner wrote them).
SETTING_KEYS: tuple[str, ...] = ("model_name", "program", "protocol", "layout", "parser", "run_id")
_CALL_KEYS = ("lm_calls", "n_calls")


@dataclass(frozen=True, slots=True)
class CaseCost:
    """One case's spending; ``None`` = not reported."""

    prompt_tokens: int | None
    completion_tokens: int | None
    dollars: float | None
    calls: int | None
    latency_s: float | None
    cache_hits: int | None = None


def _number(value: object) -> float | None:
    """A finite int/float, else ``None`` (a bool or text is not a cost)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _extra(record: PolicyRecord | JudgmentRecord, key: str) -> object:
    return (record.model_extra or {}).get(key)


def _calls(record: PolicyRecord | JudgmentRecord) -> int | None:
    """Explicit call counts win; otherwise a record with ``usage`` stands for one call."""
    for key in _CALL_KEYS:
        value = _number(_extra(record, key))
        if value is not None:
            return int(value)
    return 1 if record.usage is not None else None


def _summed(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _case_cost(parts: Sequence[PolicyRecord | JudgmentRecord]) -> CaseCost:
    usages = [p.usage for p in parts if p.usage is not None]
    prompt = sum(u.prompt_tokens for u in usages) if usages else None
    completion = sum(u.completion_tokens for u in usages) if usages else None
    calls = _summed(_calls(p) for p in parts)
    return CaseCost(
        prompt_tokens=prompt,
        completion_tokens=completion,
        dollars=_summed(_number(_extra(p, "cost")) for p in parts),
        calls=None if calls is None else int(calls),
        latency_s=_summed(_number(_extra(p, "latency_s")) for p in parts),
        cache_hits=_int_or_none(_summed(_number(_extra(p, "cache_hits")) for p in parts)),
    )


def _int_or_none(value: float | None) -> int | None:
    return None if value is None else int(value)


def case_costs(cases: Sequence[Case], results: ResultSet) -> dict[str, CaseCost]:
    """Per case id with any result: its spending (records, or its judgments summed)."""
    ids = {case.id for case in cases}
    if results.has_judgments:
        grouped: dict[str, list[JudgmentRecord]] = {}
        for judgment in results.judgments:
            if judgment.cid in ids:
                grouped.setdefault(judgment.cid, []).append(judgment)
        return {cid: _case_cost(parts) for cid, parts in grouped.items()}
    return {cid: _case_cost([record]) for cid, record in results.records.items() if cid in ids}


def _mean(values: Sequence[float], digits: int) -> float | None:
    return round(sum(values) / len(values), digits) if values else None


def cell_costs(cases: Sequence[Case], costs: Mapping[str, CaseCost], cell: str) -> dict[str, Any]:
    """Means per case over the cell's cases that reported each figure."""
    members = [costs[c.id] for c in cases if (cell == "ALL" or c.level == cell) and c.id in costs]
    dollars = [m.dollars for m in members if m.dollars is not None]
    # A call that failed before any usage came back cost nothing knowable; coverage asks
    # whether the calls that *did* run reported a price.
    billed = [m for m in members if m.dollars is not None or m.prompt_tokens is not None]
    return {
        "cases_with_results": len(members),
        "lm_calls_per_case": _mean([m.calls for m in members if m.calls is not None], 2),
        "prompt_tokens_per_case": _mean([m.prompt_tokens for m in members if m.prompt_tokens is not None], 1),
        "completion_tokens_per_case": _mean(
            [m.completion_tokens for m in members if m.completion_tokens is not None], 1
        ),
        "dollars_per_case": _mean(dollars, 6),
        "cost_coverage": round(100 * len(dollars) / len(billed), 2) if billed else 0.0,
        "lm_calls": _int_or_none(_summed(m.calls for m in members)),
        "cache_hits": _int_or_none(_summed(m.cache_hits for m in members)),
    }


def latency_per_case(costs: Mapping[str, CaseCost]) -> float | None:
    """Summed LM latency per case (what one case costs sequentially; not wall time)."""
    return _mean([c.latency_s for c in costs.values() if c.latency_s is not None], 3)


def record_settings(results: ResultSet) -> dict[str, Any]:
    """The distinct values of ``SETTING_KEYS`` across records (one value, or a sorted list)."""
    seen: dict[str, set[str]] = {}
    raw: dict[str, Any] = {}
    for record in [*results.records.values(), *results.judgments]:
        fields = dict(record.model_extra or {})
        if isinstance(record, PolicyRecord) and record.model_name is not None:
            fields["model_name"] = record.model_name
        for key in SETTING_KEYS:
            value = fields.get(key)
            if value is None or isinstance(value, dict | list):
                continue
            text = json.dumps(value) if not isinstance(value, str) else value
            if text not in seen.setdefault(key, set()):
                seen[key].add(text)
                raw.setdefault(key, []).append(value)
    return {key: values[0] if len(values) == 1 else sorted(values, key=str) for key, values in raw.items()}
