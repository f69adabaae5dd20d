"""Where sp-dspy keeps per-user files, and the one check that an output directory is writable."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from ._errors import OutputError


def _xdg(variable: str, fallback: str) -> Path:
    return Path(os.path.expanduser(os.environ.get(variable) or fallback)) / "sp-dspy"


def default_cache_dir() -> Path:
    """``$SP_DSPY_CACHE_DIR``, else ``$XDG_CACHE_HOME/sp-dspy``, else ``~/.cache/sp-dspy``."""
    explicit = os.environ.get("SP_DSPY_CACHE_DIR")
    return Path(os.path.expanduser(explicit)) if explicit else _xdg("XDG_CACHE_HOME", "~/.cache")


def default_config_dir() -> Path:
    """``$XDG_CONFIG_HOME/sp-dspy``, else ``~/.config/sp-dspy``: the user's own settings files."""
    return _xdg("XDG_CONFIG_HOME", "~/.config")


def ensure_writable_dir(directory: Path, *, what: str) -> Path:
    """Create ``directory`` if needed and prove, by a real write, that a file can be written in it.

    Each problem is one ``OutputError`` line naming ``what`` (``--output-dir``, ...);
    permission bits alone would pass root, and a full disk still creates empty files.
    """
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
