"""The registry of batch wires: which providers' batch APIs sp-dspy drives, and through which class."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from .._errors import ConfigError
from ._anthropic import AnthropicBatches
from ._openai import OpenAIBatches
from ._vllm import VllmRunBatch

if TYPE_CHECKING:
    from pathlib import Path

    from .._lm import DirectChat, HttpRequest
    from ._wire import BatchWire


class WireClass(Protocol):
    """A wire's class: built on a run's client (its SDK, key and API base); lines need neither."""

    def __call__(self, client: DirectChat, directory: Path) -> BatchWire: ...

    @staticmethod
    def line(custom_id: str, request: HttpRequest) -> dict[str, Any]: ...


#: Providers whose batch API sp-dspy drives, by model-string provider.
WIRES: dict[str, WireClass] = {
    "openai": OpenAIBatches,
    "anthropic": AnthropicBatches,
    "hosted_vllm": VllmRunBatch,  # offline on this machine's GPU, not an HTTP API
}


def wire_class(provider: str, model: str) -> WireClass:
    """The batch API of ``provider``.

    Raises:
        ConfigError: the provider has none sp-dspy drives (one line, before anything is sent).
    """
    found = WIRES.get(provider)
    if found is None:
        raise ConfigError(
            f"--batch: model '{model}': provider '{provider}' has no batch API sp-dspy can use "
            f"(it drives {', '.join(sorted(WIRES))}); run it without --batch"
        )
    return found


def wire_for(client: DirectChat, directory: Path) -> BatchWire:
    """The batch API of ``client``'s provider, at its API base, logging in ``directory`` (see :func:`wire_class`)."""
    return wire_class(client.config.provider, client.config.display_name())(client, directory)
