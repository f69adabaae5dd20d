"""What a provider's answer body says: its text, reasoning and finish reason, read from an OpenAI
chat completion or an Anthropic message (sp-dspy's HTTP engine, ``_direct``; token logprobs: ``_logprobs``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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


def anthropic_answer(data: dict[str, Any]) -> tuple[str, str | None, Any]:
    """Text, thinking and stop reason of a messages response."""
    blocks = [b for b in data.get("content") or [] if isinstance(b, Mapping)]
    text = "".join(str(b.get("text") or "") for b in blocks if b.get("type") == "text")
    thinking = "".join(str(b.get("thinking") or "") for b in blocks if b.get("type") == "thinking")
    return text, thinking or None, data.get("stop_reason")
