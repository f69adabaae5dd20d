"""What produced a run or an artifact: package versions, the checkout's commit, the command line.

Written into eval manifests and compile artifacts alike; secrets in the command line are masked.
"""

from __future__ import annotations

import functools
import re
import subprocess
import sys
from importlib import metadata

from ._redact import redact

_URL_USERINFO = re.compile(r"(?<=://)[^/@\s]+@")
PACKAGES = ("sp-dspy", "dspy", "litellm", "pydantic", "optuna", "gepa", "xllamacpp", "vllm")


def package_versions() -> dict[str, str | None]:
    """Python's version and each of ``PACKAGES``' (None: not installed)."""
    versions: dict[str, str | None] = {"python": sys.version.split()[0]}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def git_commit() -> str | None:
    """The checkout's commit (dirty marker included), or None outside a git checkout."""
    git = functools.partial(subprocess.run, capture_output=True, text=True, timeout=5)
    try:
        head = git(["git", "rev-parse", "HEAD"], check=True).stdout.strip()
        dirty = git(["git", "status", "--porcelain", "--untracked-files=no"]).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head}{'-dirty' if dirty else ''}" if head else None


def redacted_argv() -> list[str]:
    """The command line with known secrets and URL credentials (``user:pass@``) masked."""
    return [redact(_URL_USERINFO.sub("***@", arg)) for arg in sys.argv]
