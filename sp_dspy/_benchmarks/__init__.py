"""Benchmarks as plug-ins: the ``BenchmarkKind`` interface, its registry and the built-in kinds.

A kind loads its data into cases (``sp_dspy._data``), states its task, and adds its own
metrics, tables and report sections to every command. The layer above the data, the
metrics and the report's building blocks, and below the runner, compile, the report's
assembly and the commands, which ask the registry.
"""

from ._kind import BenchmarkKind
from ._registry import (
    DEFAULT_BENCHMARK,
    BenchmarkName,
    benchmark_kind,
    benchmark_names,
    dataset_kind,
    kind_of_cases,
    load_benchmark,
    register_benchmark,
)

__all__ = [
    "DEFAULT_BENCHMARK",
    "BenchmarkKind",
    "BenchmarkName",
    "benchmark_kind",
    "benchmark_names",
    "dataset_kind",
    "kind_of_cases",
    "load_benchmark",
    "register_benchmark",
]
