"""The parse cache of ``sp-dspy score``: scoring views of a dataset file, kept on disk.

Validating the 75 MB published benchmark costs more than scoring it. Like a dataset
library's processed-data cache, the scoring views of a file are written once, after a
successful load, to ``<cache dir>/scoring/`` and read back while the file is unchanged:
a hit never opens the dataset. The cache dir is the one the LM response cache uses
(``$SP_DSPY_CACHE_DIR``, else ``$XDG_CACHE_HOME/sp-dspy``, else ``~/.cache/sp-dspy``).

An entry is one file per dataset path and ``--lenient`` flag. Its first line is the
``CacheKey`` (``_scoring_key``) it was built for: the file's resolved path, size,
modification and status-change times (ns), inode and device, the sp-dspy version
and ``SCHEMA_VERSION``. Any difference, an unreadable or corrupt entry, is a miss, and the
next successful load replaces the entry. Writes go to a temporary file renamed into
place, so a reader sees a whole entry or none; a cache that cannot be written (a
read-only home) is skipped silently: the cache only ever saves time. After each
write, entries of dataset files that no longer exist, unreadable entries, and
temporary files a crashed writer left over an hour ago are removed (``prune``).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from pathlib import Path

from pydantic import BaseModel, ValidationError

from ._scoring import ScoringCase
from ._scoring_key import SCHEMA_VERSION, CacheKey, has_entry, scoring_cache_dir

__all__ = [
    "SCHEMA_VERSION",
    "CacheKey",
    "CachedViews",
    "has_entry",
    "prune",
    "read_entry",
    "scoring_cache_dir",
    "write_entry",
]

#: A temporary file older than this is a crashed writer's, not one in progress.
STALE_TEMPORARY_S = 3600.0


class CachedViews(BaseModel):
    """The body of an entry: what ``load_scoring_cases`` returns, minus where it came from."""

    cases: list[ScoringCase]
    skipped: int = 0
    skipped_reasons: list[str] = []


def read_entry(directory: Path, key: CacheKey) -> CachedViews | None:
    """The entry for ``key``, or None (missing, stale, unreadable or corrupt)."""
    try:
        with (directory / key.entry_name()).open("rb") as handle:
            if handle.readline() != key.line():
                return None
            return CachedViews.model_validate_json(handle.read())
    except (OSError, ValidationError):
        return None


def write_entry(directory: Path, key: CacheKey, views: CachedViews) -> bool:
    """Store ``views`` under ``key`` atomically; False (and nothing left behind) on failure."""
    temporary: str | None = None
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=directory, prefix=".entry-", suffix=".tmp")
        with os.fdopen(fd, "wb") as handle:
            handle.write(key.line())
            handle.write(views.model_dump_json().encode())
        os.replace(temporary, directory / key.entry_name())
    except OSError:
        if temporary is not None:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        return False
    prune(directory, keep=key.entry_name())
    return True


def prune(directory: Path, *, keep: str | None = None) -> int:
    """Remove entries whose dataset file is gone, unreadable entries, stale temporaries.

    Returns how many files were removed. ``keep`` (an entry name) is left alone. An
    entry of a file that exists but changed is not removed here: the next load of
    that file replaces it.
    """
    removed = 0
    now = time.time()
    for path in directory.iterdir() if directory.is_dir() else ():
        try:
            if path.name.startswith(".entry-"):
                if now - path.stat().st_mtime > STALE_TEMPORARY_S:
                    path.unlink()
                    removed += 1
                continue
            if path.name == keep or path.suffix != ".json":
                continue
            with path.open("rb") as handle:
                head = handle.readline()
            key = CacheKey.from_line(head)
            orphan = key is None or not Path(key.path).exists()
            if orphan:
                path.unlink()
                removed += 1
        except OSError:  # vanished meanwhile, or not ours to remove: leave it
            continue
    return removed
