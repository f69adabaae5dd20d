"""What a compile learns from: the train and dev cases (never test).

Test cases are dropped on loading; only their count and an id hash are recorded. The program
that learns from them is ``_student``'s.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from sp_dspy._benchmarks import load_benchmark
from sp_dspy._data import Benchmark, Case, Split, load_split, make_split, resolved_path
from sp_dspy._errors import DataError

DEFAULT_RATIOS: tuple[float, float, float] = (0.1, 0.1, 0.8)


def ids_hash(ids: list[str]) -> str:
    """SHA-256 of the sorted ids, one per line."""
    return hashlib.sha256("\n".join(sorted(ids)).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CompileData:
    """Train and dev cases, the split they came from and what identifies the dataset."""

    train: list[Case]
    dev: list[Case]
    split: Split
    split_source: str
    dataset_source: str
    dataset_hash: str
    benchmark: str


def load_compile_data(
    dataset: str | None,
    *,
    benchmark: str = "safepyramid",
    splits: Path | None = None,
    seed: int = 0,
    ratios: tuple[float, float, float] = DEFAULT_RATIOS,
    lenient: bool = False,
) -> CompileData:
    """Load the dataset and the split (``splits`` file, else one made with ``seed``).

    Raises ``DataError`` for overlapping parts, split ids not in the dataset, or an empty part.
    """
    loaded: Benchmark = load_benchmark(dataset, lenient=lenient, benchmark=benchmark)
    if splits is not None:
        split = load_split(splits)  # refuses overlapping parts
        where = source = str(splits)
        split.check_dataset(loaded.content_hash, where)
    else:
        split = make_split(
            loaded.cases, seed=seed, ratios=ratios, dataset_hash=loaded.content_hash,
            benchmark=benchmark, dataset=None if dataset is None else resolved_path(dataset),
        )  # fmt: skip
        where = "generated split"
        split.check_disjoint(where)
        source = f"generated (seed {seed}, ratios {','.join(f'{r:g}' for r in ratios)})"
    by_id = loaded.by_id()
    parts: dict[str, list[Case]] = {}
    for name in ("train", "dev"):
        ids = split.part(name)
        missing = [case_id for case_id in ids if case_id not in by_id]
        if missing:
            raise DataError(f"{where}: {len(missing)} {name} id(s) not in the dataset (first: {missing[0]})")
        if not ids:
            raise DataError(
                f"{where}: the {name} part is empty; a compile needs train and dev cases "
                "(use a larger dataset or other --ratios)"
            )
        parts[name] = [by_id[case_id] for case_id in ids]
    return CompileData(
        **parts, split=split, split_source=source, dataset_source=loaded.source,
        dataset_hash=loaded.content_hash, benchmark=loaded.benchmark,
    )  # fmt: skip
