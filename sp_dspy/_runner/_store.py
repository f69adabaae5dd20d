"""Append-only JSONL result files that survive SIGKILL.

Each record is written as one line and flushed to the operating system before
``append`` returns, so killing the process at any moment (SIGKILL included) loses
at most the unit in flight: the kernel holds every line already appended. Lines
reach the disk itself (``fsync``, which also survives a power cut or an OS crash)
through a background thread that syncs everything written so far in one call
(group commit): a burst of records costs one fsync instead of one each, and the
event loop never waits on the disk (a synchronous fsync per record, ~2 ms on a
common SSD, capped a run at a few hundred records per second). The thread is
not woken per record: it looks every ``SYNC_INTERVAL_S`` (and syncs back to back
while records keep coming), so a line reaches the disk at most about 20 ms plus one
fsync after it was written. Waking it on every append cost a thread switch and two
GIL hand-offs per record, which at a thousand records a second stalled the event
loop enough to cost 3-5% of throughput (``benchmarks/bench_runner.py``). ``close``
syncs what is left. On resume a torn last line (the process died mid-write) is cut off
before appending, so the file stays valid JSONL. A write that fails (a full disk)
leaves the file at its last complete line and stops the store (``StoreWriteError``).

A record is never refused for what a model wrote: text holding a lone UTF-16
surrogate (a JSON ``"\\ud800"`` escape in an answer) is stored with U+FFFD in its
place, and an integer beyond 64 bits is written exactly (``encode_line``).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from .._errors import OutputError
from .._protocol._text import replace_surrogates

_CHUNK = 1 << 16
# Compact UTF-8 JSON, as ``json.dumps(ensure_ascii=False, separators=(",", ":"))`` writes
# it at a tenth of the CPU; int keys become strings as with ``json``; one line each.
_LINE_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_APPEND_NEWLINE
#: How often the background thread looks for unsynced lines (the group-commit window).
SYNC_INTERVAL_S = 0.02


class StoreWriteError(OutputError):
    """A results file could not be written (disk full, I/O error): the run must stop.

    Every line appended before the failure is intact (a half-written one is cut
    off), so ``--resume`` continues once the cause is fixed.
    """


class JsonlStore:
    """One results file opened for appending; thread-safe, durable writes.

    The file is written through its descriptor (one ``write`` per record, no
    userspace buffer), so when a write fails (``ENOSPC``: the disk is full) no part
    of the record can be left behind to reach the file later: the store cuts the
    file back to its last complete line and raises :class:`StoreWriteError`. The
    file is valid after that, so a later append may still succeed (the units
    already in flight when a disk fills are stored if space comes back). A failed
    ``fsync`` (the kernel may have dropped written pages) is final: the next append,
    or ``close``, raises it and nothing more is written.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            repair_torn_tail(path)
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StoreWriteError(f"cannot open {path} for appending: {exc.strerror or exc}") from None
        self._size = os.fstat(self._fd).st_size
        self._closed = False
        self._lock = threading.Condition()
        self._unsynced = False
        self._closing = False
        self._failure: StoreWriteError | None = None  # a failed fsync: the store is done
        self._raised = False  # an append has raised ``_failure`` already
        self._syncer = threading.Thread(target=self._sync_loop, name=f"fsync {path.name}", daemon=True)
        self._syncer.start()

    def append(self, record: dict[str, Any]) -> None:
        """Write ``record`` as one line; it survives the process once this returns.

        Raises:
            StoreWriteError: this write failed (the file keeps its complete lines), or an
                earlier fsync did.
        """
        line = encode_line(record).encode("utf-8")
        with self._lock:
            if self._failure is not None:
                self._raised = True
                raise self._failure
            try:
                self._write(line)
            except OSError as exc:
                with contextlib.suppress(OSError):  # truncating needs no free space
                    os.ftruncate(self._fd, self._size)
                raise StoreWriteError(f"cannot write {self.path}: {exc.strerror or exc}") from None
            self._size += len(line)
            self._unsynced = True

    def _write(self, data: bytes) -> None:
        """Write all of ``data`` (``os.write`` may write part of it, e.g. as a disk fills)."""
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]

    def _fail(self, exc: OSError) -> None:
        """Remember a failed fsync: no line is written after it (called with the lock held)."""
        if self._failure is None:
            self._failure = StoreWriteError(f"cannot write {self.path}: {exc.strerror or exc}")

    def _sync_loop(self) -> None:
        while True:
            with self._lock:
                while not self._unsynced and not self._closing:
                    self._lock.wait(SYNC_INTERVAL_S)
                if not self._unsynced or self._failure is not None:
                    return
                self._unsynced = False
            try:
                os.fsync(self._fd)  # outside the lock: appends go on meanwhile
            except OSError as exc:
                with self._lock:
                    self._fail(exc)
                return

    def close(self) -> None:
        """Sync every appended line to disk and close the file.

        Raises:
            StoreWriteError: the final fsync failed (unless an append already raised it).
        """
        with self._lock:
            if self._closed:
                return
            self._closing = True
            self._lock.notify()
        self._syncer.join()
        with self._lock:
            self._closed = True
            try:
                if self._failure is None:
                    os.fsync(self._fd)
            except OSError as exc:
                self._fail(exc)
            finally:
                os.close(self._fd)
            if self._failure is not None and not self._raised:
                self._raised = True
                raise self._failure

    def __enter__(self) -> JsonlStore:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def encode_line(record: dict[str, Any]) -> str:
    """``record`` as one compact UTF-8 JSON line, whatever text or numbers it holds.

    orjson writes almost every record; it refuses strings with lone surrogates and
    integers beyond 64 bits, which a model's answer can carry. Such a record is
    written by the standard library instead, with the surrogates replaced (U+FFFD)
    and big integers exact. A value that is not JSON data at all (a set, an object)
    is a bug in the caller and still raises ``TypeError``.
    """
    try:
        return orjson.dumps(record, option=_LINE_OPTIONS).decode("utf-8")
    except orjson.JSONEncodeError:
        return json.dumps(_storable(record), ensure_ascii=False, separators=(",", ":")) + "\n"


def _storable(value: Any) -> Any:
    """``value`` with its strings made encodable and non-finite floats as ``null`` (as orjson)."""
    if isinstance(value, str):
        return replace_surrogates(value)
    if isinstance(value, dict):
        return {
            _storable(key) if isinstance(key, str) else key: _storable(item) for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [_storable(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def repair_torn_tail(path: Path) -> int:
    """Truncate an unterminated last line; returns how many bytes were cut."""
    if not path.exists():
        return 0
    size = path.stat().st_size
    if size == 0:
        return 0
    with path.open("rb+") as handle:
        handle.seek(-1, os.SEEK_END)
        if handle.read(1) == b"\n":
            return 0
        keep, end = 0, size
        while end > 0:  # the torn line may be longer than one chunk
            start = max(0, end - _CHUNK)
            handle.seek(start)
            cut_at = handle.read(end - start).rfind(b"\n")
            if cut_at >= 0:
                keep = start + cut_at + 1
                break
            end = start
        handle.truncate(keep)
        handle.flush()
        os.fsync(handle.fileno())
        return size - keep


def iter_records(path: Path) -> Iterator[dict[str, Any]]:
    """Complete, parseable records of a results file (a torn last line is ignored)."""
    if not path.exists():
        return
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if not line.endswith("\n"):
                return
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict):
                yield record
