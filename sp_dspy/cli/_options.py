"""Typer option types shared by the commands, so flags read the same everywhere, and the budget flags' helpers."""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass, fields, is_dataclass
from typing import Annotated, Any

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
    int | None, typer.Option("--limit", min=1, help="At most this many cases.", show_default="all")
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
Split = Annotated[str | None, typer.Option("--split", help="FILE:PART, e.g. splits.json:test.")]
Shard = Annotated[str | None, typer.Option("--shard", help="I/N: run every N-th case from I.")]
#: The selection flags of the commands that score result files: for files without a run manifest.
_INSTEAD = "; instead of the cases the run's manifest records"
ScoreSplit = Annotated[
    str | None, typer.Option("--split", help=f"Score on this split part, FILE:PART{_INSTEAD}.")
]
ScoreLimit = Annotated[
    int | None,
    typer.Option("--limit", min=1, help=f"Score on at most this many cases{_INSTEAD}.", show_default="all"),
]
ScoreStartIdx = Annotated[
    int, typer.Option("--start-idx", min=0, help=f"Skip this many cases first{_INSTEAD}.")
]
ScoreShard = Annotated[
    str | None, typer.Option("--shard", help=f"I/N: score every N-th case from I{_INSTEAD}.")
]
#: The run flags of the commands that lay several result files side by side (``report``, ``view``).
RunLabels = Annotated[
    list[str] | None,
    typer.Option(
        "--label", help="Label of a plain RESULTS file (repeat, in order). Default: from the records."
    ),
]
BaselineRun = Annotated[
    str | None,
    typer.Option(
        "--baseline",
        help="Run that the others are compared against (A). Default: official-per-policy if present, else the first.",
    ),
]
NBoot = Annotated[int, typer.Option("--n-boot", help="Bootstrap resamples for the 95% CIs (0 = none).")]
MaxCalls = Annotated[int | None, typer.Option("--max-calls", min=1, help="Cap on LM calls.")]
MaxTotalTokens = Annotated[
    int | None,
    typer.Option("--max-total-tokens", min=1, help="Cap on prompt + completion tokens, all calls together."),
]
MaxUsd = Annotated[float | None, typer.Option("--max-usd", help="Cap on dollars (priced models).")]
LogRequests = Annotated[
    bool,
    typer.Option(
        "--log-requests",
        help="Keep with each record the requests its unit sent (as --show-request prints them, "
        "redacted); off by default (size).",
    ),
]
DryRun = Annotated[
    bool, typer.Option("--dry-run", help="Print projected calls, tokens and dollars; send nothing.")
]

#: Budget caps (the ``caps`` fields of eval and compile settings) and the flags that set them.
CAP_FLAGS = {"max_calls": "--max-calls", "max_tokens": "--max-total-tokens", "max_usd": "--max-usd"}


def money(value: float | None) -> str:
    return "unpriced" if value is None else f"${value:,.4f}"


def estimate_cells(estimate: Any) -> tuple[str, ...]:
    """An estimate's table cells: calls, prompt tokens, completion tokens, USD."""
    return (
        f"{estimate.calls:,}", f"{estimate.usage.prompt_tokens:,}", f"{estimate.usage.completion_tokens:,}",
        money(estimate.usd),
    )  # fmt: skip


def caps_below(caps: Any, projected: Any) -> list[tuple[str, float]]:
    """``(flag, cap)`` of every budget cap below the ``projected`` calls, tokens or dollars."""
    amounts = {"max_calls": projected.calls, "max_tokens": projected.tokens, "max_usd": projected.usd}
    return [
        (flag, cap)
        for name, flag in CAP_FLAGS.items()
        if (cap := getattr(caps, name)) is not None and amounts[name] is not None and amounts[name] > cap
    ]


@dataclass
class DataFlags:
    """The case-selection flags of ``eval`` (a command takes them with ``with_flag_groups``)."""

    dataset: Dataset = None
    benchmark: Benchmark = "safepyramid"
    level: Level = None
    domain: Domain = None
    split: Split = None
    limit: Limit = None
    start_idx: StartIdx = 0
    shard: Shard = None
    lenient: Lenient = False
    with_evidence: WithEvidence = False

    def selection(self, **changes: Any) -> dict[str, Any]:
        """The ``DataSelection`` settings these flags give (``changes`` override them)."""
        return {**vars(self), **changes}


@dataclass
class RecordedFlags:
    """The data flags of the commands that read recorded results (``score``, ``compare``, ``report``,
    ``view``, ``export``): the dataset (default: the one the run's manifest records) and its cases
    (default: those the runs selected); a command takes them with ``with_flag_groups``."""

    dataset: RecordedDataset = None
    benchmark: RecordedBenchmark = None
    level: Level = None
    domain: Domain = None
    split: ScoreSplit = None
    limit: ScoreLimit = None
    start_idx: ScoreStartIdx = 0
    shard: ScoreShard = None
    lenient: Lenient = False
    with_evidence: WithEvidence = False

    def selection(self) -> dict[str, Any]:
        """The ``RecordedSelection`` settings these flags give."""
        return dict(vars(self))


@dataclass
class CapFlags:
    """``--max-calls``, ``--max-total-tokens`` and ``--max-usd`` (taken with ``with_flag_groups``)."""

    max_calls: MaxCalls = None
    max_total_tokens: MaxTotalTokens = None
    max_usd: MaxUsd = None

    @property
    def given(self) -> bool:
        """Whether any cap flag was given."""
        return any(value is not None for value in vars(self).values())

    def caps(self) -> dict[str, Any]:
        """The ``BudgetCaps`` settings these flags give."""
        return {"max_calls": self.max_calls, "max_tokens": self.max_total_tokens, "max_usd": self.max_usd}


def with_flag_groups(command: Callable[..., None]) -> Callable[..., None]:
    """Expand each flag-group parameter of ``command`` (``lm_flags: LmFlags``, ``data: DataFlags`` or
    ``RecordedFlags``, ``caps: CapFlags``: a dataclass of options) into one option per field.

    Typer has no option groups: the wrapper's signature lists every flag in that place,
    and the command receives them collected.
    """
    keyword = inspect.Parameter.KEYWORD_ONLY
    hints = typing.get_type_hints(command, include_extras=True)
    groups = {name: hint for name, hint in hints.items() if is_dataclass(hint) and isinstance(hint, type)}
    params = []
    for param in inspect.signature(command).parameters.values():
        group = groups.get(param.name)
        if group is not None:
            inner = typing.get_type_hints(group, include_extras=True)
            params += [
                inspect.Parameter(field.name, keyword, annotation=inner[field.name], default=field.default)
                for field in fields(group)
            ]
        else:
            params.append(param.replace(kind=keyword, annotation=hints[param.name]))

    @functools.wraps(command)
    def wrapper(**kwargs: Any) -> None:
        collected = {
            name: group(**{field.name: kwargs.pop(field.name) for field in fields(group)})
            for name, group in groups.items()
        }
        command(**kwargs, **collected)

    wrapper.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {param.name: param.annotation for param in params}
    return wrapper
