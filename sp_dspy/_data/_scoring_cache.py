"""The parse cache of ``sp-dspy score``: scoring views of a dataset file, kept on disk.

Validating the 75 MB published benchmark costs more than scoring it. Like a dataset
library's processed-data cache, the scoring views of a file are written once, after a
successful load, to ``<cache dir>/scoring/`` and read back while the file is unchanged:
a hit never opens the dataset. The cache dir is the one the LM response cache uses
(``$SP_DSPY_CACHE_DIR``, else ``$XDG_CACHE_HOME/sp-dspy``, else ``~/.cache/sp-dspy``).

An entry is one file per dataset path and ``--lenient`` flag. Its first line is the
``CacheKey`` it was built for: the file's resolved path, size, modification and
status-change times (ns), inode and device, the sp-dspy version and
``SCHEMA_VERSION``. Any difference, an unreadable or corrupt entry, is a miss, and
the next successful load replaces the entry. Keys, writes and pruning work on bytes
in ``_scoring_store``; this module adds the views themselves, encoded and decoded by
msgspec (no pydantic here either: the dataset worker writes entries too). Writes go
to a temporary file renamed into place, so a reader sees a whole entry or none; a
cache that cannot be written (a read-only home) is skipped silently: the cache only
ever saves time. After each write, entries of dataset files that no longer exist,
unreadable entries, and temporary files a crashed writer left over an hour ago are
removed (``prune``).
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from ._scoring import ScoringCase
from ._scoring_store import CacheKey, file_key, write_entry_body


class CachedViews(msgspec.Struct, kw_only=True):
    """The body of an entry: what ``load_scoring_cases`` returns, minus where it came from."""

    cases: list[ScoringCase]
    skipped: int = 0
    skipped_reasons: list[str] = msgspec.field(default_factory=list)


_DECODER = msgspec.json.Decoder(CachedViews)


def read_entry(directory: Path, key: CacheKey) -> CachedViews | None:
    """The entry for ``key``, or None (missing, stale, unreadable or corrupt)."""
    try:
        with (directory / key.entry_name()).open("rb") as handle:
            if handle.readline() != key.line():
                return None
            return _DECODER.decode(handle.read())
    except (OSError, msgspec.DecodeError):  # ValidationError is a DecodeError
        return None


def write_entry(directory: Path, key: CacheKey, views: CachedViews) -> bool:
    """Store ``views`` under ``key`` atomically; False (and nothing left behind) on failure."""
    return write_entry_body(directory, key, entry_body(views))


def store_entry(path: Path, directory: Path, key: CacheKey, views: CachedViews) -> bool:
    """Store ``views`` under ``key`` if ``path`` is still what ``key`` describes.

    The views must describe the bytes under the key: nothing is stored (False) when
    the file changed since ``key`` was taken, nor when the entry cannot be written.
    """
    return file_key(path, key.lenient) == key and write_entry(directory, key, views)


def entry_body(views: CachedViews) -> bytes:
    """The bytes an entry holds after its key line: the views as JSON (integer rule keys as strings)."""
    return msgspec.json.encode(views)
