"""A forked process that decodes a dataset file's scoring views while its parent works.

``sp-dspy score`` needs its imports (pydantic, numpy, the metrics), the result files
and the dataset's scoring views, and nothing makes these depend on each other. When
the parse cache misses, the views of the published 75 MB file cost about as much as
the rest together, so a worker process decodes them (``_scoring_slim``) on the
second core meanwhile and sends them through a pipe 500 cases at a time; the parent
validates each chunk when it gets to them. With the parse cache on, the worker also
writes the file's cache entry before it reports done.

This module imports no pydantic (nor does the worker): the command starts the worker
while its arguments are still being parsed, before pydantic's import (about 80 ms).
A worker is forked only where that is safe and useful: Linux, a process with a
single thread (nothing for the child to deadlock on), at least two usable CPUs, a
local file (resolving a Hub id may mean a download) whose views are not cached.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO, Literal, TypeVar

from .._errors import DataError
from ._scoring_store import CacheKey, cache_place, file_key, has_entry, write_entry_body
from ._source import names_hub_dataset, resolve_dataset

T = TypeVar("T")

#: Pipe capacity asked for (Linux's default ceiling for unprivileged processes): the
#: views of the published benchmark (about 0.6 MB pickled) then fit, and the worker
#: need not wait for the parent, busy with its own work, to read them.
_PIPE_BYTES = 1 << 20


def worker_allowed() -> bool:
    """Whether forking a worker is safe (one thread, Linux) and useful (two CPUs or more)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        return len(os.listdir("/proc/self/task")) == 1 and len(os.sched_getaffinity(0)) > 1
    except OSError:
        return False


def start_views_worker(
    dataset: str | None, *, lenient: bool, cache: bool, cache_dir: Path | None = None
) -> ViewsWorker | None:
    """A worker decoding ``--dataset``'s views, when that is allowed and useful; else None.

    None for a Hub id, a file that does not exist (the command reports it as usual),
    and a file whose views are in the parse cache.
    """
    if not worker_allowed() or names_hub_dataset(dataset):
        return None
    try:
        path = resolve_dataset(dataset)
    except DataError:
        return None
    directory, key = cache_place(path, lenient=lenient, cache=cache, cache_dir=cache_dir)
    if key is not None and has_entry(directory, key):
        return None
    return ViewsWorker.start(path, key=key, directory=directory)


class ViewsWorker:
    """One worker process decoding ``path``: ``receive`` takes its views, ``stop`` abandons them.

    With a ``key``, the worker also stores the views in the parse cache under it (in
    ``directory``), unless the file changed while it was read, before it says it is
    done: the parent has nothing left to write.
    """

    def __init__(self, path: Path, pid: int, read_end: int, key: CacheKey | None) -> None:
        self.path = path
        self.key = key
        self._pid: int | None = pid
        self._read_end = read_end

    @classmethod
    def start(cls, path: Path, *, key: CacheKey | None, directory: Path) -> ViewsWorker | None:
        """Fork a worker for ``path`` (None if the fork fails)."""
        import fcntl  # Linux only, as workers are

        read_end, write_end = os.pipe()
        with contextlib.suppress(OSError):  # a bigger pipe: the worker seldom waits for the parent
            fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
        try:
            pid = os.fork()
        except OSError:
            os.close(read_end)
            os.close(write_end)
            return None
        if pid == 0:  # the worker: never returns
            os.close(read_end)
            _run_worker(path, write_end, key, directory)
        os.close(write_end)
        return cls(path, pid, read_end, key)

    @property
    def running(self) -> bool:
        """Whether the views are still to be received (or abandoned)."""
        return self._pid is not None

    def receive(
        self, validate: Callable[[list[dict[str, Any]]], list[T]]
    ) -> list[T] | Literal["declined"] | None:
        """The views, each chunk passed through ``validate`` as it arrives.

        ``"declined"``: the slim path declined the file (the full loader must decide).
        None: the worker stopped before its final frame, or sent something that did
        not decode or validate (``ValueError``); the caller then loads the file itself.
        """
        pid, self._pid = self._pid, None
        if pid is None:
            raise RuntimeError("the views of this worker were already received or abandoned")
        views: list[T] = []
        try:
            with os.fdopen(self._read_end, "rb") as pipe:
                while len(header := pipe.read(4)) == 4:
                    message = pickle.loads(pipe.read(int.from_bytes(header, "little")))
                    if message[0] == "views":
                        views.extend(validate(message[1]))
                    elif message == ("done",):
                        return views
                    else:
                        return "declined" if message == ("declined",) else None
        except (pickle.UnpicklingError, EOFError, ValueError, IndexError, TypeError):
            return None
        finally:
            _reap_later(pid)
        return None

    def stop(self) -> None:
        """Kill and reap the worker, unless its views were received already."""
        pid, self._pid = self._pid, None
        if pid is None:
            return
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.close(self._read_end)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


def _reap_later(pid: int) -> None:
    """Collect a worker's exit status without waiting for it to exit.

    Its final frame (or its end of the pipe closing) already says all the parent
    needs; tearing down a process that decoded 75 MB takes it a further 20 ms or so.
    """
    threading.Thread(target=_wait_for, args=(pid,), name="sp-dspy-worker-reaper", daemon=True).start()


def _wait_for(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def _run_worker(path: Path, write_end: int, key: CacheKey | None, directory: Path) -> None:
    """Send the file's slim views a chunk at a time, then whether they are all; exit at once.

    Frames are a 4-byte little-endian length and a pickled tuple: ``("views", [...])``
    per chunk, then ``("done",)``, or ``("declined",)`` when the slim path declines. A
    worker that dies sends no final frame. Pickle, because the other end is this very
    process image, and because it stores each repeated string once: the views of the
    published benchmark take about 0.6 MB, within the pipe's capacity, and load in
    8 ms (msgpack: 1.4 MB, 12 ms, and an import the parent would pay for).
    ``os._exit`` skips the parent's atexit handlers and buffered output, which are
    the parent's to run and flush, and the freeing of the decoded document.
    """
    code = 1
    try:
        from ._gc import gc_paused
        from ._scoring_slim import slim_chunks_of

        views: list[dict[str, Any]] = []
        with gc_paused(), os.fdopen(write_end, "wb") as pipe:
            for chunk in slim_chunks_of(path):
                if chunk is None:
                    _send(pipe, ("declined",))
                    break
                if not chunk:  # the last one: every case passed
                    if key is not None:
                        _store(path, key, directory, views)
                    _send(pipe, ("done",))
                    break
                _send(pipe, ("views", chunk))
                views.extend(chunk)
        code = 0
    finally:
        os._exit(code)


def _store(path: Path, key: CacheKey, directory: Path, views: list[dict[str, Any]]) -> None:
    """Write the parse-cache entry of these views, if ``path`` is still what ``key`` describes.

    The body is what ``CachedViews.model_dump_json`` writes for them (integer rule
    keys as JSON strings, as JSON requires), encoded by msgspec: no pydantic here.
    """
    import msgspec

    if file_key(path, key.lenient) == key:
        body = msgspec.json.encode({"cases": views, "skipped": 0, "skipped_reasons": []})
        write_entry_body(directory, key, body)


def _send(pipe: BinaryIO, message: tuple[Any, ...]) -> None:
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    pipe.write(len(body).to_bytes(4, "little") + body)
    pipe.flush()  # the parent may validate this chunk while the next is checked
