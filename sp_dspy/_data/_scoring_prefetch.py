"""``prefetch_scoring_cases``: read a dataset's scoring views on the second core.

Before ``sp-dspy score`` can score it needs three things: its imports (numpy, the
metrics), the result files, and the dataset's scoring views. When the parse cache
misses (the first read of a file), the views of the published 75 MB file cost about
as much as the other two together, and nothing makes them depend on each other. So
the command starts the load here, reads its result files, then takes the views:
on a machine with more than one core the file is decoded by a forked worker
process meanwhile. Its views arrive through a pipe (msgpack) 500 cases at a time,
and the parent validates each chunk into ``ScoringCase``s while the worker checks
the next, so little is left to do once the last one is in.

The worker only ever runs the slim path (``slim_views``). When that has any doubt
(legacy spellings, bad data, invalid JSON), when the worker fails, or where no
worker can be forked, the parent loads the file itself exactly as
``load_scoring_cases`` does, so every view, error message and ``--lenient`` skip is
the same either way. A worker is forked only where that is safe and useful: Linux,
a single thread in the process (nothing to deadlock on in the child), at least two
usable CPUs, and a cache miss (a hit costs less than a fork). The decoder's modules
(msgspec, ``_scoring_slim``) are imported after the fork, by both processes at once.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO, Literal

from pydantic import ValidationError

from . import _scoring_load
from ._gc import gc_paused
from ._scoring import ScoringCase
from ._scoring_cache import CachedViews, CacheKey, scoring_cache_dir
from ._scoring_load import ScoringLoad
from ._source import resolve_dataset


class PendingScoringLoad:
    """A dataset's scoring views on their way; ``result()`` waits for them.

    Use it as a context manager: leaving the block without taking the result (an
    error while reading the result files) stops the worker and reaps it.
    """

    def __init__(
        self,
        path: Path,
        *,
        lenient: bool,
        directory: Path,
        key: CacheKey | None,
        ready: ScoringLoad | None = None,
        worker: tuple[int, int] | None = None,
    ) -> None:
        self.path = path
        self.lenient = lenient
        self.directory = directory
        self.key = key
        self._ready = ready
        self._worker = worker  # (pid, read end of its pipe)

    @property
    def forked(self) -> bool:
        """Whether a worker process is decoding the views (until ``result()``)."""
        return self._worker is not None

    def result(self) -> ScoringLoad:
        """The load, as ``load_scoring_cases`` gives it; raises what it raises."""
        if self._ready is None:
            views = self._take_worker_views()
            self._ready = _scoring_load.store_views(self.path, views, self.directory, self.key)
        return self._ready

    def close(self) -> None:
        """Stop and reap the worker, if one is still running."""
        if self._worker is None:
            return
        pid, fd = self._worker
        self._worker = None
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.close(fd)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)

    def __enter__(self) -> PendingScoringLoad:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def _take_worker_views(self) -> CachedViews:
        """The worker's views; the parent's own load when it has none to give."""
        if self._worker is None:
            with gc_paused():
                return _scoring_load.load_views(self.path, lenient=self.lenient)
        pid, fd = self._worker
        with gc_paused():
            views = _receive_views(fd)
        self._worker = None
        _, status = os.waitpid(pid, 0)
        with gc_paused():
            if views == "declined":  # only the full loader can word why
                return _scoring_load.full_views(self.path, lenient=self.lenient)
            if views is not None and os.waitstatus_to_exitcode(status) == 0:
                return CachedViews(cases=views)
            return _scoring_load.load_views(self.path, lenient=self.lenient)  # the worker failed


def prefetch_scoring_cases(
    dataset: str | Path | None = None,
    *,
    with_evidence: bool = False,
    lenient: bool = False,
    cache: bool = True,
    cache_dir: Path | None = None,
) -> PendingScoringLoad:
    """Start loading what ``load_scoring_cases`` loads (same arguments); take it with ``result()``.

    Errors finding the dataset (a missing file, an unreachable Hub) are raised here;
    errors in its contents by ``result()``.
    """
    path = resolve_dataset(None if dataset is None else str(dataset), with_evidence=with_evidence)
    directory = scoring_cache_dir() if cache_dir is None else cache_dir
    key = _scoring_load.file_key(path, lenient) if cache else None
    cached = None if key is None else _scoring_load.read_cached(path, directory, key)
    worker = _fork_worker(path) if cached is None and worker_allowed() else None
    return PendingScoringLoad(
        path, lenient=lenient, directory=directory, key=key, ready=cached, worker=worker
    )


def worker_allowed() -> bool:
    """Whether forking a worker is safe (one thread, Linux) and useful (two CPUs or more)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        return len(os.listdir("/proc/self/task")) == 1 and len(os.sched_getaffinity(0)) > 1
    except OSError:
        return False


def _fork_worker(path: Path) -> tuple[int, int] | None:
    """Fork a process that writes the file's slim views to a pipe; (pid, read end)."""
    read_end, write_end = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(read_end)
        os.close(write_end)
        return None
    if pid == 0:  # the worker: never returns
        os.close(read_end)
        _run_worker(path, write_end)
    os.close(write_end)
    return pid, read_end


def _run_worker(path: Path, write_end: int) -> None:
    """Send the file's slim views a chunk at a time, then whether they are all; exit at once.

    Frames are a 4-byte little-endian length and a msgpack body: ``["views", [...]]``
    per chunk, then ``["done"]``, or ``["declined"]`` when the slim path declines. A
    worker that dies sends no final frame. ``os._exit`` skips the parent's atexit
    handlers and buffered output, which are the parent's to run and flush.
    """
    code = 1
    try:
        with gc_paused(), os.fdopen(write_end, "wb") as pipe:
            for chunk in _scoring_load.slim_chunks_of(path):
                if chunk is None:
                    _send(pipe, ["declined"])
                    break
                _send(pipe, ["views", chunk])
            else:
                _send(pipe, ["done"])
        code = 0
    finally:
        os._exit(code)


def _send(pipe: BinaryIO, message: list[Any]) -> None:
    import msgspec

    body = msgspec.msgpack.encode(message)
    pipe.write(len(body).to_bytes(4, "little") + body)
    pipe.flush()  # the parent validates each chunk while the next is checked


def _receive_views(fd: int) -> list[ScoringCase] | Literal["declined"] | None:
    """The views a worker sends, validated chunk by chunk as they arrive.

    None when the worker stopped before its final frame or sent something else.
    """
    import msgspec

    from ._scoring_slim import views_from_fields

    views: list[ScoringCase] = []
    with os.fdopen(fd, "rb") as pipe:
        while len(header := pipe.read(4)) == 4:
            try:
                message = msgspec.msgpack.decode(pipe.read(int.from_bytes(header, "little")))
                if message[0] == "views":
                    views.extend(views_from_fields(message[1]))
                    continue
            except (msgspec.DecodeError, ValidationError, IndexError, TypeError):
                return None
            return views if message == ["done"] else "declined" if message == ["declined"] else None
    return None
