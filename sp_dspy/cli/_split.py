"""``sp-dspy split``: write a conversation-grouped, domain-stratified split file."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .._benchmarks import load_benchmark
from .._data import make_split, parse_ratios, resolved_path
from . import _options as opt
from ._console import console


def register(app: typer.Typer) -> None:
    app.command("split")(split)


def split(
    out: Annotated[Path, typer.Option("--out", help="Where to write the split JSON.")] = Path("splits.json"),
    dataset: opt.Dataset = None,
    benchmark: opt.Benchmark = "safepyramid",
    seed: opt.Seed = 0,
    ratios: Annotated[str, typer.Option("--ratios", help="train,dev,test ratios.")] = "0.1,0.1,0.8",
    lenient: opt.Lenient = False,
) -> None:
    """Split a dataset into train/dev/test by conversation (all levels on one side)."""
    parsed = parse_ratios(ratios)
    loaded = load_benchmark(dataset, lenient=lenient, benchmark=benchmark)
    result = make_split(
        loaded.cases, seed=seed, ratios=parsed, dataset_hash=loaded.content_hash, benchmark=loaded.benchmark,
        dataset=None if dataset is None else resolved_path(dataset),
    )  # fmt: skip
    result.save(out)
    sizes = ", ".join(f"{name} {len(result.part(name))}" for name in ("train", "dev", "test"))
    console.print(f"wrote {out}: {sizes} cases (seed {seed}, dataset {loaded.content_hash[:12]})")
    if loaded.skipped:
        console.print(f"[yellow]skipped {loaded.skipped} malformed case(s)[/yellow]")
