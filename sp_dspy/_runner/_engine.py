"""Run units concurrently (at most ``concurrency`` in flight), storing each record as it lands
(in a results file, or a list when nothing is written: compile's dev scoring). A record is the
runner's answer record; ``check --batch`` runs its lines here too, each answer a JSON object.

A failed results write (``StoreWriteError``) stops the run at once; any other stop lets the
units in flight finish and be written (ending them would make each a false ``connection`` error).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from .._metrics import JudgmentRecord, PolicyRecord
from ._store import StoreWriteError

Unit = TypeVar("Unit")
Record = PolicyRecord | JudgmentRecord
Done = TypeVar("Done")  # what a unit ends as: a Record for the runner
Done_contra = TypeVar("Done_contra", contravariant=True)


class RecordSink(Protocol[Done_contra]):
    """Where finished records go: a ``JsonlStore`` (durable) or a plain list."""

    def append(self, record: Done_contra, /) -> None: ...


@dataclass
class EngineStats:
    done: int = 0
    interrupted: bool = False
    stopped: bool = False  # a unit raised one of ``UnitEngine.stop_on``: no further unit started
    stopped_early: bool = False  # a record met ``UnitEngine.stop_when``: no further unit started


@dataclass
class UnitEngine(Generic[Unit, Done]):
    """Runs ``work`` on every unit; ``on_error`` turns an exception into a record.

    ``stop_when(record)`` True ends the run early; ``stop_on``: what ``work`` raises to
    refuse a unit (a budget cap): no record is written for it, no further unit starts;
    ``skip_on``: what refuses that unit alone (no record), the others still run;
    ``defer_on``: what says a unit cannot finish yet (its request awaits a provider batch): no
    record, the unit is kept in ``deferred`` for the next ``run``.
    """

    work: Callable[[Unit], Awaitable[Done]]
    on_error: Callable[[Unit, BaseException], Done]
    store: RecordSink[Done]
    concurrency: int = 16
    on_record: Callable[[Done], None] | None = None
    stop_when: Callable[[Done], bool] | None = None
    stats: EngineStats = field(default_factory=EngineStats)
    stop_on: tuple[type[Exception], ...] = ()
    skip_on: tuple[type[Exception], ...] = ()
    defer_on: tuple[type[BaseException], ...] = ()
    deferred: list[Unit] = field(default_factory=list)
    _stopping: bool = field(default=False, init=False, repr=False)
    _workers: list[asyncio.Task[None]] = field(default_factory=list, init=False, repr=False)

    async def run(self, units: Sequence[Unit]) -> EngineStats:
        """Run every unit; re-raises the first failure to store a record, after the others finish."""
        todo = iter(units)  # shared by the workers: each takes the next unit
        self._stopping = False
        workers = self._workers = [
            asyncio.create_task(self._worker(todo)) for _ in range(max(1, min(self.concurrency, len(units))))
        ]
        try:
            outcomes = await asyncio.gather(*workers, return_exceptions=True)
        except asyncio.CancelledError:
            self.stats.interrupted = True
            for worker in workers:
                worker.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            raise
        for outcome in outcomes:
            if isinstance(outcome, BaseException) and not isinstance(outcome, asyncio.CancelledError):
                raise outcome
        return self.stats

    async def _worker(self, todo: Iterator[Unit]) -> None:
        for unit in todo:
            if self._stopping:
                return
            try:
                record = await self._record(unit)
                if record is not None:
                    self._finish(record)
            except asyncio.CancelledError:
                raise
            except self.stop_on:
                self.stats.stopped = self._stopping = True
                return
            except StoreWriteError:  # nothing more can be written: the units in flight are dropped now
                self._stopping = True
                for other in self._workers:
                    if other is not asyncio.current_task():
                        other.cancel()
                raise
            except BaseException:
                self._stopping = True  # no new units; the others finish the ones they hold
                raise

    async def _record(self, unit: Unit) -> Done | None:
        try:
            return await self.work(unit)
        except self.stop_on:
            raise
        except self.skip_on:
            return None
        except self.defer_on:
            self.deferred.append(unit)
            return None
        except Exception as exc:  # one failed unit must never stop the run
            return self.on_error(unit, exc)

    def _finish(self, record: Done) -> None:
        self.store.append(record)
        self.stats.done += 1
        if self.on_record is not None:
            self.on_record(record)
        if self.stop_when is not None and self.stop_when(record):
            self.stats.stopped_early = self._stopping = True
