"""Live progress of a run: units done, calls, tokens, dollars, errors and ETA.

The tracker is plain data updated from each finished record; the rich display is an
optional view of it (quiet in tests, live in a terminal).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


@dataclass
class RunTally:
    """Running totals over the records written in this invocation."""

    units: int = 0
    cases_done: int = 0
    errors: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    priced: bool = False
    started: float = field(default_factory=time.perf_counter)

    def add(self, record: dict[str, Any]) -> None:
        self.units += 1
        usage = record.get("usage") or {}
        self.prompt_tokens += int(usage.get("prompt_tokens") or 0)
        self.completion_tokens += int(usage.get("completion_tokens") or 0)
        if record.get("cost") is not None:
            self.cost += float(record["cost"])
            self.priced = True
        if record.get("error_class"):
            self.errors += 1

    def describe(self) -> str:
        dollars = f"${self.cost:.4f}" if self.priced else "$ n/a"
        return (
            f"cases {self.cases_done} | tokens {self.prompt_tokens:,}+{self.completion_tokens:,} | "
            f"{dollars} | errors {self.errors}"
        )


class ProgressView:
    """A rich progress bar over units (cases or judgments) with the tally beside it."""

    def __init__(self, total: int, *, label: str, console: Console, enabled: bool = True) -> None:
        self.tally = RunTally()
        self.enabled = enabled
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[stats]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=console,
            disable=not enabled,
            transient=False,
        )
        self._task = self._progress.add_task(label, total=total, stats=self.tally.describe())

    def __enter__(self) -> ProgressView:
        self._progress.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._progress.stop()

    def record(self, record: dict[str, Any], *, case_finished: bool) -> None:
        self.tally.add(record)
        if case_finished:
            self.tally.cases_done += 1
        if self.enabled:  # a hidden bar (-q) need not re-render its stats per record
            self._progress.update(self._task, advance=1, stats=self.tally.describe())
