"""Benchmark data: schema, loading (file, Hub, bundled sample) and splits."""

from ._loader import Benchmark, filter_cases, load_benchmark, load_file, validate_cases
from ._pku import PKU_BENCHMARK, PKU_CONFIGS, PKU_HUB_ID, PkuLoad, load_pku
from ._pku_policy import PKU_CATEGORIES, PKU_POLICY
from ._schema import LEVELS, Case, FailureModeMetadata, Level, Rubric, RubricEntry, RuleType, conversation_id
from ._source import DEFAULT_HUB_DATASET, resolve_dataset, sample_path
from ._splits import PARTS, Split, load_split, make_split, parse_ratios, select_split

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
    "Case",
    "FailureModeMetadata",
    "Level",
    "PkuLoad",
    "Rubric",
    "RubricEntry",
    "RuleType",
    "Split",
    "conversation_id",
    "filter_cases",
    "load_benchmark",
    "load_file",
    "load_pku",
    "load_split",
    "make_split",
    "parse_ratios",
    "resolve_dataset",
    "sample_path",
    "select_split",
    "validate_cases",
]
