"""Send raw chat messages through a ``dspy.LM``: the official baseline's path to a model.

The baseline must send the benchmark's exact bytes (no DSPy adapter), yet it should
share everything else with DSPy programs: the same engine, retries, response cache
(keyed by endpoint), history and usage tracking. :func:`chat` therefore runs DSPy's
own execution steps on the messages (``_compat.call``), which is what
``lm(messages=...)`` does, but keeps the ``CallResult`` that ``lm(...)`` throws away:
it alone says whether the answer came from the cache and what it cost. (Going
through ``lm(messages=...)`` would also print DSPy 3.4's deprecation warning for
message dictionaries on every case; DSPy callbacks are not invoked on this path.)
An LM on sp-dspy's HTTP engine is asked through that engine's client instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ._result import ChatResult, TokenUsage, token_usage

if TYPE_CHECKING:
    import dspy

Messages = Sequence[Mapping[str, Any]]
__all__ = [
    "ChatResult",
    "Messages",
    "TokenUsage",
    "achat",
    "answer_price",
    "chat",
    "history_usage",
    "token_usage",
]


def _response_usage(response: Any) -> Mapping[str, Any] | None:
    """The usage one response object reports: DSPy's native ``Response`` or a LiteLLM/OpenAI one."""
    from dspy.lm15 import Response

    from ._compat import response_usage

    if isinstance(response, Response):
        return response_usage(response)
    raw = getattr(response, "usage", None) or (
        response.get("usage") if isinstance(response, Mapping) else None
    )
    return dict(raw) if raw else None


def history_usage(entry: Mapping[str, Any]) -> tuple[TokenUsage, bool]:
    """Tokens of the answer an ``lm.history`` entry records, and whether it came from the cache.

    DSPy records an answer replayed from its response cache with empty ``usage`` (the
    call paid nothing) but keeps the replayed response, which still says what the
    answer took. Reading it counts a cached answer's tokens as the official path's
    :class:`ChatResult` does, so both paths report the same figures.
    """
    usage = entry.get("usage")
    if usage:
        return token_usage(usage), False
    response = entry.get("response")
    responses = response if isinstance(response, list | tuple) else [response]
    total = TokenUsage()
    for each in responses:
        if each is not None:
            total = total + token_usage(_response_usage(each))
    return total, True


def answer_price(lm: Any, usage: TokenUsage) -> float | None:
    """USD of an answer of ``usage`` tokens from ``lm``, for a call DSPy recorded unpriced.

    DSPy prices the calls of its own engines; it leaves those of a custom engine (sp-dspy's
    HTTP engine) unpriced, which that engine prices for the official path from the same
    price snapshot. None for a model the snapshot does not price, or another engine.
    """
    from ._direct import client_of

    client = client_of(lm)
    return None if client is None else client.price(usage)


def _to_result(result: Any) -> ChatResult:
    """Read DSPy's ``CallResult`` (native or LiteLLM-shaped) into a :class:`ChatResult`."""
    from ._compat import response_usage

    output = result.outputs[0] if result.outputs else ""
    text = output.get("text") if isinstance(output, Mapping) else output
    reasoning = output.get("reasoning_content") if isinstance(output, Mapping) else None
    response = result.responses[0] if result.responses else None
    usage = result.usage or (response_usage(response) if response is not None else None)
    if not usage and result.raw is not None and not result.responses:
        raw_usage = getattr(result.raw, "usage", None) or (
            result.raw.get("usage") if isinstance(result.raw, Mapping) else None
        )
        usage = dict(raw_usage) if raw_usage else None
    return ChatResult(
        text=text or "",
        reasoning=reasoning or None,
        usage=token_usage(usage),
        cost=result.cost,
        cached=bool(result.cache_hit),
        model=result.response_model,
        finish_reason=getattr(response, "finish_reason", None),
    )


def _plain(messages: Messages) -> list[dict[str, Any]]:
    return [dict(m) for m in messages]


def chat(lm: dspy.LM, messages: Messages, **kwargs: Any) -> ChatResult:
    """Send ``messages`` (``role``/``content`` dicts) through ``lm`` without an adapter.

    ``kwargs`` override the LM's settings for this call (``temperature``,
    ``max_tokens``, ``response_format``, ``cache=False``, ``rollout_id``...).
    Errors are DSPy's ``LM*Error`` classes after DSPy's own retries; classify them
    with ``classify_error``.
    """
    from ._compat import call
    from ._direct import client_of

    client = client_of(lm)
    if client is not None:
        return client.chat(messages, **kwargs)
    return _to_result(call(lm, _plain(messages), kwargs))


async def achat(lm: dspy.LM, messages: Messages, **kwargs: Any) -> ChatResult:
    """Async :func:`chat`.

    An LM whose engine is sp-dspy's HTTP engine (``_direct``) is asked through that
    engine's client, which answers the same way as DSPy's call path around it (cache,
    retries, errors, usage) at a fraction of the CPU; any other engine through DSPy.
    """
    from ._compat import acall
    from ._direct import client_of

    client = client_of(lm)
    if client is not None:
        return await client.achat(messages, **kwargs)
    return _to_result(await acall(lm, _plain(messages), kwargs))
