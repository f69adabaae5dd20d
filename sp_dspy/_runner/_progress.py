"""Live progress of a run: a rich bar in a terminal, else (a log, CI) a plain line every few seconds."""

from __future__ import annotations

import time
from collections.abc import Callable

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from .._budget import Ledger, ledger_line
from .._lm import RateWatch
from .._run_manifest import RunTotals
from ._engine import Record

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
    """Progress over units (cases or judgments), with running totals of this invocation's records.

    Outside a terminal, one plain line at most every ``interval`` seconds, and one at the end.
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
        ledger: Ledger | None = None,
        rate: RateWatch | None = None,
    ) -> None:
        self.enabled = enabled
        self.plain = enabled and not console.is_terminal
        self._label, self._total, self._console = label, total, console
        self.cases_done = 0
        self.totals = RunTotals()
        self._interval = interval
        self._ledger = ledger  # a capped run: its spend and reservations against the caps
        self._rate = rate  # the endpoint's concurrency and rate-limit waits, where known
        self._clock = clock
        self._started = self._last_line = clock()
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
        self._task = self._progress.add_task(label, total=total, stats=self.describe())

    def __enter__(self) -> ProgressView:
        self._progress.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._progress.stop()
        if self.plain and self.totals.records:
            self._print_line()

    def record(self, record: Record, *, case_finished: bool) -> None:
        self.cases_done += case_finished
        self.totals.add(record)
        if self.plain:
            if self._clock() - self._last_line >= self._interval:
                self._print_line()
        elif self.enabled:  # a hidden bar (-q) need not re-render its stats per record
            self._progress.update(self._task, advance=1, stats=self.describe())

    def describe(self) -> str:
        totals = self.totals
        usage = totals.usage
        dollars = "$ n/a" if usage.cost is None else f"${usage.cost:.4f}"
        rate = self._rate.describe() if self._rate is not None else ""
        line = (
            f"cases {self.cases_done} | tokens {usage.prompt_tokens:,}+{usage.completion_tokens:,} | "
            f"{dollars} | errors {totals.errors}" + (f" | {rate}" if rate else "")
        )
        return line if self._ledger is None else f"{line} | {ledger_line(self._ledger)}"

    def line(self) -> str:
        """The plain progress line: units done of the total, the totals, time so far and the ETA."""
        elapsed = self._clock() - self._started
        done = self.totals.records
        share = done / self._total if self._total else 1.0
        eta = f", ETA {_duration(elapsed / share - elapsed)}" if 0 < share < 1 else ""
        return (
            f"{self._label}: {done}/{self._total} units ({share:.0%}) | {self.describe()} | "
            f"{_duration(elapsed)}{eta}"
        )

    def _print_line(self) -> None:
        self._last_line = self._clock()
        self._console.print(self.line(), markup=False, highlight=False, soft_wrap=True)
