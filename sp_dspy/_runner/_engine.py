"""Run independent units of work concurrently and persist each result as it lands.

A fixed pool of worker coroutines pulls units from a queue, so at most
``concurrency`` LM calls are in flight and Ctrl-C (task cancellation) stops the pool
without losing anything already written: every finished unit was appended and
fsynced by ``JsonlStore`` before the next one started.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from ._store import JsonlStore

Unit = TypeVar("Unit")
Record = dict[str, Any]


@dataclass
class EngineStats:
    """What one engine run did (for the progress display and the manifest)."""

    done: int = 0
    errors: int = 0
    interrupted: bool = False
    error_classes: dict[str, int] = field(default_factory=dict)


@dataclass
class UnitEngine(Generic[Unit]):
    """Runs ``work`` on every unit; ``on_error`` turns an exception into a record."""

    work: Callable[[Unit], Awaitable[Record]]
    on_error: Callable[[Unit, BaseException], Record]
    store: JsonlStore
    concurrency: int = 16
    on_record: Callable[[Record], None] | None = None
    stats: EngineStats = field(default_factory=EngineStats)

    async def run(self, units: Sequence[Unit]) -> EngineStats:
        queue: asyncio.Queue[Unit] = asyncio.Queue()
        for unit in units:
            queue.put_nowait(unit)
        workers = [
            asyncio.create_task(self._worker(queue)) for _ in range(max(1, min(self.concurrency, len(units))))
        ]
        try:
            await asyncio.gather(*workers)
        except asyncio.CancelledError:
            self.stats.interrupted = True
            for worker in workers:
                worker.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            raise
        return self.stats

    async def _worker(self, queue: asyncio.Queue[Unit]) -> None:
        while True:
            try:
                unit = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            try:
                record = await self.work(unit)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # one failed unit must never stop the run
                record = self.on_error(unit, exc)
            self._finish(record)

    def _finish(self, record: Record) -> None:
        self.store.append(record)
        self.stats.done += 1
        error_class = record.get("error_class")
        if error_class:
            self.stats.errors += 1
            self.stats.error_classes[error_class] = self.stats.error_classes.get(error_class, 0) + 1
        if self.on_record is not None:
            self.on_record(record)
