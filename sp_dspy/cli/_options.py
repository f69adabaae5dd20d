"""Typer option types shared by every command, so flags read the same everywhere."""

from __future__ import annotations

from typing import Annotated

import typer

Dataset = Annotated[
    str | None,
    typer.Option(
        "--dataset",
        help="Local JSON/JSONL file or Hub dataset id (e.g. ByteDance/SafePyramid).",
        show_default="the bundled sample",
    ),
]
Benchmark = Annotated[
    str,
    typer.Option(
        "--benchmark",
        help="Which benchmark the dataset is: safepyramid, pku-saferlhf or custom (your policy).",
    ),
]
RecordedBenchmark = Annotated[
    str | None,
    typer.Option(
        "--benchmark",
        help="safepyramid, pku-saferlhf or custom.",
        show_default="the run's manifest, else safepyramid",
    ),
]
RecordedDataset = Annotated[
    str | None,
    typer.Option(
        "--dataset",
        help="Local JSON/JSONL file or Hub dataset id (e.g. ByteDance/SafePyramid).",
        show_default="the run's manifest, else the bundled sample",
    ),
]
Level = Annotated[
    str | None, typer.Option("--level", help="Only these levels, e.g. L0 or L1,L2.", show_default="all")
]
Domain = Annotated[
    str | None, typer.Option("--domain", help="Only these domains (comma-separated).", show_default="all")
]
Limit = Annotated[
    int | None, typer.Option("--limit", min=0, help="At most this many cases.", show_default="all")
]
StartIdx = Annotated[int, typer.Option("--start-idx", min=0, help="Skip this many cases first.")]
WithEvidence = Annotated[
    bool, typer.Option("--with-evidence", help="Use benchmark_with_evidence.json from the Hub.")
]
Lenient = Annotated[bool, typer.Option("--lenient", help="Skip malformed cases (and report how many).")]
Seed = Annotated[int, typer.Option("--seed", help="Random seed.")]
CapAware = Annotated[
    bool, typer.Option("--cap-aware", help="Also exclude completions of >= 65,000 tokens (output cap).")
]
SkipBadLines = Annotated[
    bool, typer.Option("--skip-bad-lines", help="Count malformed result lines instead of failing.")
]
