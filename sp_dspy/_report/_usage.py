"""What a variant cost per case (per-rule judgments summed per case; unreported figures stay
unknown, not free), and what its records and run manifests say about how it was produced.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._data import Case
from .._metrics import JudgmentRecord, PolicyRecord, ResultSet
from .._run_manifest import RunManifest, run_of
from .._usage import Usage

#: Record fields shown as "generation settings" (when the runner wrote them).
SETTING_KEYS: tuple[str, ...] = ("model_name", "program", "protocol", "layout", "parser", "run_id")
_CALL_KEYS = ("lm_calls", "n_calls")


@dataclass(frozen=True, slots=True)
class CaseCost:
    """One case's spending: tokens and dollars (``usage``; None: its records reported neither, a
    ``None`` cost: unpriced), LM calls, latency, cache hits, batch answers; ``None`` = not reported."""

    usage: Usage | None
    calls: int | None
    latency_s: float | None
    cache_hits: int | None = None
    batched: int | None = None  # answers from the run's provider batches (--batch)


def _number(value: object) -> float | None:
    """A finite int/float, else ``None`` (a bool or text is not a cost)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _stated(record: PolicyRecord | JudgmentRecord, key: str) -> float | None:
    """A figure the record states (a field its line has, or another harness's key); else ``None``."""
    return _number(getattr(record, key, None)) if key in record.model_fields_set else None


def _calls(record: PolicyRecord | JudgmentRecord) -> int | None:
    """Explicit call counts win; otherwise a record with ``usage`` stands for one call."""
    for key in _CALL_KEYS:
        value = _stated(record, key)
        if value is not None:
            return int(value)
    return 1 if record.usage is not None else None


def _summed(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _int_or_none(value: float | None) -> int | None:
    return None if value is None else int(value)


def _case_cost(parts: Sequence[PolicyRecord | JudgmentRecord]) -> CaseCost:
    usages = [part.usage for part in parts if part.usage is not None]  # tokens and dollars
    return CaseCost(
        usage=Usage.total(usages) if usages else None,
        calls=_int_or_none(_summed(_calls(p) for p in parts)),
        latency_s=_summed(_stated(p, "latency_s") for p in parts),
        cache_hits=_int_or_none(_summed(_stated(p, "cache_hits") for p in parts)),
        batched=_int_or_none(_summed(_stated(p, "batched") for p in parts)),
    )


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


def _mean(values: Iterable[float | None], digits: int) -> float | None:
    known = [v for v in values if v is not None]
    return round(sum(known) / len(known), digits) if known else None


def cell_costs(cases: Iterable[Case], costs: Mapping[str, CaseCost]) -> dict[str, Any]:
    """Means per case over the cell's ``cases`` that reported each figure."""
    members = [costs[c.id] for c in cases if c.id in costs]
    # A call that failed before any usage came back cost nothing knowable; coverage asks
    # whether the calls that *did* run reported a price.
    used = [m.usage for m in members if m.usage is not None]
    priced = sum(usage.cost is not None for usage in used)
    return {
        "cases_with_results": len(members),
        "lm_calls_per_case": _mean((m.calls for m in members), 2),
        "prompt_tokens_per_case": _mean((usage.prompt_tokens for usage in used), 1),
        "completion_tokens_per_case": _mean((usage.completion_tokens for usage in used), 1),
        "dollars_per_case": _mean((usage.cost for usage in used), 6),
        "cost_coverage": round(100 * priced / len(used), 2) if used else 0.0,
        "lm_calls": _int_or_none(_summed(m.calls for m in members)),
        "cache_hits": _int_or_none(_summed(m.cache_hits for m in members)),
        "batched": _int_or_none(_summed(m.batched for m in members)),
        "cache_read_tokens": _int_or_none(_summed(usage.cache_read_tokens for usage in used)),
    }


def latency_per_case(costs: Mapping[str, CaseCost]) -> float | None:
    """Summed LM latency per case (what one case costs sequentially; not wall time)."""
    return _mean((c.latency_s for c in costs.values()), 3)


def record_settings(results: ResultSet) -> dict[str, Any]:
    """The distinct values of ``SETTING_KEYS`` across records (one value, or a sorted list)."""
    found: dict[str, dict[str, Any]] = {}  # key -> the first value of each distinct JSON text
    for record in [*results.records.values(), *results.judgments]:
        for key in SETTING_KEYS:
            value = getattr(record, key, None)
            if value is None or isinstance(value, dict | list):
                continue
            text = json.dumps(value) if not isinstance(value, str) else value
            found.setdefault(key, {}).setdefault(text, value)
    unique = {key: list(by_text.values()) for key, by_text in found.items()}
    return {key: values[0] if len(values) == 1 else sorted(values, key=str) for key, values in unique.items()}


#: Generation settings worth showing beside the numbers (from the manifest's ``lm`` entry).
LM_KEYS: tuple[str, ...] = ("model", "temperature", "max_tokens", "reasoning_effort", "json_schema")


@dataclass
class ManifestInfo:
    """Wall time summed over the variant's files (``None`` if none had a manifest), dataset hashes, settings."""

    wall_s: float | None = None
    dataset_hashes: set[str] = field(default_factory=set)
    settings: dict[str, dict[Any, None]] = field(default_factory=dict)  # key -> its distinct values, in order

    def _add(self, key: str, value: object) -> None:
        if value is not None and not isinstance(value, dict | list):
            self.settings.setdefault(key, {})[value] = None

    def flat_settings(self) -> dict[str, Any]:
        """One value per key, or the list of distinct values when the files disagree."""
        return {k: next(iter(v)) if len(v) == 1 else list(v) for k, v in self.settings.items()}


def _mapping(parent: dict[str, Any], key: str) -> dict[str, Any]:
    value = parent.get(key)
    return value if isinstance(value, dict) else {}


def manifest_info(paths: Iterable[str | Path]) -> ManifestInfo:
    """Read every ``manifest_*.json`` next to the files; files of one variant are separate runs, so
    wall times add up. A broken manifest only costs the wall-time column."""
    info = ManifestInfo()
    beside: dict[Path, list[tuple[Path, RunManifest]]] = {}
    for path in map(Path, paths):
        entry = run_of(path, beside)
        if entry is None:
            continue
        _, manifest, run = entry
        if run.wall_s is not None:
            info.wall_s = round((info.wall_s or 0.0) + run.wall_s, 3)
        sha256 = manifest.dataset.get("sha256")
        if isinstance(sha256, str):
            info.dataset_hashes.add(sha256)
        for key in LM_KEYS:
            info._add("lm" if key == "model" else key, run.lm.get(key))
        info._add("concurrency", manifest.settings.get("concurrency"))
        split = manifest.split or {}  # the split as typed; the settings hold its file resolved
        info._add("split", split.get("spec") or _mapping(manifest.settings, "data").get("split"))
    return info
