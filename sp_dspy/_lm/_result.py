"""What one model answer is, whichever engine produced it: text, usage, cost, cache status."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, Field


class TokenUsage(BaseModel):
    """Token counts as the provider reported them (None: not reported)."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    reasoning_tokens: int | None = None

    def __add__(self, other: TokenUsage) -> TokenUsage:
        def add(a: int | None, b: int | None) -> int | None:
            return None if a is None and b is None else (a or 0) + (b or 0)

        return TokenUsage(
            **{name: add(getattr(self, name), getattr(other, name)) for name in TokenUsage.model_fields}
        )


class ChatResult(BaseModel):
    """One model answer to raw messages.

    ``usage`` and ``cost`` (USD at the price snapshot bundled with DSPy; None: unpriced) describe
    the answer as produced, also when replayed from the cache; ``cached`` says this call paid nothing.
    """

    text: str
    reasoning: str | None = None
    usage: TokenUsage = Field(default_factory=TokenUsage)
    cost: float | None = None
    cached: bool = False
    model: str | None = None
    finish_reason: str | None = None
    id: str | None = None


def token_usage(raw: object) -> TokenUsage:
    """OpenAI-style ``usage`` (reasoning tokens from ``completion_tokens_details``); empty if absent."""
    if not raw or not isinstance(raw, Mapping):
        return TokenUsage()
    details = raw.get("completion_tokens_details") or {}
    reasoning = details.get("reasoning_tokens") if isinstance(details, Mapping) else None
    return TokenUsage(
        prompt_tokens=raw.get("prompt_tokens"),
        completion_tokens=raw.get("completion_tokens"),
        total_tokens=raw.get("total_tokens"),
        reasoning_tokens=reasoning,
    )
