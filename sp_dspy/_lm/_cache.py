"""The on-disk response cache: DSPy's own cache, keyed by endpoint as well as request.

DSPy hashes every request field except ``api_key``, ``api_base`` and ``base_url``, so
two servers that serve *different* models under the same name (two vLLM instances
called ``Qwen3-8B`` with different weights or quantisations) would share cached
answers. The cache installed here is DSPy's ``Cache`` with the endpoint put back
into the key (``_compat.endpoint_cache_class``); the API key stays out. Replicas of one model, configured together as a
comma-separated ``api_base``, are deliberately keyed as one endpoint so a rerun hits
the cache whichever replica served the first run, and sync and async calls share
entries (DSPy keys them apart).

Everything here imports DSPy lazily: the CLI imports this package at start-up.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

from .._errors import OutputError
from .._user_dirs import default_cache_dir, ensure_writable_dir

DISK_SIZE_LIMIT_BYTES = 30 * 1024**3
#: The key, in an LM's ``metadata`` setting, that puts its endpoint into DSPy's cache keys.
#: DSPy keys a custom engine's calls by the request and the LM's settings only (the
#: engine owns its connection, so ``api_base`` is not among them); ``metadata`` is the
#: one setting DSPy passes through untouched, and the engines remove the key before
#: anything is sent (``_direct.request_overrides``).
ENDPOINT_GROUP_KEY = "sp_endpoint_group"
_lock = threading.Lock()
_endpoint_groups: dict[str, str] = {}
_configured: CacheSettings | None = None


@dataclass(frozen=True)
class CacheSettings:
    """What :func:`configure_cache` installed."""

    enabled: bool
    directory: Path | None


def default_response_cache_dir() -> Path:
    """Where responses are cached unless ``configure_cache`` is given a directory."""
    return default_cache_dir() / "responses"


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


def endpoint_metadata(endpoints: list[str]) -> dict[str, str]:
    """The ``metadata`` setting of an LM on a custom engine serving ``endpoints`` (see
    :data:`ENDPOINT_GROUP_KEY`): the group as results show endpoints, without credentials."""
    from .._redact import redact
    from ._config import _URL_USERINFO

    group = ",".join(redact(_URL_USERINFO.sub("***@", endpoint_key(e))) for e in endpoints)
    return {ENDPOINT_GROUP_KEY: group}


def configure_cache(enabled: bool = True, directory: Path | str | None = None) -> CacheSettings:
    """Install the response cache for this process (``--no-cache`` is ``enabled=False``).

    ``directory`` defaults to :func:`default_response_cache_dir`. Disabled means no
    memory cache either, so every call reaches the model.

    Raises:
        OutputError: the cache directory cannot be created or written.
    """
    global _configured
    from ._compat import endpoint_cache_class, install_cache
    from ._dspy import ensure_offline_env

    ensure_offline_env()
    path = Path(os.path.expanduser(str(directory))) if directory is not None else default_response_cache_dir()
    cls = endpoint_cache_class(endpoint_key)
    if enabled:
        try:
            ensure_writable_dir(path, what="response cache")  # before any call, not in DSPy's first write
        except OutputError as exc:
            raise OutputError(
                f"{exc}; set SP_DSPY_CACHE_DIR to a writable directory or pass --no-cache"
            ) from None
        cache = cls(
            enable_disk_cache=True,
            enable_memory_cache=True,
            disk_cache_dir=str(path),
            disk_size_limit_bytes=DISK_SIZE_LIMIT_BYTES,
        )
    else:
        cache = cls(enable_disk_cache=False, enable_memory_cache=False, disk_cache_dir=None)
    install_cache(cache)
    settings = CacheSettings(enabled, path if enabled else None)
    with _lock:
        _configured = settings
    return settings


def cache_settings() -> CacheSettings | None:
    """What :func:`configure_cache` last installed (None: never called)."""
    return _configured


def ensure_cache_configured() -> None:
    """Install the default sp-dspy cache when nobody configured one yet.

    Called by ``make_lm`` so endpoints are keyed even when a script forgets
    :func:`configure_cache`. A cache the user installed through
    ``dspy.configure_cache`` is left alone (it keys by DSPy's rules).
    """
    from ._compat import installed_cache

    if cache_settings() is None and installed_cache() is None:
        configure_cache()
