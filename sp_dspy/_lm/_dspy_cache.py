"""sp-dspy's response cache class: DSPy's, keyed by endpoint too and never by the API key.

Importing this module imports DSPy; :func:`._cache.configure_cache` imports it when it installs
a cache, so that importing the LM layer does not.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._compat import cache_class, cache_request, on_disk_write_failure


class EndpointAwareCache(cache_class()):  # type: ignore[misc]  # DSPy's Cache, named in _compat
    """DSPy's cache whose keys keep the endpoint (as ``endpoint_key(url)`` names it); the first
    failed write to disk (a full disk) is passed to ``on_write_failure``, and no more is written."""

    def __init__(
        self,
        endpoint_key: Callable[[str], str],
        on_write_failure: Callable[[Exception], None] = lambda exc: None,
        **settings: Any,
    ) -> None:
        super().__init__(**settings)
        self.endpoint_key = endpoint_key
        on_disk_write_failure(self, on_write_failure)

    def cache_key(self, request: dict[str, Any], ignored_args_for_cache_key: list[str] | None = None) -> str:
        keyed, ignored = cache_request(request, ignored_args_for_cache_key, self.endpoint_key)
        return str(super().cache_key(keyed, ignored))
