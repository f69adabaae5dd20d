"""What a provider's answer body says: its text, reasoning, finish reason and token logprobs, read
from an OpenAI chat completion or an Anthropic message (sp-dspy's HTTP engine, ``_direct``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._dspy import import_dspy
from ._errors import lm_error


def openai_answer(data: dict[str, Any], model: str) -> tuple[str, str | None, Any]:
    """Text, reasoning and finish reason of a chat completion (content parts read as their text).

    An envelope without a first choice holding a message (``choices: []`` or ``null``, a choice
    with none) is a failed call (``server_error``: retried, ``--retry-errors`` sends it again),
    never an empty answer, which would count as a refusal.
    """
    choices = data.get("choices")
    choice: Any = choices[0] if isinstance(choices, list) and choices else None
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict):
        what = "no choices" if choice is None else "no message in its first choice"
        raise lm_error("server_error", f"malformed response: {what}", model=model)
    content = message.get("content")
    if isinstance(content, list):  # OpenAI's content parts: [{"type": "text", "text": ...}, ...]
        texts = [part.get("text") for part in content if isinstance(part, Mapping)]
        content = "".join(text for text in texts if isinstance(text, str))
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    return (
        content if isinstance(content, str) else "",
        reasoning if isinstance(reasoning, str) and reasoning else None,
        choice.get("finish_reason"),
    )


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


def anthropic_answer(data: dict[str, Any]) -> tuple[str, str | None, Any]:
    """Text, thinking and stop reason of a messages response."""
    blocks = [b for b in data.get("content") or [] if isinstance(b, Mapping)]
    text = "".join(str(b.get("text") or "") for b in blocks if b.get("type") == "text")
    thinking = "".join(str(b.get("thinking") or "") for b in blocks if b.get("type") == "thinking")
    return text, thinking or None, data.get("stop_reason")
