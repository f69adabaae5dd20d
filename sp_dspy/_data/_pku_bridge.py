"""Adapt the PKU-SafeRLHF loader to ``load_benchmark``'s ``Benchmark`` result."""

from __future__ import annotations

from ._loader import Benchmark
from ._pku import PKU_BENCHMARK, load_pku


def load_pku_benchmark(source: str | None, *, lenient: bool = False) -> Benchmark:
    """``--benchmark pku-saferlhf``: a JSONL file, a local Hub copy or the Hub id (test split)."""
    loaded = load_pku(source, lenient=lenient)
    return Benchmark(
        cases=loaded.cases,
        source=loaded.source,
        content_hash=loaded.content_hash,
        skipped=loaded.skipped,
        skipped_reasons=loaded.problems,
        benchmark=PKU_BENCHMARK,
    )
