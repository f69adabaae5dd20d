"""Token logprobs of a chat completion, read into DSPy's types: where a guard's P(Yes) comes from.

Only what the server sent, whole: a malformed block is no logprobs, never a made-up one.
"""

from __future__ import annotations

from typing import Any

from ._dspy import import_dspy


def openai_logprobs(data: dict[str, Any]) -> tuple[Any, ...] | None:
    """The answer's token logprobs (``choices[0].logprobs.content``) as DSPy's ``TokenLogprob``s; None
    when the server sent none (a guard's probability of ``Yes`` is read from the first one)."""
    choices = data.get("choices")
    first: Any = choices[0] if isinstance(choices, list) and choices else None
    block = first.get("logprobs") if isinstance(first, dict) else None
    content = block.get("content") if isinstance(block, dict) else None
    if not isinstance(content, list):
        return None
    lm15 = import_dspy().lm15

    def scored(item: Any) -> bool:
        return (
            isinstance(item, dict) and isinstance(item.get("token"), str) and _is_number(item.get("logprob"))
        )

    tokens = []
    for item in content:
        if not scored(item):
            return None  # a malformed block is no logprobs, never a made-up one
        top = [
            lm15.TopLogprob(t["token"], float(t["logprob"]))
            for t in item.get("top_logprobs") or []
            if scored(t)
        ]
        tokens.append(lm15.TokenLogprob(item["token"], float(item["logprob"]), top=tuple(top)))
    return tuple(tokens)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == value and value <= 0
