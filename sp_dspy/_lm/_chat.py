"""Send raw chat messages through a ``dspy.LM``: the official baseline's path to a model.

The baseline must send the benchmark's exact bytes (no DSPy adapter), yet it should
share everything else with DSPy programs: the same engine, retries, response cache
(keyed by endpoint), history and usage tracking. :func:`chat` therefore runs DSPy's
own execution steps (``prepare`` / ``execute`` / ``finalize``) on the messages, which
is what ``lm(messages=...)`` does, but keeps the ``CallResult`` that ``lm(...)`` throws
away: it alone says whether the answer came from the cache and what it cost. (Going
through ``lm(messages=...)`` would also print DSPy 3.4's deprecation warning for
message dictionaries on every case; DSPy callbacks are not invoked on this path.)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    import dspy

Messages = Sequence[Mapping[str, Any]]


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


def _to_result(result: Any) -> ChatResult:
    """Read DSPy's ``CallResult`` (native or LiteLLM-shaped) into a :class:`ChatResult`."""
    from dspy.clients.call_result import usage_dict

    output = result.outputs[0] if result.outputs else ""
    text = output.get("text") if isinstance(output, Mapping) else output
    reasoning = output.get("reasoning_content") if isinstance(output, Mapping) else None
    response = result.responses[0] if result.responses else None
    usage = result.usage or (usage_dict(response) if response is not None else None)
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


_price_lookups_cached = False


def cache_price_lookups() -> None:
    """Memoize the model-metadata lookup DSPy uses to price every completed call.

    DSPy 3.4 prices each call with ``dspy.clients.model_metadata.model_info``, which,
    for a model missing from its price table (every self-hosted model:
    ``hosted_vllm/...``, ``openai/<local name>``), scans the whole table, twice per
    call. That scan was about 1 ms of CPU per call, half of the client's cost, and
    under the GIL it capped a concurrent run at ~270 calls/s
    (``benchmarks/bench_runner.py``). The table is loaded once per process and never
    changes, so the answer for one (table, provider, model, namespaces) is computed
    once; every caller still gets its own deep copy, as from the original. Does
    nothing if DSPy's pricing module no longer looks as expected.
    """
    global _price_lookups_cached
    if _price_lookups_cached:
        return
    import copy

    from dspy.clients import costs, model_metadata

    original: Callable[..., dict[str, Any]] = model_metadata.model_info
    if getattr(costs, "model_info", None) is not original:
        _price_lookups_cached = True
        return
    found: dict[tuple[Any, ...], dict[str, Any]] = {}

    def model_info(provider: Any, model: Any, *, namespaces: Any = None) -> dict[str, Any]:
        table = model_metadata._load()
        try:
            key = (id(table), provider, model, None if namespaces is None else tuple(namespaces))
            hash(key)
        except TypeError:
            return original(provider, model, namespaces=namespaces)
        if key not in found:
            found[key] = original(provider, model, namespaces=namespaces)
        return copy.deepcopy(found[key])

    costs.model_info = model_info
    _price_lookups_cached = True


def chat(lm: dspy.LM, messages: Messages, **kwargs: Any) -> ChatResult:
    """Send ``messages`` (``role``/``content`` dicts) through ``lm`` without an adapter.

    ``kwargs`` override the LM's settings for this call (``temperature``,
    ``max_tokens``, ``response_format``, ``cache=False``, ``rollout_id``...).
    Errors are DSPy's ``LM*Error`` classes after DSPy's own retries; classify them
    with ``classify_error``.
    """
    from ._direct import attached

    transport = attached(lm)
    if transport is not None:
        return transport.chat(messages, **kwargs)
    from dspy.clients.execution import execute, finalize, prepare

    cache_price_lookups()
    call = prepare(lm, None, _plain(messages), kwargs)
    result = execute(lm, call)
    finalize(lm, call, result)
    return _to_result(result)


async def achat(lm: dspy.LM, messages: Messages, **kwargs: Any) -> ChatResult:
    """Async :func:`chat`: the LM's direct transport when it has one, else DSPy's async engine.

    ``make_lm`` attaches the direct transport (``_direct``) to LMs of one
    OpenAI-compatible endpoint; it answers the same way, at a fraction of the CPU.
    """
    import asyncio

    from ._direct import attached

    transport = attached(lm)
    if transport is not None:
        return await transport.achat(messages, **kwargs)
    from dspy.clients.execution import aexecute, finalize, prepare

    cache_price_lookups()
    call = await asyncio.to_thread(prepare, lm, None, _plain(messages), kwargs, asynchronous=True)
    result = await aexecute(lm, call)
    finalize(lm, call, result)
    return _to_result(result)
