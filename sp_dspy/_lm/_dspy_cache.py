"""sp-dspy's response cache class: DSPy's, keyed by endpoint too and never by the API key, and
holding no key a server echoed into an answer.

Importing this module imports DSPy; :func:`._cache.configure_cache` imports it when it installs
a cache, so that importing the LM layer does not.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ValidationError

from .._redact import redact_data
from ._compat import cache_class, cache_request, on_disk_write_failure


class EndpointAwareCache(cache_class()):  # type: ignore[misc]  # DSPy's Cache, named in _compat
    """DSPy's cache whose keys keep the endpoint (as ``endpoint_key(url)`` names it) and whose
    entries are stored with every known key masked; the first failed write to disk (a full
    disk) is passed to ``on_write_failure``, and no more is written."""

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

    def put(
        self,
        request: dict[str, Any],
        value: Any,
        ignored_args_for_cache_key: list[str] | None = None,
        enable_memory_cache: bool = True,
    ) -> None:
        """Store ``value`` masked (:func:`stored_answer`): on DSPy's own engine (``--transport dspy``,
        providers without a profile) DSPy caches the answer before sp-dspy reads it. An answer
        that cannot be stored masked is not stored (the call keeps it; a rerun asks again)."""
        try:
            masked = stored_answer(value)
        except ValidationError:
            return
        super().put(request, masked, ignored_args_for_cache_key, enable_memory_cache)


def stored_answer(value: Any) -> Any:
    """``value`` (DSPy's cache record: plain data on its native engine, LiteLLM's response object
    on its compatibility engine) with every known key masked; the object itself when none is in it.

    Raises:
        ValidationError: a response object that does not accept its masked fields.
    """
    if isinstance(value, BaseModel):
        data = value.model_dump()
        masked = redact_data(data)
        return value if masked == data else type(value).model_validate(masked)
    return redact_data(value)
