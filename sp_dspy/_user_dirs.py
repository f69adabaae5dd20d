"""Where sp-dspy keeps per-user files, decided in one place.

Its own module, importing nothing heavy, so the LM layer (response cache) and the
local server state can use it without importing each other's packages.
:func:`ensure_writable_dir` is the one check that an output location (results,
cache, artifact) can be written, for every command to call early.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def default_cache_dir() -> Path:
    """``$SP_DSPY_CACHE_DIR``, else ``$XDG_CACHE_HOME/sp-dspy``, else ``~/.cache/sp-dspy``."""
    explicit = os.environ.get("SP_DSPY_CACHE_DIR")
    if explicit:
        return Path(os.path.expanduser(explicit))
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(os.path.expanduser(xdg)) if xdg else Path(os.path.expanduser("~/.cache"))
    return base / "sp-dspy"


def default_config_dir() -> Path:
    """``$XDG_CONFIG_HOME/sp-dspy``, else ``~/.config/sp-dspy``: the user's own settings files."""
    xdg = os.environ.get("XDG_CONFIG_HOME")
    base = Path(os.path.expanduser(xdg)) if xdg else Path(os.path.expanduser("~/.config"))
    return base / "sp-dspy"


def ensure_writable_dir(directory: Path, *, what: str) -> Path:
    """Create ``directory`` if needed and prove that a file can be written in it.

    Run before a command spends anything (an LM call, a model load), so a read-only
    directory, a path that is a file or a full disk is one line naming ``what``
    (``--output-dir``, ``--out``, ``SP_DSPY_CACHE_DIR``) instead of a traceback later.
    The probe writes one byte to a temporary file and removes it: root passes
    permission bits, and a full disk often still creates empty files, so only a
    write settles both.

    Raises:
        OutputError: the path or one of its parents is a file, or the directory
            cannot be created or written.
    """
    from ._errors import OutputError

    for parent in (directory, *directory.parents):
        if parent.exists():
            if not parent.is_dir():
                whose = "" if parent == directory else f" (so {directory} cannot be created)"
                raise OutputError(f"{what}: {parent} is a file, not a directory{whose}")
            break
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"{what}: cannot create {directory}: {exc.strerror or exc}") from None
    try:
        fd, probe = tempfile.mkstemp(prefix=".sp-dspy-write-check-", dir=directory)
        try:
            os.write(fd, b"\n")
        finally:
            os.close(fd)
            os.unlink(probe)
    except OSError as exc:
        raise OutputError(f"{what}: cannot write in {directory}: {exc.strerror or exc}") from None
    return directory
