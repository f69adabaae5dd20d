"""Append-only JSONL result files that survive SIGKILL.

Each record is written as one line, flushed and fsynced before the next unit starts,
so a crash loses at most the unit in flight. On resume a torn last line (the process
died mid-write) is cut off before appending, so the file stays valid JSONL.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from threading import Lock
from typing import Any


class JsonlStore:
    """One results file opened for appending; thread-safe, durable writes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        repair_torn_tail(path)
        self._handle = path.open("a", encoding="utf-8")
        self._lock = Lock()

    def append(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"
        with self._lock:
            self._handle.write(line)
            self._handle.flush()
            os.fsync(self._handle.fileno())

    def close(self) -> None:
        with self._lock:
            if not self._handle.closed:
                self._handle.close()

    def __enter__(self) -> JsonlStore:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


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
        chunk = min(size, 1 << 20)
        handle.seek(size - chunk)
        tail = handle.read(chunk)
        cut_at = tail.rfind(b"\n")
        keep = 0 if cut_at < 0 else size - chunk + cut_at + 1
        handle.truncate(keep)
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
