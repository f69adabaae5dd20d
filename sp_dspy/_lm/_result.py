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
            prompt_tokens=add(self.prompt_tokens, other.prompt_tokens),
            completion_tokens=add(self.completion_tokens, other.completion_tokens),
            total_tokens=add(self.total_tokens, other.total_tokens),
            reasoning_tokens=add(self.reasoning_tokens, other.reasoning_tokens),
        )


class ChatResult(BaseModel):
    """One model answer to raw messages.

    ``usage`` and ``cost`` describe the answer as it was produced, also when it is
    replayed from the cache; ``cached`` says whether this call paid for it.
    ``cost`` is USD from the LiteLLM price snapshot bundled with DSPy; None when the
    model is not priced (self-hosted models, the fake).
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
