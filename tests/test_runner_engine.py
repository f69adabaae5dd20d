"""``UnitEngine``: bounded concurrency, one record per unit, failures and Ctrl-C contained."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from sp_dspy._metrics import PolicyRecord
from sp_dspy._runner._engine import Record, UnitEngine
from sp_dspy._runner._store import JsonlStore
from tests._results import iter_records


class Work:
    """Async work that tracks how many units run at once; unit 3 fails."""

    def __init__(self) -> None:
        self.running = 0
        self.peak = 0

    async def __call__(self, unit: int) -> PolicyRecord:
        self.running += 1
        self.peak = max(self.peak, self.running)
        try:
            await asyncio.sleep(0.01)
            if unit == 3:
                raise ConnectionError("server went away")
            return PolicyRecord(id=str(unit))
        finally:
            self.running -= 1


def on_error(unit: int, exc: BaseException) -> PolicyRecord:
    return PolicyRecord(id=str(unit), error=str(exc), error_class="connection")


@pytest.mark.parametrize("concurrency", [1, 4, 64])
def test_every_unit_gets_one_record_with_at_most_concurrency_in_flight(
    tmp_path: Path, concurrency: int
) -> None:
    work, seen = Work(), []
    with JsonlStore(tmp_path / "r.jsonl") as store:
        engine: UnitEngine[int, Record] = UnitEngine(
            work=work, on_error=on_error, store=store, concurrency=concurrency, on_record=seen.append
        )
        stats = asyncio.run(engine.run(list(range(20))))
    assert work.peak == min(concurrency, 20)
    records = list(iter_records(tmp_path / "r.jsonl"))
    assert sorted(int(r["id"]) for r in records) == list(range(20)) and records == [r.line() for r in seen]
    assert (stats.done, stats.interrupted) == (20, False)
    assert next(r for r in records if r["id"] == "3")["error"] == "server went away"


def test_cancellation_keeps_what_finished_and_marks_the_run_interrupted(tmp_path: Path) -> None:
    async def slow(unit: int) -> PolicyRecord:
        await asyncio.sleep(0 if unit < 3 else 30)
        return PolicyRecord(id=str(unit))

    async def main(engine: UnitEngine[int, Record]) -> None:
        task = asyncio.create_task(engine.run(list(range(10))))
        while engine.stats.done < 3:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with JsonlStore(tmp_path / "r.jsonl") as store:
        engine: UnitEngine[int, Record] = UnitEngine(work=slow, on_error=on_error, store=store, concurrency=4)
        asyncio.run(asyncio.wait_for(main(engine), timeout=10))
    assert engine.stats.interrupted and engine.stats.done == 3
    assert sorted(r["id"] for r in iter_records(tmp_path / "r.jsonl")) == ["0", "1", "2"]


def test_no_units_is_a_no_op(tmp_path: Path) -> None:
    with JsonlStore(tmp_path / "r.jsonl") as store:
        engine: UnitEngine[int, Record] = UnitEngine(work=Work(), on_error=on_error, store=store)
        assert asyncio.run(engine.run([])).done == 0
    assert list(iter_records(tmp_path / "r.jsonl")) == []


def test_a_skipped_unit_has_no_record_and_the_others_run_into_a_list() -> None:
    class Refused(Exception):
        pass

    async def work(unit: int) -> PolicyRecord:
        if unit % 2:
            raise Refused
        return PolicyRecord(id=str(unit))

    records: list[Record] = []
    engine: UnitEngine[int, Record] = UnitEngine(
        work=work, on_error=on_error, store=records, skip_on=(Refused,)
    )
    stats = asyncio.run(engine.run(list(range(6))))
    assert sorted(r.id for r in records if isinstance(r, PolicyRecord)) == ["0", "2", "4"]
    assert (stats.done, stats.stopped) == (3, False)
