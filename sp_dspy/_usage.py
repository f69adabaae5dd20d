"""What LM answers used: tokens and dollars of one call, or the sum over many.

One shape for every layer (as inspect_ai's ``ModelUsage``): the HTTP client reports it per
answer, programs sum it per case, records store it, budgets, manifests and reports total it.
:func:`parse_usage` is the one reader of a provider's usage dict (OpenAI, LiteLLM or
Anthropic shape). It imports nothing of sp-dspy, so any layer can use it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

_COUNTS = ("prompt_tokens", "completion_tokens", "total_tokens")
_OPTIONAL = ("reasoning_tokens", "cache_read_tokens", "cache_write_tokens")


class Usage(BaseModel):
    """Token counts and USD of LM answers; ``None`` fields were not reported (absent when stored).

    ``cache_read_tokens``/``cache_write_tokens`` are the prompt tokens read from (written to)
    the provider's prompt cache, part of ``prompt_tokens``. ``cost`` is USD at the price
    snapshot bundled with DSPy, also for an answer replayed from the response cache; ``None``:
    unpriced (a sum is unpriced only when no part was priced). Extra keys (another harness's)
    are kept; ``null`` counts read as 0.
    """

    model_config = ConfigDict(extra="allow")

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    reasoning_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    cost: float | None = None

    @field_validator(*_COUNTS, mode="before")
    @classmethod
    def _null_is_zero(cls, value: object) -> object:
        return 0 if value is None else value

    def __add__(self, other: Usage) -> Usage:
        counts = {name: getattr(self, name) + getattr(other, name) for name in _COUNTS}
        optional = {name: _add(getattr(self, name), getattr(other, name)) for name in (*_OPTIONAL, "cost")}
        return Usage(**counts, **optional)

    @classmethod
    def total(cls, parts: Iterable[Usage]) -> Usage:
        return sum(parts, cls())

    def tokens(self) -> dict[str, int]:
        """The token counts as a result line stores them (its ``cost`` is a field of the line)."""
        return self.model_dump(exclude_none=True, exclude={"cost"})


def _add(a: Any, b: Any) -> Any:
    """Unknown only when neither part is known."""
    return None if a is None and b is None else (a or 0) + (b or 0)


def _as_int(value: object) -> int:
    """A reported token count as an int (0 for anything that is not a number)."""
    return 0 if isinstance(value, bool) or not isinstance(value, int | float) else int(value)


def _reported(value: object) -> int | None:
    """An optional count: ``None`` when not reported or not a number."""
    return (
        None if value is None or isinstance(value, bool) or not isinstance(value, int | float) else int(value)
    )


def _details(raw: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = raw.get(key)
    return value if isinstance(value, Mapping) else {}


def parse_usage(raw: object) -> Usage | None:
    """A provider's usage dict as :class:`Usage` (no cost), or ``None`` when it reports nothing.

    OpenAI/LiteLLM: ``prompt_tokens``, ``completion_tokens``, ``total_tokens``, reasoning in
    ``completion_tokens_details``, cache reads in ``prompt_tokens_details.cached_tokens``.
    Anthropic: ``input_tokens`` excludes its cache counters, so the prompt is their sum.
    Missing or odd counts read as 0; a missing total is prompt plus completion.
    """
    if not raw or not isinstance(raw, Mapping):
        return None
    if "prompt_tokens" not in raw and ("input_tokens" in raw or "output_tokens" in raw):
        read = _reported(raw.get("cache_read_input_tokens"))
        write = _reported(raw.get("cache_creation_input_tokens"))
        prompt = _as_int(raw.get("input_tokens")) + (read or 0) + (write or 0)
        completion = _as_int(raw.get("output_tokens"))
        return Usage(
            prompt_tokens=prompt,
            completion_tokens=completion,
            total_tokens=prompt + completion,
            cache_read_tokens=read,
            cache_write_tokens=write,
        )
    prompt, completion = _as_int(raw.get("prompt_tokens")), _as_int(raw.get("completion_tokens"))
    reasoning = raw.get("reasoning_tokens")
    if reasoning is None:
        reasoning = _details(raw, "completion_tokens_details").get("reasoning_tokens")
    cached = _details(raw, "prompt_tokens_details")
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=_as_int(raw.get("total_tokens")) or prompt + completion,
        reasoning_tokens=_reported(reasoning),
        cache_read_tokens=_reported(cached.get("cached_tokens")),
        cache_write_tokens=_reported(cached.get("cache_creation_tokens")),
    )
