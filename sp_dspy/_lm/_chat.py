"""Raw chat messages through a ``dspy.LM`` (no adapter): the official baseline's path to a model.

:func:`chat` runs DSPy's own execution steps, as ``lm(messages=...)`` does (DSPy's response
cache, retries and history, whatever the LM's engine), but keeps the ``CallResult`` that says
whether the answer came from the cache and what it cost.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._errors import ConfigError
from .._usage import Usage, parse_usage
from ._cache import BODY_FIELDS_KEY
from ._compat import acall, call
from ._direct import BATCHED, client_of
from ._dspy import import_dspy
from ._profiles import PROFILES
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


def response_usage(response: Any) -> Usage | None:
    """The usage an lm15 ``Response`` carries (what DSPy keeps of a cache replay), None if it
    reports none; prompt tokens as the engine counted them (sp-dspy's include cache reads)."""
    usage = response.usage
    if usage.input_tokens is None and usage.output_tokens is None:
        return None
    prompt, completion = usage.input_tokens or 0, usage.output_tokens or 0
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=usage.total_tokens or prompt + completion,
        reasoning_tokens=usage.reasoning_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
    )


def history_usage(entry: Mapping[str, Any]) -> tuple[Usage | None, bool]:
    """Tokens of the answer an ``lm.history`` entry records (None: none reported; no cost), and
    whether it came from the cache.

    DSPy records a cache replay with empty ``usage`` but keeps the replayed response; its
    tokens are counted from there, as the official path's :class:`ChatResult` counts them.
    """
    usage = entry.get("usage")
    if usage:
        return parse_usage(usage), False
    response_type = import_dspy().lm15.Response
    response = entry.get("response")
    responses = response if isinstance(response, list | tuple) else [response]
    found = (
        response_usage(r) if isinstance(r, response_type) else parse_usage(_raw_usage(r))
        for r in responses
        if r is not None
    )
    parts = [part for part in found if part is not None]
    return (Usage.total(parts) if parts else None), True


def batched_answer(lm: Any, response: Any) -> bool:
    """Whether ``response`` is one of the answers ``lm``'s run got from the provider's batch API
    (``eval --batch``), fresh or replayed from the response cache: paid at the batch rate by
    this run, not a cache hit. An answer of another run's batches replays as a cache hit."""
    client = client_of(lm)
    if client is None or client.preset is None:
        return False
    data = getattr(response, "provider_data", None)
    key = data.get(BATCHED) if isinstance(data, Mapping) else None
    return isinstance(key, str) and client.preset.holds(key)


def history_batched(lm: Any, entry: Mapping[str, Any]) -> bool:
    """Whether an ``lm.history`` entry's answer came from the run's batches (:func:`batched_answer`)."""
    response = entry.get("response")
    responses = response if isinstance(response, list | tuple) else [response]
    return any(batched_answer(lm, r) for r in responses if r is not None)


def answer_price(lm: Any, usage: Usage) -> float | None:
    """USD of an answer of ``usage`` tokens from ``lm``, for a call DSPy recorded unpriced (it
    leaves sp-dspy's HTTP engine's calls unpriced); None if unpriced or another engine."""
    client = client_of(lm)
    return None if client is None else client.price(usage)


def _to_result(lm: Any, result: Any) -> ChatResult:
    """Read DSPy's ``CallResult`` (native or LiteLLM-shaped) into a :class:`ChatResult`, priced
    by sp-dspy's HTTP engine where that is ``lm``'s (DSPy leaves its calls unpriced)."""
    output = result.outputs[0] if result.outputs else ""
    text = output.get("text") if isinstance(output, Mapping) else output
    reasoning = output.get("reasoning_content") if isinstance(output, Mapping) else None
    response = result.responses[0] if result.responses else None
    usage = parse_usage(result.usage)
    if usage is None and response is not None:
        usage = response_usage(response)  # a cache replay: DSPy keeps the response, not its usage
    if usage is None and result.raw is not None and not result.responses:
        usage = parse_usage(_raw_usage(result.raw))
    client = client_of(lm)
    first_token = _first_token_logprobs(output.get("logprobs") if isinstance(output, Mapping) else None)
    cost = result.cost if client is None or usage is None else client.price(usage)
    if cost is not None:
        usage = (usage or Usage()).model_copy(update={"cost": cost})
    batched = response is not None and batched_answer(lm, response)
    return ChatResult(
        text=text or "",
        reasoning=reasoning or None,
        usage=usage,
        cached=bool(result.cache_hit) and not batched,
        batched=batched,
        model=result.response_model,
        finish_reason=getattr(response, "finish_reason", None),
        first_token_logprobs=first_token,
    )


def _first_token_logprobs(logprobs: Any) -> dict[str, float] | None:
    """``{token: logprob}`` of the first decoding step (the chosen token and its alternatives)."""
    content = logprobs.get("content") if isinstance(logprobs, Mapping) else None
    if not content:
        return None
    first = content[0]
    found = {str(first["token"]): float(first["logprob"])}
    for top in first.get("top_logprobs") or []:
        found.setdefault(str(top["token"]), float(top["logprob"]))
    return found


def effort_setting(lm: Any) -> tuple[str | None, bool]:
    """The reasoning effort ``lm`` is configured with, and whether the request carries it in a body
    field (False: the server reads none, so a harmony model's prompt must say it)."""
    client = client_of(lm)
    if client is None:
        effort = getattr(lm, "kwargs", {}).get("reasoning_effort")
        return (effort if isinstance(effort, str) else None), True
    return client.config.reasoning_effort, PROFILES[client.config.provider].effort_field is not None


def _call_kwargs(lm: Any, kwargs: dict[str, Any], body: Mapping[str, Any] | None) -> dict[str, Any]:
    """``kwargs`` with ``body`` (fields sent as they are) carried in the call's ``metadata``, where
    sp-dspy's HTTP engine reads them (``_cache.BODY_FIELDS_KEY``)."""
    if not body:
        return kwargs
    if client_of(lm) is None and not str(getattr(lm, "model", "")).startswith("fake/"):
        raise ConfigError(
            f"model '{getattr(lm, 'model', '')}': this program sends body fields ({', '.join(sorted(body))}) "
            "that only sp-dspy's HTTP engine carries; drop --transport dspy"
        )
    metadata = dict(getattr(lm, "kwargs", {}).get("metadata") or {})
    return {**kwargs, "metadata": {**metadata, BODY_FIELDS_KEY: dict(body)}}


def chat(
    lm: dspy.LM, messages: Messages, *, body: Mapping[str, Any] | None = None, **kwargs: Any
) -> ChatResult:
    """Send ``messages`` (``role``/``content`` dicts) through ``lm`` without an adapter.

    ``kwargs`` override the LM's settings for this call (``temperature``, ``max_tokens``,
    ``response_format``, ``cache=False``, ``rollout_id``, ``logprobs``...); ``body``: fields sent
    in the request body as they are (a guard model's ``chat_template_kwargs``), which DSPy's
    request has no slot for. Errors are DSPy's ``LM*Error`` classes after DSPy's own retries
    (see ``classify_error``).
    """
    return _to_result(lm, call(lm, [dict(m) for m in messages], _call_kwargs(lm, kwargs, body)))


async def achat(
    lm: dspy.LM, messages: Messages, *, body: Mapping[str, Any] | None = None, **kwargs: Any
) -> ChatResult:
    """Async :func:`chat`."""
    return _to_result(lm, await acall(lm, [dict(m) for m in messages], _call_kwargs(lm, kwargs, body)))
