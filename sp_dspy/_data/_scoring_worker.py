"""A forked process that decodes a dataset file's scoring views while its parent works.

``sp-dspy score`` needs its imports (pydantic, numpy, the metrics), the result files
and the dataset's scoring views, and nothing makes these depend on each other. When
the parse cache misses, the views of the published 75 MB file cost about as much as
the rest together, so a worker process decodes them (``_scoring_slim``) on the
second core meanwhile, writes the file's parse-cache entry when the cache is on,
and sends the views through a pipe, which the parent reads when it needs them.

This module imports no pydantic (nor does the worker): the command starts the worker
while its arguments are still being parsed, before pydantic's import (about 80 ms).
A worker is forked only where that is safe and useful: Linux, a process with a
single thread (nothing for the child to deadlock on), at least two usable CPUs, a
local file (resolving a Hub id may mean a download) whose views are not cached.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Literal

import msgspec

from .._errors import DataError
from ._scoring import ScoringCase
from ._scoring_cache import CachedViews, store_entry
from ._scoring_store import CacheKey, cache_place, has_entry
from ._source import names_hub_dataset, resolve_dataset

#: Pipe capacity asked for (Linux's default ceiling for unprivileged processes): most
#: of the views of the published benchmark (1.4 MB) are written before the parent reads.
_PIPE_BYTES = 1 << 20

#: A message's first byte: the views follow; the slim path declined the file.
_VIEWS, _DECLINED = b"v", b"x"
#: The message header: its kind and its body's length (8 bytes, little-endian).
_HEADER_BYTES = 9

_VIEWS_DECODER = msgspec.msgpack.Decoder(list[ScoringCase])


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
    ``directory``), unless the file changed while it was read, before it sends them:
    the parent has nothing left to write.
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

    def receive(self) -> list[ScoringCase] | Literal["declined"] | None:
        """The views, once the worker has sent them all.

        ``"declined"``: the slim path declined the file (the full loader must decide).
        None: the worker stopped before its message was whole, or sent something that
        did not decode into views; the caller then loads the file itself.
        """
        pid, self._pid = self._pid, None
        if pid is None:
            raise RuntimeError("the views of this worker were already received or abandoned")
        try:
            with os.fdopen(self._read_end, "rb") as pipe:
                header = pipe.read(_HEADER_BYTES)
                if len(header) < _HEADER_BYTES:
                    return None
                size = int.from_bytes(header[1:], "little")
                body = pipe.read(size)
            if len(body) < size:
                return None
            if header[:1] == _DECLINED:
                return "declined"
            return _VIEWS_DECODER.decode(body) if header[:1] == _VIEWS else None
        except msgspec.DecodeError:  # a ValidationError is one too
            return None
        finally:
            _reap_later(pid)

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

    Its message (or its end of the pipe closing) already says all the parent
    needs; tearing down a process that decoded 75 MB takes it a further 20 ms or so.
    """
    threading.Thread(target=_wait_for, args=(pid,), name="sp-dspy-worker-reaper", daemon=True).start()


def _wait_for(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def _run_worker(path: Path, write_end: int, key: CacheKey | None, directory: Path) -> None:
    """Decode the file's slim views, store them, send them in one message; exit at once.

    The message is a kind byte, the body's length (8 bytes, little-endian) and the
    body: ``_VIEWS`` and the views, msgpack-encoded (the parent decodes them straight
    into ``ScoringCase`` structs, every field's type checked, in a third of the time
    pydantic took to validate pickled dicts), or ``_DECLINED`` and nothing when the
    slim path declines the file. A worker that dies sends no whole message. With a
    ``key`` the cache entry is written first, while the parent is still busy: the
    parent need not wait for it. ``os._exit`` skips the parent's atexit handlers and
    buffered output, which are the parent's to run and flush, and the freeing of the
    decoded document.
    """
    code = 1
    try:
        from ._gc import gc_paused
        from ._scoring_slim import slim_views_of

        with gc_paused(), os.fdopen(write_end, "wb") as pipe:
            views = slim_views_of(path)
            if views is None:
                pipe.write(_DECLINED + bytes(_HEADER_BYTES - 1))
            else:
                if key is not None:
                    store_entry(path, directory, key, CachedViews(cases=views))
                body = msgspec.msgpack.encode(views)
                pipe.write(_VIEWS + len(body).to_bytes(_HEADER_BYTES - 1, "little") + body)
        code = 0
    finally:
        os._exit(code)
