"""The parse cache's files: keys, entry names, atomic writes and pruning.

An entry is a key line (``CacheKey.line``) and a JSON body (``_scoring_cache``'s
``CachedViews``). This module handles entries as bytes and imports no pydantic:
``sp-dspy score`` checks for an entry while its arguments are being parsed, before
pydantic is imported, and its dataset worker (``_scoring_worker``) writes the entry
it decoded without importing pydantic at all.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from .._user_dirs import default_cache_dir

#: Bump when ``ScoringCase`` or what the loader puts into it changes meaning.
SCHEMA_VERSION = 1
#: A temporary file older than this is a crashed writer's, not one in progress.
STALE_TEMPORARY_S = 3600.0


def scoring_cache_dir() -> Path:
    """Where scoring views are cached."""
    return default_cache_dir() / "scoring"


@dataclass(frozen=True)
class CacheKey:
    """The dataset file as it is on disk, the sp-dspy version and the ``--lenient`` flag."""

    path: str
    size: int
    mtime_ns: int
    ctime_ns: int
    inode: int
    device: int
    version: str
    schema_version: int
    lenient: bool

    @classmethod
    def of(cls, path: Path, *, lenient: bool) -> CacheKey:
        """The key of ``path`` as it is on disk now (``OSError`` if it cannot be stat'ed)."""
        from .. import __version__

        resolved = path.resolve()
        stat = resolved.stat()
        return cls(
            path=str(resolved),
            size=stat.st_size,
            mtime_ns=stat.st_mtime_ns,
            ctime_ns=stat.st_ctime_ns,
            inode=stat.st_ino,
            device=stat.st_dev,
            version=__version__,
            schema_version=SCHEMA_VERSION,
            lenient=lenient,
        )

    @classmethod
    def from_line(cls, line: bytes) -> CacheKey | None:
        """The key an entry's first line holds, or None if it holds none."""
        try:
            data = json.loads(line)
            key = cls(**data) if isinstance(data, dict) else None
        except (ValueError, TypeError):
            return None
        types = {"str": str, "int": int, "bool": bool}
        if key is None or not all(type(getattr(key, f.name)) is types[str(f.type)] for f in fields(cls)):
            return None
        return key

    def line(self) -> bytes:
        """The key as an entry's first line (compact ASCII JSON, newline-terminated)."""
        return json.dumps(asdict(self), separators=(",", ":")).encode() + b"\n"

    def entry_name(self) -> str:
        """One entry per dataset path and flag, so a changed file replaces its old entry."""
        digest = hashlib.sha256(f"{self.path}\0{self.lenient}".encode()).hexdigest()
        return f"{digest[:32]}.json"


def cache_place(
    path: Path, *, lenient: bool, cache: bool, cache_dir: Path | None = None
) -> tuple[Path, CacheKey | None]:
    """The cache directory for ``path``'s views and their key (None: cache off, or no stat)."""
    directory = scoring_cache_dir() if cache_dir is None else cache_dir
    return directory, file_key(path, lenient) if cache else None


def file_key(path: Path, lenient: bool) -> CacheKey | None:
    """The parse-cache key of ``path`` as it is now (None if it cannot be stat'ed)."""
    try:
        return CacheKey.of(path, lenient=lenient)
    except OSError:
        return None


def has_entry(directory: Path, key: CacheKey) -> bool:
    """Whether an entry for ``key`` is stored (its key line matches; the body is not read)."""
    try:
        with (directory / key.entry_name()).open("rb") as handle:
            return handle.readline() == key.line()
    except OSError:
        return False


def write_entry_body(directory: Path, key: CacheKey, body: bytes) -> bool:
    """Store ``body`` under ``key`` atomically, then ``prune``; False (nothing left behind) on failure."""
    temporary: str | None = None
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=directory, prefix=".entry-", suffix=".tmp")
        with os.fdopen(fd, "wb") as handle:
            handle.write(key.line())
            handle.write(body)
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
            if key is None or not Path(key.path).exists():
                path.unlink()
                removed += 1
        except OSError:  # vanished meanwhile, or not ours to remove: leave it
            continue
    return removed
