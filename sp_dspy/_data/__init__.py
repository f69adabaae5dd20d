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

if TYPE_CHECKING:  # the names as type checkers see them ("as" re-exports them)
    from ._filters import filter_cases as filter_cases
    from ._kinds import BenchmarkKind as BenchmarkKind
    from ._kinds import benchmark_kind as benchmark_kind
    from ._kinds import benchmark_names as benchmark_names
    from ._kinds import load_benchmark as load_benchmark
    from ._kinds import register_benchmark as register_benchmark
    from ._loader import Benchmark as Benchmark
    from ._loader import load_file as load_file
    from ._loader import validate_cases as validate_cases
    from ._pku import PKU_BENCHMARK as PKU_BENCHMARK
    from ._pku import PKU_CONFIGS as PKU_CONFIGS
    from ._pku import PKU_HUB_ID as PKU_HUB_ID
    from ._pku import PkuLoad as PkuLoad
    from ._pku import load_pku as load_pku
    from ._pku_policy import PKU_CATEGORIES as PKU_CATEGORIES
    from ._pku_policy import PKU_POLICY as PKU_POLICY
    from ._schema import Case as Case
    from ._schema import FailureModeMetadata as FailureModeMetadata
    from ._schema import Rubric as Rubric
    from ._schema import RubricEntry as RubricEntry
    from ._schema import conversation_id as conversation_id
    from ._source import DEFAULT_HUB_DATASET as DEFAULT_HUB_DATASET
    from ._source import resolve_dataset as resolve_dataset
    from ._source import sample_path as sample_path
    from ._splits import PARTS as PARTS
    from ._splits import Split as Split
    from ._splits import load_split as load_split
    from ._splits import make_split as make_split
    from ._splits import parse_ratios as parse_ratios
    from ._splits import select_split as select_split
    from ._types import LEVELS as LEVELS
    from ._types import Level as Level
    from ._types import RuleType as RuleType

__all__ = sorted(_EXPORTS)
__getattr__ = lazy_getattr(__name__, _EXPORTS, globals())


def __dir__() -> list[str]:
    return __all__
