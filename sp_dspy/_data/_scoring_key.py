"""The parse cache's key: what must not have changed for an entry to describe a file.

Kept apart from the entries (``_scoring_cache``) and free of pydantic, because
``sp-dspy score`` checks for an entry while its arguments are being parsed, before
pydantic is imported, to decide whether to start decoding the dataset in a worker
process (``_scoring_worker``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from .._user_dirs import default_cache_dir

#: Bump when ``ScoringCase`` or what the loader puts into it changes meaning.
SCHEMA_VERSION = 1


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
