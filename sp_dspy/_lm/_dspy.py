"""sp-dspy's side of DSPy: importing it offline, and what sp-dspy's custom engines share."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from types import ModuleType
from typing import TYPE_CHECKING, Any, Self

if TYPE_CHECKING:
    from dspy.lm15 import Request, Response


def ensure_offline_env() -> None:
    """Stop LiteLLM from fetching its price list over the network on import."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def import_dspy() -> ModuleType:
    """``import dspy`` with the offline environment in place (call this, not ``import``)."""
    ensure_offline_env()
    import dspy

    return dspy


class Shared:
    """Copies are the object itself: an LM's copies (optimizers deep-copy programs) share its
    engine's state (pools, counters, the fake's gold answers)."""

    def __deepcopy__(self, memo: dict[int, Any]) -> Self:
        return self

    def __copy__(self) -> Self:
        return self


class SyncEngine(Shared):
    """DSPy's synchronous engine contract; the stream is the whole answer (guard answers are parsed whole)."""

    def complete(self, request: Request) -> Response:
        raise NotImplementedError

    def stream(self, request: Request) -> Iterator[Any]:
        return iter(import_dspy().lm15.response_to_events(self.complete(request)))

    def close(self) -> None:
        """Nothing to release unless an engine says otherwise."""


class AsyncEngine(Shared):
    """DSPy's async engine contract, streamed as :class:`SyncEngine` is."""

    async def complete(self, request: Request) -> Response:
        raise NotImplementedError

    async def stream(self, request: Request) -> AsyncIterator[Any]:
        for event in import_dspy().lm15.response_to_events(await self.complete(request)):
            yield event

    async def aclose(self) -> None:
        """Nothing to release unless an engine says otherwise."""


def request_system(request: Request) -> str | None:
    """A DSPy request's system prompt as one string (None: it has none)."""
    system = request.system
    if system is not None and not isinstance(system, str):
        system = "".join(getattr(part, "text", "") or "" for part in system)
    return system
