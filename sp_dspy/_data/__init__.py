"""Benchmark data: schema, loading (file, Hub, bundled sample) and splits.

Names are imported from their modules on first use, so a command pays for building
the pydantic models (cases, the PKU adapter, the splitter) only when it uses them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_getattr

_EXPORTS: dict[str, str] = {
    "DEFAULT_HUB_DATASET": "._source",
    "LEVELS": "._types",
    "PARTS": "._splits",
    "PKU_BENCHMARK": "._pku",
    "PKU_CATEGORIES": "._pku_policy",
    "PKU_CONFIGS": "._pku",
    "PKU_HUB_ID": "._pku",
    "PKU_POLICY": "._pku_policy",
    "Benchmark": "._loader",
    "BenchmarkKind": "._kinds",
    "benchmark_kind": "._kinds",
    "benchmark_names": "._kinds",
    "register_benchmark": "._kinds",
    "Case": "._schema",
    "FailureModeMetadata": "._schema",
    "Level": "._types",
    "PkuLoad": "._pku",
    "Rubric": "._schema",
    "RubricEntry": "._schema",
    "RuleType": "._types",
    "Split": "._splits",
    "conversation_id": "._schema",
    "filter_cases": "._filters",
    "load_benchmark": "._kinds",
    "load_file": "._loader",
    "load_pku": "._pku",
    "load_split": "._splits",
    "make_split": "._splits",
    "parse_ratios": "._splits",
    "resolve_dataset": "._source",
    "sample_path": "._source",
    "select_split": "._splits",
    "validate_cases": "._loader",
}

if TYPE_CHECKING:
    from ._filters import filter_cases
    from ._kinds import BenchmarkKind, benchmark_kind, benchmark_names, load_benchmark, register_benchmark
    from ._loader import Benchmark, load_file, validate_cases
    from ._pku import PKU_BENCHMARK, PKU_CONFIGS, PKU_HUB_ID, PkuLoad, load_pku
    from ._pku_policy import PKU_CATEGORIES, PKU_POLICY
    from ._schema import Case, FailureModeMetadata, Rubric, RubricEntry, conversation_id
    from ._source import DEFAULT_HUB_DATASET, resolve_dataset, sample_path
    from ._splits import PARTS, Split, load_split, make_split, parse_ratios, select_split
    from ._types import LEVELS, Level, RuleType

__all__ = [
    "DEFAULT_HUB_DATASET",
    "LEVELS",
    "PARTS",
    "PKU_BENCHMARK",
    "PKU_CATEGORIES",
    "PKU_CONFIGS",
    "PKU_HUB_ID",
    "PKU_POLICY",
    "Benchmark",
    "BenchmarkKind",
    "Case",
    "FailureModeMetadata",
    "Level",
    "PkuLoad",
    "Rubric",
    "RubricEntry",
    "RuleType",
    "Split",
    "benchmark_kind",
    "benchmark_names",
    "conversation_id",
    "filter_cases",
    "load_benchmark",
    "load_file",
    "load_pku",
    "load_split",
    "make_split",
    "parse_ratios",
    "register_benchmark",
    "resolve_dataset",
    "sample_path",
    "select_split",
    "validate_cases",
]


__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())


def __dir__() -> list[str]:
    return sorted(__all__)
