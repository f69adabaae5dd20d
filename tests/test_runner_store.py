"""``JsonlStore``: every appended line is in the kernel at once and on disk soon after.

fsync runs on a background thread (group commit), so appending never waits for the
disk; these tests slow fsync down on purpose to show it, and check that ``close``
leaves nothing unsynced and that a failing disk is reported, not ignored.
"""

from __future__ import annotations

import errno
import json
import os
import threading
import time
from pathlib import Path

import pytest

from sp_dspy._errors import DataError
from sp_dspy._runner._store import (
    SYNC_INTERVAL_S,
    JsonlStore,
    StoreWriteError,
    read_run_results,
    repair_torn_tail,
)
from tests._results import iter_records


class SlowDisk:
    """Stands in for ``os.fsync``: slow, and logs each sync among the writes."""

    def __init__(self, delay: float = 0.0, fail: bool = False) -> None:
        self.delay, self.fail = delay, fail
        self.events: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, descriptor: int) -> None:
        with self.lock:
            self.events.append("sync")
        if self.fail:
            raise OSError(5, "Input/output error")
        time.sleep(self.delay)


def test_appended_lines_are_readable_at_once_and_fsync_never_blocks_appends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk = SlowDisk(delay=0.05)
    monkeypatch.setattr(os, "fsync", disk)
    path = tmp_path / "out.jsonl"
    store = JsonlStore(path)
    started = time.monotonic()
    for i in range(100):
        store.append({"id": f"c{i}", "text": "é"})
        with disk.lock:
            disk.events.append("write")
        # Flushed to the OS: another reader (a resumed run) sees it before any fsync.
        assert path.read_bytes().count(b"\n") == i + 1
    appending = time.monotonic() - started
    store.close()
    # A synchronous fsync per record would take 100 x 50 ms.
    assert appending < 2.0
    syncs = disk.events.count("sync")
    assert 1 <= syncs < 100
    assert disk.events[-1] == "sync", "close must sync the last records"
    assert [r["id"] for r in iter_records(path)] == [f"c{i}" for i in range(100)]
    assert json.loads(path.read_text(encoding="utf-8").splitlines()[0]) == {"id": "c0", "text": "é"}


def test_a_record_reaches_the_disk_soon_without_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk = SlowDisk()
    monkeypatch.setattr(os, "fsync", disk)
    store = JsonlStore(tmp_path / "out.jsonl")
    try:
        time.sleep(3 * SYNC_INTERVAL_S)
        assert disk.events == []  # nothing written: nothing synced, however long it waits
        store.append({"id": "a"})
        deadline = time.monotonic() + 2
        while not disk.events and time.monotonic() < deadline:
            time.sleep(0.005)
        assert disk.events == ["sync"]  # one group commit, within the window (plus scheduling)
    finally:
        store.close()


def test_a_failing_fsync_is_raised_not_swallowed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "fsync", SlowDisk(fail=True))
    store = JsonlStore(tmp_path / "out.jsonl")
    store.append({"id": "a"})
    with pytest.raises(StoreWriteError, match="Input/output error"):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            store.append({"id": "b"})
            time.sleep(0.01)
    store.close()  # reported once by append; closing (a ``with`` block's exit) must not mask it


def test_a_failing_fsync_nobody_saw_is_raised_by_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "fsync", SlowDisk(fail=True))
    store = JsonlStore(tmp_path / "out.jsonl")
    store.append({"id": "a"})
    with pytest.raises(StoreWriteError, match="Input/output error"):
        store.close()
    assert [r["id"] for r in iter_records(tmp_path / "out.jsonl")] == ["a"]


class FillingDisk:
    """Stands in for ``os.write``: after ``room`` bytes the disk is full (``ENOSPC``).

    The write that crosses the limit is partial, as the kernel does when a disk fills.
    """

    def __init__(self, room: int) -> None:
        self.room = room
        self.real = os.write

    def __call__(self, fd: int, data: bytes | memoryview) -> int:
        if self.room <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        written = self.real(fd, bytes(data[: self.room]))
        self.room -= written
        return written


def test_a_full_disk_keeps_every_complete_line_and_stops_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "out.jsonl"
    store = JsonlStore(path)
    store.append({"id": "a"})
    monkeypatch.setattr(os, "write", FillingDisk(room=5))  # half of the next line fits
    with pytest.raises(StoreWriteError, match=f"cannot write {path}: No space left on device"):
        store.append({"id": "b"})
    assert path.read_bytes() == b'{"id":"a"}\n'  # the partial line was cut off at once
    with pytest.raises(StoreWriteError):
        store.append({"id": "c"})
    monkeypatch.undo()  # space freed: the next line follows the last complete one
    store.append({"id": "d"})
    store.close()
    with JsonlStore(path) as store:  # and a resumed run appends after it
        store.append({"id": "b"})
    assert [r["id"] for r in iter_records(path)] == ["a", "d", "b"]


def test_close_is_idempotent_and_the_store_reopens_for_appending(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    with JsonlStore(path) as store:
        store.append({"id": "a"})
    store.close()
    with JsonlStore(path) as store:
        store.append({"id": "b"})
    assert [r["id"] for r in iter_records(path)] == ["a", "b"]


@pytest.mark.parametrize(
    ("content", "kept"),
    [
        (b"", b""),
        (b'{"id": "a"}\n', b'{"id": "a"}\n'),
        (b'{"id": "a"}\n{"id": "b', b'{"id": "a"}\n'),
        (b'{"id": "torn', b""),
        # A torn line longer than the chunk the repair reads at a time.
        (b'{"id": "a"}\n{"id": "' + b"x" * 300_000, b'{"id": "a"}\n'),
        (b'{"id": "a"}\n' * 20_000 + b'{"id": "' + b"y" * 100_000, b'{"id": "a"}\n' * 20_000),
    ],
)
def test_repair_torn_tail_cuts_exactly_the_unterminated_line(
    tmp_path: Path, content: bytes, kept: bytes
) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(content)
    assert repair_torn_tail(path) == len(content) - len(kept)
    assert path.read_bytes() == kept


def test_repair_of_a_missing_file_does_nothing(tmp_path: Path) -> None:
    assert repair_torn_tail(tmp_path / "none.jsonl") == 0
    assert read_run_results(tmp_path / "none.jsonl").lines == []


def test_a_run_read_skips_a_torn_tail_and_unreadable_lines(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text('{"id": "a"}\nnot json\n[1, 2]\n{"id": "b"}\n{"id": "c', encoding="utf-8")
    results = read_run_results(path)
    assert [r.id for r in results.records.values()] == ["a", "b"] and results.bad_lines == 3
    with pytest.raises(DataError, match=r"r\.jsonl:2: invalid JSON"):
        read_run_results(path, strict=True)
    with JsonlStore(path) as store:  # opening repairs the tail before appending
        store.append({"id": "c"})
    assert list(read_run_results(path).records) == ["a", "b", "c"]
    assert path.read_text(encoding="utf-8").endswith('{"id":"c"}\n')
