"""Append-only JSONL result files that survive SIGKILL.

Each record is one line written before ``append`` returns; a background thread fsyncs
what was written meanwhile (group commit), so the event loop never waits on the disk.
What a run wrote is read back by the one reader of result files (``read_run_results``).
"""

from __future__ import annotations

import contextlib
import json
import math
import mmap
import os
import threading
from pathlib import Path
from typing import Any

import orjson

from .._errors import OutputError
from .._metrics import JudgmentRecord, PolicyRecord, ResultSet, read_result_files
from .._protocol import replace_surrogates

# Compact UTF-8 JSON as ``json.dumps(ensure_ascii=False, separators=(",", ":"))`` writes it.
_LINE_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_APPEND_NEWLINE
#: How often the background thread looks for unsynced lines (the group-commit window).
SYNC_INTERVAL_S = 0.02


class StoreWriteError(OutputError):
    """A results file could not be written (disk full, I/O error); the lines before it are intact."""


class JsonlStore:
    """One results file opened for appending; thread-safe, durable writes.

    A failed write cuts the file back to its last complete line (a later append may
    succeed); a failed ``fsync`` is final: the next append, or ``close``, raises it.
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

    def append(self, record: PolicyRecord | JudgmentRecord | dict[str, Any]) -> None:
        """Write ``record`` (a result record as its line, or any JSON object) as one line; it survives
        the process once this returns (``StoreWriteError`` if not)."""
        line = encode_line(record if isinstance(record, dict) else record.line()).encode("utf-8")
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
        """Sync every appended line to disk and close the file; raises a failed fsync not raised yet."""
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
    """``record`` as one compact UTF-8 JSON line (``TypeError`` for a value that is not JSON data).

    orjson refuses lone surrogates and integers beyond 64 bits, which a model's answer
    can carry; such a record goes through the standard library instead.
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
    if not path.exists() or path.stat().st_size == 0:
        return 0
    with path.open("rb+") as handle:
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as content:  # the line may be long
            size = len(content)
            if content[-1:] == b"\n":
                return 0
            keep = content.rfind(b"\n") + 1
        handle.truncate(keep)
        handle.flush()
        os.fsync(handle.fileno())
        return size - keep


def read_run_results(path: Path, *, strict: bool = False) -> ResultSet:
    """A run's own results file through the one reader (lenient unless ``strict``); none yet: empty.

    The run's writer cuts a torn last line (``repair_torn_tail``) before its units are read.
    """
    if not path.exists():
        return ResultSet()
    return read_result_files([path], skip_bad_lines=not strict)
