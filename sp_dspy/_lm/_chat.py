"""Raw chat messages through a ``dspy.LM`` (no adapter): the official baseline's path to a model.

:func:`chat` runs DSPy's own execution steps, as ``lm(messages=...)`` does, but keeps the
``CallResult`` that says whether the answer came from the cache and what it cost; an LM on
sp-dspy's HTTP engine is asked through that engine's client instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._usage import Usage, parse_usage
from ._compat import acall, call, response_usage
from ._direct import client_of
from ._result import ChatResult

if TYPE_CHECKING:
    import dspy

Messages = Sequence[Mapping[str, Any]]


def _raw_usage(response: Any) -> dict[str, Any] | None:
    """The ``usage`` of a LiteLLM/OpenAI response object or dict."""
    raw = getattr(response, "usage", None) or (
        response.get("usage") if isinstance(response, Mapping) else None
    )
    return dict(raw) if raw else None


def history_usage(entry: Mapping[str, Any]) -> tuple[Usage | None, bool]:
    """Tokens of the answer an ``lm.history`` entry records (None: none reported; no cost), and
    whether it came from the cache.

    DSPy records a cache replay with empty ``usage`` but keeps the replayed response; its
    tokens are counted from there, as the official path's :class:`ChatResult` counts them.
    """
    usage = entry.get("usage")
    if usage:
        return parse_usage(usage), False
    from dspy.lm15 import Response

    response = entry.get("response")
    responses = response if isinstance(response, list | tuple) else [response]
    raws = (
        response_usage(r) if isinstance(r, Response) else _raw_usage(r) for r in responses if r is not None
    )
    parts = [part for part in map(parse_usage, raws) if part is not None]
    return (Usage.total(parts) if parts else None), True


def answer_price(lm: Any, usage: Usage) -> float | None:
    """USD of an answer of ``usage`` tokens from ``lm``, for a call DSPy recorded unpriced (it
    leaves sp-dspy's HTTP engine's calls unpriced); None if unpriced or another engine."""
    client = client_of(lm)
    return None if client is None else client.price(usage)


def _to_result(result: Any) -> ChatResult:
    """Read DSPy's ``CallResult`` (native or LiteLLM-shaped) into a :class:`ChatResult`."""
    output = result.outputs[0] if result.outputs else ""
    text = output.get("text") if isinstance(output, Mapping) else output
    reasoning = output.get("reasoning_content") if isinstance(output, Mapping) else None
    response = result.responses[0] if result.responses else None
    usage = parse_usage(result.usage or (response_usage(response) if response is not None else None))
    if usage is None and result.raw is not None and not result.responses:
        usage = parse_usage(_raw_usage(result.raw))
    if result.cost is not None:
        usage = (usage or Usage()).model_copy(update={"cost": result.cost})
    return ChatResult(
        text=text or "",
        reasoning=reasoning or None,
        usage=usage,
        cached=bool(result.cache_hit),
        model=result.response_model,
        finish_reason=getattr(response, "finish_reason", None),
    )


def chat(lm: dspy.LM, messages: Messages, **kwargs: Any) -> ChatResult:
    """Send ``messages`` (``role``/``content`` dicts) through ``lm`` without an adapter.

    ``kwargs`` override the LM's settings for this call (``temperature``, ``max_tokens``,
    ``response_format``, ``cache=False``, ``rollout_id``...). Errors are DSPy's ``LM*Error``
    classes after DSPy's own retries (see ``classify_error``).
    """
    client = client_of(lm)
    if client is not None:
        return client.chat(messages, **kwargs)
    return _to_result(call(lm, [dict(m) for m in messages], kwargs))


async def achat(lm: dspy.LM, messages: Messages, **kwargs: Any) -> ChatResult:
    """Async :func:`chat`."""
    client = client_of(lm)
    if client is not None:
        return await client.achat(messages, **kwargs)
    return _to_result(await acall(lm, [dict(m) for m in messages], kwargs))
