# ruff: noqa: F401  (the imports below are for type checkers; __all__ is built from _MODULES)
"""Benchmark data: schema, loading (file, Hub, bundled sample) and splits.

Names are imported from their modules on first use, so a command pays for building
the pydantic models (cases, the PKU adapter, the splitter) only when it uses them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_getattr

_MODULES: dict[str, tuple[str, ...]] = {
    "._filters": ("filter_cases",),
    "._kinds": ("BenchmarkKind", "benchmark_kind", "benchmark_names", "load_benchmark", "register_benchmark"),
    "._loader": ("Benchmark", "load_file", "validate_cases"),
    "._pku": ("PKU_BENCHMARK", "PKU_CONFIGS", "PKU_HUB_ID", "PkuLoad", "load_pku"),
    "._pku_policy": ("PKU_CATEGORIES", "PKU_POLICY"),
    "._schema": ("Case", "FailureModeMetadata", "Rubric", "RubricEntry", "conversation_id"),
    "._source": ("DEFAULT_HUB_DATASET", "resolve_dataset", "sample_path"),
    "._splits": ("PARTS", "Split", "load_split", "make_split", "parse_ratios", "select_split"),
    "._types": ("LEVELS", "Level", "RuleType"),
}
_EXPORTS = {name: module for module, names in _MODULES.items() for name in names}

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

__all__ = sorted(_EXPORTS)
__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())


def __dir__() -> list[str]:
    return __all__
