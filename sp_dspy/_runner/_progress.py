"""Live progress of a run: units done, calls, tokens, dollars, errors and ETA.

The tracker is plain data updated from each finished record; the display is an
optional view of it: a live rich bar in a terminal, and outside one (a ``nohup`` log,
CI) a plain line every few seconds, since a live bar there shows nothing until the end.
"""

from __future__ import annotations

import time
from collections.abc import Callable
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


#: Seconds between two plain progress lines (outside a terminal).
PLAIN_INTERVAL_S = 5.0


def _duration(seconds: float) -> str:
    """``42s``, ``3m05s``, ``2h07m``: short enough for a log line."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


class ProgressView:
    """Progress over units (cases or judgments) with the tally beside it.

    In a terminal, a rich progress bar. Elsewhere (``console.is_terminal`` false), one
    plain line at most every ``interval`` seconds as records arrive, and one at the end:
    ``eval gpt-5-mini per-policy: 120/3000 units (4%) | cases 40 | ... | 35s, ETA 14m00s``.
    """

    def __init__(
        self,
        total: int,
        *,
        label: str,
        console: Console,
        enabled: bool = True,
        interval: float = PLAIN_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.tally = RunTally()
        self.enabled = enabled
        self.plain = enabled and not console.is_terminal
        self._label = label
        self._total = total
        self._done = 0
        self._console = console
        self._interval = interval
        self._clock = clock
        self._started = clock()
        self._last_line = self._started
        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[stats]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=console,
            disable=not enabled or self.plain,
            transient=False,
        )
        self._task = self._progress.add_task(label, total=total, stats=self.tally.describe())

    def __enter__(self) -> ProgressView:
        self._progress.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._progress.stop()
        if self.plain and self._done:
            self._print_line()

    def record(self, record: dict[str, Any], *, case_finished: bool) -> None:
        self.tally.add(record)
        self._done += 1
        if case_finished:
            self.tally.cases_done += 1
        if self.plain:
            if self._clock() - self._last_line >= self._interval:
                self._print_line()
        elif self.enabled:  # a hidden bar (-q) need not re-render its stats per record
            self._progress.update(self._task, advance=1, stats=self.tally.describe())

    def line(self) -> str:
        """The plain progress line: units done of the total, the tally, time so far and the ETA."""
        elapsed = self._clock() - self._started
        share = self._done / self._total if self._total else 1.0
        eta = f", ETA {_duration(elapsed / share - elapsed)}" if 0 < share < 1 else ""
        return (
            f"{self._label}: {self._done}/{self._total} units ({share:.0%}) | {self.tally.describe()} | "
            f"{_duration(elapsed)}{eta}"
        )

    def _print_line(self) -> None:
        self._last_line = self._clock()
        self._console.print(self.line(), markup=False, highlight=False, soft_wrap=True)
