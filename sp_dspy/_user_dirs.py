"""Where sp-dspy keeps per-user files, decided in one place.

Its own module, importing nothing heavy, so the LM layer (response cache) and the
local server state can use it without importing each other's packages.
"""

from __future__ import annotations

import os
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
