"""The on-disk response cache: DSPy's own, keyed by endpoint (never the key) as well as request.

DSPy leaves ``api_base`` out of its keys, so two servers with different weights under one model
name would share answers. Replicas of one model are keyed as one endpoint (a rerun hits the
cache whichever replica served).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

from .._errors import OutputError
from .._user_dirs import default_cache_dir, ensure_writable_dir
from ._compat import install_cache, installed_cache
from ._dspy import ensure_offline_env

DISK_SIZE_LIMIT_BYTES = 30 * 1024**3
#: The key, in an LM's ``metadata`` setting, that puts a custom engine's endpoint into DSPy's
#: cache keys (made of the request and LM settings only); ``metadata`` is the one setting DSPy
#: passes through untouched, and the engines remove the key before sending (``request_overrides``).
ENDPOINT_GROUP_KEY = "sp_endpoint_group"
#: The key, in a call's ``metadata``, of body fields a program sends as they are (a guard model's
#: ``chat_template_kwargs``): DSPy's canonical request has no slot for them, its cache key holds
#: them (two guidelines are two answers), and sp-dspy's HTTP engine merges them into the body.
BODY_FIELDS_KEY = "sp_body_fields"
_lock = threading.Lock()
_endpoint_groups: dict[str, str] = {}
_configured = False  # whether configure_cache was called


def _normalise_endpoint(url: str) -> str:
    return url.strip().rstrip("/")


def register_endpoint_group(endpoints: list[str]) -> None:
    """Key ``endpoints`` (replicas of one model) as a single endpoint in the cache."""
    group = ",".join(_normalise_endpoint(e) for e in endpoints)
    with _lock:
        for endpoint in endpoints:
            _endpoint_groups[_normalise_endpoint(endpoint)] = group


def endpoint_key(url: str) -> str:
    """The value an endpoint contributes to cache keys."""
    url = _normalise_endpoint(url)
    with _lock:
        return _endpoint_groups.get(url, url)


def configure_cache(
    enabled: bool = True, directory: Path | str | None = None, *, warn: Callable[[str], None] | None = None
) -> None:
    """Install the response cache for this process in ``directory`` (default: the user cache
    directory's ``responses``); disabled (``--no-cache``), every call reaches the model.

    A write that fails later (a full disk) does not stop the calls: ``warn`` (default: a logged
    warning) is told once that the answers from then on are not cached, and none is written.

    Raises:
        OutputError: the cache directory cannot be created, written or opened.
    """
    global _configured
    ensure_offline_env()
    path = Path(os.path.expanduser(directory)) if directory is not None else default_cache_dir() / "responses"
    disk: dict[str, object] = {"disk_cache_dir": None}
    fix = "set SP_DSPY_CACHE_DIR to a writable directory or pass --no-cache"
    if enabled:
        try:
            ensure_writable_dir(path, what="response cache")  # before any call, not in DSPy's first write
        except OutputError as exc:
            raise OutputError(f"{exc}; {fix}") from None
        disk = {"disk_cache_dir": str(path), "disk_size_limit_bytes": DISK_SIZE_LIMIT_BYTES}
    from ._dspy_cache import EndpointAwareCache  # imports DSPy

    say = warn or logging.getLogger("sp_dspy").warning

    def write_failed(exc: Exception) -> None:
        say(
            f"response cache: cannot write in {path} ({_why(exc)}); the answers from here on are not "
            "cached (a rerun sends their calls again)"
        )

    try:
        # No in-memory tier: DSPy's keeps every answer whole (up to a million), so memory would
        # grow with what the model returns; a replay reads the disk instead.
        cache = EndpointAwareCache(
            endpoint_key, write_failed, enable_disk_cache=enabled, enable_memory_cache=False, **disk
        )
    except (sqlite3.Error, OSError) as exc:  # a disk with room for the check, not for the database
        raise OutputError(f"response cache: cannot open the cache in {path} ({_why(exc)}); {fix}") from None
    install_cache(cache)
    _configured = True


def _why(exc: Exception) -> str:
    """What went wrong, in the system's words (``No space left on device``, ``database or disk is full``)."""
    return (exc.strerror if isinstance(exc, OSError) else None) or str(exc) or type(exc).__name__


def ensure_cache_configured() -> None:
    """Install the default cache when nobody configured one (``make_lm`` calls it, so endpoints
    are keyed in scripts too); one installed through ``dspy.configure_cache`` is left alone."""
    if not _configured and installed_cache() is None:
        configure_cache()
