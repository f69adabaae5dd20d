"""``load_scoring_cases``: a dataset file's scoring views, as fast as they can be had.

Three ways, tried in order, all giving the very same ``ScoringCase`` list:

1. the parse cache (``_scoring_cache``), when the file is unchanged since a load
   stored it: the dataset is not even opened;
2. ``slim_views``: the file decoded by msgspec against the full schema's types
   without building full cases (``_scoring_slim``; every field is type-checked,
   the conversation only as a JSON string, and the file is read through a memory
   map);
3. ``load_file`` and ``ScoringCase.from_case``, whenever the slim path has any doubt,
   so errors, legacy spellings and ``--lenient`` skips are exactly the full loader's.

A successful load (2 or 3) is stored in the cache for the next run. So is every
full load of a SafePyramid file by ``load_benchmark`` (``remember_views``): after
``sp-dspy eval`` has read a dataset, ``sp-dspy score`` of its results starts warm.
``sp-dspy score`` itself takes the same three ways through
``prefetch_scoring_cases``, which runs the second in a worker process.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from msgspec import Struct, field

from ._gc import gc_paused
from ._scoring import ScoringCase, scoring_views
from ._scoring_cache import CachedViews, read_entry, store_entry
from ._scoring_store import CacheKey, cache_place, has_entry, scoring_cache_dir
from ._source import resolve_dataset

if TYPE_CHECKING:
    from ._loader import Benchmark


class ScoringLoad(Struct, kw_only=True):
    """Scoring views of every valid case of a dataset, and where they came from."""

    cases: list[ScoringCase]
    source: str
    skipped: int = 0
    skipped_reasons: list[str] = field(default_factory=list)
    from_cache: bool = False

    @classmethod
    def of(cls, views: CachedViews, path: Path, *, from_cache: bool = False) -> ScoringLoad:
        """The load of ``path`` that gave ``views``."""
        return cls(
            cases=views.cases,
            source=str(path),
            skipped=views.skipped,
            skipped_reasons=views.skipped_reasons,
            from_cache=from_cache,
        )


def load_scoring_cases(
    dataset: str | Path | None = None,
    *,
    with_evidence: bool = False,
    lenient: bool = False,
    cache: bool = True,
    cache_dir: Path | None = None,
) -> ScoringLoad:
    """Scoring views of a SafePyramid dataset (``None``: the bundled sample, a file, a Hub id).

    Accepts and rejects exactly what ``load_benchmark`` does, with the same messages.
    ``cache=False`` neither reads nor writes the parse cache; ``cache_dir`` defaults
    to ``scoring_cache_dir()``.
    """
    path, directory, key, cached = locate(
        dataset, with_evidence=with_evidence, lenient=lenient, cache=cache, cache_dir=cache_dir
    )
    if cached is not None:
        return cached
    with gc_paused():  # thousands of long-lived objects
        views = load_views(path, lenient=lenient)
    return store_views(path, views, directory, key)


def locate(
    dataset: str | Path | None, *, with_evidence: bool, lenient: bool, cache: bool, cache_dir: Path | None
) -> tuple[Path, Path, CacheKey | None, ScoringLoad | None]:
    """The dataset's file, its cache directory and key, and its load from the cache on a hit.

    Raises what finding the dataset raises (a missing file, an unreachable Hub).
    """
    path = resolve_dataset(None if dataset is None else str(dataset), with_evidence=with_evidence)
    directory, key = cache_place(path, lenient=lenient, cache=cache, cache_dir=cache_dir)
    return path, directory, key, None if key is None else read_cached(path, directory, key)


def read_cached(path: Path, directory: Path, key: CacheKey) -> ScoringLoad | None:
    """The views of ``path`` from the parse cache, or None on a miss."""
    with gc_paused():
        views = read_entry(directory, key)
    return None if views is None else ScoringLoad.of(views, path, from_cache=True)


def store_views(path: Path, views: CachedViews, directory: Path, key: CacheKey | None) -> ScoringLoad:
    """The load of ``path`` that gave ``views``, stored in the cache under ``key`` first.

    Stored only if the file did not change while it was read: the key must describe
    the bytes the views came from. ``key`` None: the cache is off.
    """
    if key is not None:
        store_entry(path, directory, key, views)
    return ScoringLoad.of(views, path)


def remember_views(path: Path, loaded: Benchmark, key: CacheKey | None) -> None:
    """Store the scoring views of a full load of ``path``, unless an entry is there already.

    ``key`` is the file's key taken *before* it was read: nothing is stored if the
    file changed since (the views must describe the bytes under the key), and a
    cache that cannot be written is left alone. About 40 ms, once per file version.
    """
    directory = scoring_cache_dir()
    if key is not None and not has_entry(directory, key):
        store_entry(path, directory, key, _views_of(loaded))


def load_views(path: Path, *, lenient: bool) -> CachedViews:
    """Views by the slim path, else by the full loader (which also words every error).

    The slim path answers only when no case would be normalised, rejected or skipped,
    and then ``--lenient`` changes nothing; so it is tried with and without it.
    """
    from ._scoring_slim import slim_views_of

    views = slim_views_of(path)
    return full_views(path, lenient=lenient) if views is None else CachedViews(cases=views)


def full_views(path: Path, *, lenient: bool) -> CachedViews:
    """Views by the full loader: what ``load_benchmark`` accepts, skips and says."""
    from ._loader import load_file

    return _views_of(load_file(path, lenient=lenient))


def _views_of(loaded: Benchmark) -> CachedViews:
    """The cache body of a full load: its cases' scoring views and what it skipped."""
    return CachedViews(
        cases=scoring_views(loaded.cases), skipped=loaded.skipped, skipped_reasons=loaded.skipped_reasons
    )
