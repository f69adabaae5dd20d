"""Prompt caching: Anthropic's ``cache_control`` mark at the end of a request's stable prefix.

A DSPy program (or compiled artifact) sends the same instructions and demonstrations on every
call; ``--per-rule-layout prefix`` the same system message and conversation on every judgment
of a case. Anthropic caches such a prefix only where a request marks it; OpenAI and Gemini
cache a byte-stable prefix on their own. The official baselines send no mark (the reference's
bytes): a run says where its prefix ends (:func:`marking_prefix`), or nothing is marked.
"""

from __future__ import annotations

import contextlib
import contextvars
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

#: ``messages -> (index, offset)``: the stable prefix ends with message ``index`` (system
#: included), at character ``offset`` of its text (None: the whole message).
PrefixEnd = Callable[[Sequence[Mapping[str, Any]]], "tuple[int, int | None] | None"]
MARK: dict[str, str] = {"type": "ephemeral"}
#: Anthropic's smallest cacheable prefix in tokens, by model family (first match; else 1,024).
_MINIMUM_TOKENS = ((r"haiku-4|opus-4-5|opus-4\.5", 4096), (r"haiku", 2048))
_CHARS_PER_TOKEN = 4

_prefix_end: contextvars.ContextVar[PrefixEnd | None] = contextvars.ContextVar(
    "sp_dspy_prefix_end", default=None
)


@contextlib.contextmanager
def marking_prefix(end: PrefixEnd | None) -> Iterator[None]:
    """Mark, in the Anthropic requests built inside the block, the prefix ``end`` finds (None: no mark)."""
    token = _prefix_end.set(end)
    try:
        yield
    finally:
        _prefix_end.reset(token)


def before_last_message(messages: Sequence[Mapping[str, Any]]) -> tuple[int, int | None] | None:
    """A DSPy adapter's prefix: the system message and the demonstrations, all but the final message."""
    return (len(messages) - 2, None) if len(messages) >= 2 else None


def minimum_tokens(model_id: str) -> int:
    """The fewest prompt tokens Anthropic caches for ``model_id``."""
    for pattern, tokens in _MINIMUM_TOKENS:
        if re.search(pattern, model_id):
            return tokens
    return 1024


def cache_marked(
    body: dict[str, Any], messages: Sequence[Mapping[str, Any]], model_id: str
) -> dict[str, Any]:
    """``body`` (a messages-API body built from ``messages``) with a ``cache_control`` mark where
    this context's prefix ends, if that prefix is long enough to be cached; else ``body`` as is."""
    find = _prefix_end.get()
    end = None if find is None else find(messages)
    if end is None:
        return body
    index, offset = end
    texts = [str(m.get("content") or "") for m in messages[: index + 1]]
    if offset is not None:
        texts[-1] = texts[-1][:offset]
    if sum(map(len, texts)) < minimum_tokens(model_id) * _CHARS_PER_TOKEN:
        return body
    marked = dict(body)
    system_count = sum(1 for m in messages if m.get("role") == "system")
    if messages[index].get("role") == "system":
        if index != system_count - 1:
            return body  # a mark inside several joined system messages: not worth the bytes
        marked["system"] = [{"type": "text", "text": body["system"], "cache_control": MARK}]
        return marked
    position = index - system_count
    rest = list(marked["messages"])
    message = dict(rest[position])
    text = str(message.get("content") or "")
    head, tail = (text, "") if offset is None else (text[:offset], text[offset:])
    blocks: list[dict[str, Any]] = [{"type": "text", "text": head, "cache_control": MARK}]
    if tail:
        blocks.append({"type": "text", "text": tail})
    message["content"] = blocks
    rest[position] = message
    marked["messages"] = rest
    return marked
