"""``prefetch_scoring_cases``: start a dataset's scoring views now, take them later.

The views are decoded by a worker process (``_scoring_worker``) where one can be
forked, and loaded by ``result()`` in this process otherwise. Either way ``result()``
gives exactly what ``load_scoring_cases`` gives: the worker only ever runs the slim
path, and when that declines the file (legacy spellings, bad data, invalid JSON) or
the worker fails, the parent loads the file itself, so every view, error message
and ``--lenient`` skip is the same.
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType

from . import _scoring_load
from ._gc import gc_paused
from ._scoring_cache import CachedViews
from ._scoring_load import ScoringLoad
from ._scoring_store import CacheKey
from ._scoring_worker import ViewsWorker, worker_allowed


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
        worker: ViewsWorker | None = None,
    ) -> None:
        self.path = path
        self.lenient = lenient
        self.directory = directory
        self.key = key
        self._ready = ready
        self._worker = worker

    @property
    def forked(self) -> bool:
        """Whether a worker process is decoding the views (until ``result()``)."""
        return self._worker is not None and self._worker.running

    def result(self) -> ScoringLoad:
        """The load, as ``load_scoring_cases`` gives it; raises what it raises."""
        if self._ready is None:
            views, stored = self._take_views()
            key = None if stored else self.key  # the worker has stored them already
            self._ready = _scoring_load.store_views(self.path, views, self.directory, key)
        return self._ready

    def close(self) -> None:
        """Stop and reap the worker, if one is still running."""
        if self._worker is not None:
            self._worker.stop()

    def __enter__(self) -> PendingScoringLoad:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    def _take_views(self) -> tuple[CachedViews, bool]:
        """The worker's views (and whether it stored them), else the parent's own load."""
        with gc_paused():
            views = None if self._worker is None else self._worker.receive()
            if views == "declined":  # only the full loader can word why
                return _scoring_load.full_views(self.path, lenient=self.lenient), False
            if views is not None:
                return CachedViews(cases=views), True
            return _scoring_load.load_views(self.path, lenient=self.lenient), False  # no worker, or it failed


def prefetch_scoring_cases(
    dataset: str | Path | None = None,
    *,
    with_evidence: bool = False,
    lenient: bool = False,
    cache: bool = True,
    cache_dir: Path | None = None,
    worker: ViewsWorker | None = None,
) -> PendingScoringLoad:
    """Start loading what ``load_scoring_cases`` loads (same arguments); take it with ``result()``.

    ``worker``: one already decoding the dataset (``start_views_worker``), adopted if
    it reads the file ``dataset`` resolves to, for the same cache key, and the views
    are not cached yet (else it is stopped). Errors finding the dataset (a missing
    file, an unreachable Hub) are raised here; errors in its contents by ``result()``.
    """
    try:
        path, directory, key, cached = _scoring_load.locate(
            dataset, with_evidence=with_evidence, lenient=lenient, cache=cache, cache_dir=cache_dir
        )
    except BaseException:
        if worker is not None:
            worker.stop()
        raise
    if worker is not None and (cached is not None or (worker.path, worker.key) != (path, key)):
        worker.stop()
        worker = None
    if worker is None and cached is None and worker_allowed():
        worker = ViewsWorker.start(path, key=key, directory=directory)
    return PendingScoringLoad(
        path, lenient=lenient, directory=directory, key=key, ready=cached, worker=worker
    )
