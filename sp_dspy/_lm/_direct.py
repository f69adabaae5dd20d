"""A lean transport for raw chat messages to one OpenAI-compatible endpoint.

The official baselines send fixed messages and read back text: they need none of
DSPy's adapters, and DSPy 3.4's generic call path (engine selection, request
re-encoding, result normalisation) costs ~2 ms of CPU per call, which on a small
client machine caps a concurrent run well below what a vLLM server can answer
(``benchmarks/bench_runner.py``). :class:`DirectChat` posts the messages with aiohttp,
keeps one connection pool per event loop, and does what DSPy's path did around the
request, so results do not depend on the transport:

- the response cache is DSPy's (``dspy.cache``, the endpoint-aware one of
  ``_cache``), under its own request identifier, so ``--no-cache`` and the cache
  directory apply alike;
- retries: ``num_retries`` more attempts on 408/409/429/5xx, timeouts and dropped
  connections, waiting what ``Retry-After`` says, else exponential backoff;
- failures raise DSPy's ``LM*Error`` classes (``_http_errors``);
- usage as the server reports it, cost from the LiteLLM price snapshot bundled
  with DSPy when the model is priced there.

``make_lm`` attaches a ``DirectChat`` to the LMs it builds for a single
OpenAI-compatible endpoint (``--transport auto``, the default, or ``direct``);
``chat`` and ``achat`` use it when present. A connection pool belongs to one event
loop: code that calls ``achat`` on its own loop wraps its top-level coroutine in
:func:`closing_transports` (the runner and ``Guard`` do), as one closes an
``httpx.AsyncClient``.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

from ._chat import ChatResult, token_usage
from ._http_errors import (
    RETRY_STATUSES,
    backoff_seconds,
    error_message,
    retry_after_seconds,
    status_error,
    transport_error,
)

if TYPE_CHECKING:
    import aiohttp

    from ._config import LMConfig

#: Model-string providers whose endpoint speaks the OpenAI chat-completions wire.
DIRECT_PROVIDERS = frozenset({"openai", "hosted_vllm", "openai_like", "llamacpp", "sp-openai-compatible"})
#: Bumped when the cached value's layout changes, so old entries are not misread.
CACHE_IDENTIFIER = "sp_dspy.direct.chat_completions/1"

_T = TypeVar("_T")
_attached: weakref.WeakKeyDictionary[Any, DirectChat] = weakref.WeakKeyDictionary()


def direct_eligible(config: LMConfig, *, one_of_replicas: bool = False) -> bool:
    """Whether an LM of ``config`` talks to one OpenAI-compatible endpoint (direct-capable).

    ``one_of_replicas``: the LM serves one endpoint of several (``make_lms``); an LM
    over all replicas goes through LiteLLM's router instead.
    """
    single = one_of_replicas or len(config.api_bases) == 1
    return not config.is_fake and single and bool(config.api_bases) and config.provider in DIRECT_PROVIDERS


def attach(lm: Any, transport: DirectChat) -> None:
    """Route ``achat(lm, ...)`` through ``transport``."""
    _attached[lm] = transport


def attached(lm: Any) -> DirectChat | None:
    """The transport ``make_lm`` attached to ``lm``, if any."""
    try:
        return _attached.get(lm)
    except TypeError:  # not weak-referenceable: never attached
        return None


class DirectChat:
    """Chat completions against one endpoint: the request body, cache, retries, pricing."""

    def __init__(self, config: LMConfig, *, api_base: str, api_key: str, model_id: str) -> None:
        self.url = api_base.rstrip("/") + "/chat/completions"
        self.api_base = api_base
        self.model_id = model_id
        self.model = config.model
        self.provider = config.provider
        self.cache = config.cache
        self.num_retries = config.num_retries
        self.timeout_s = config.timeout
        self.headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}
        self.params: dict[str, Any] = {
            name: value
            for name, value in (
                ("temperature", config.temperature),
                ("max_tokens", config.max_tokens),
                ("reasoning_effort", config.reasoning_effort),
            )
            if value is not None
        }
        self._sessions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aiohttp.ClientSession] = (
            weakref.WeakKeyDictionary()
        )
        self._rates: tuple[float | None, float | None, float | None] | None = None

    def __deepcopy__(self, memo: dict[int, Any]) -> DirectChat:
        return self  # holds connection pools, not state: copies of an LM share it

    async def achat(self, messages: Sequence[Mapping[str, Any]], **overrides: Any) -> ChatResult:
        """One completion for ``messages``; ``overrides`` as for ``achat`` (``cache=False`` too)."""
        use_cache = bool(overrides.pop("cache", self.cache))
        body: dict[str, Any] = {"model": self.model_id, "messages": [dict(m) for m in messages]}
        body.update(self.params)
        rollout = overrides.pop("rollout_id", None)
        body.update({k: v for k, v in overrides.items() if v is not None})
        cache = _dspy_cache() if use_cache else None
        if cache is None:
            return self._result(await self._post(body))
        key = {"_fn_identifier": CACHE_IDENTIFIER, "api_base": self.api_base, "rollout_id": rollout, **body}
        hit = cache.get(key)
        if isinstance(hit, dict):
            return ChatResult.model_validate({**hit, "cached": True})
        result = self._result(await self._post(body))
        cache.put(key, result.model_dump(exclude={"cached"}))
        return result

    def chat(self, messages: Sequence[Mapping[str, Any]], **overrides: Any) -> ChatResult:
        """Blocking :meth:`achat` on a short-lived event loop (on its own thread inside a running one).

        The synchronous API is the rare path (the runner is async), so it trades the
        connection pool for simplicity: each call opens and closes its connection.
        """

        async def once() -> ChatResult:
            try:
                return await self.achat(messages, **overrides)
            finally:
                await self.aclose()

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(once())
        with ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(asyncio.run, once()).result()

    async def aclose(self) -> None:
        """Close this event loop's connection pool (the next call opens a new one)."""
        session = self._sessions.pop(asyncio.get_running_loop(), None)
        if session is not None:
            await session.close()

    def _session(self) -> aiohttp.ClientSession:
        import aiohttp

        loop = asyncio.get_running_loop()
        session = self._sessions.get(loop)
        if session is None or session.closed:
            # No connection cap here: the runner's worker pool bounds what is in flight.
            connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
            timeout = aiohttp.ClientTimeout(total=self.timeout_s)
            session = aiohttp.ClientSession(
                connector=connector, timeout=timeout, headers=self.headers, proxy=env_proxy(self.url)
            )
            self._sessions[loop] = session
        return session

    async def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        import aiohttp
        import orjson

        payload = orjson.dumps(body)
        session = self._session()
        for attempt in range(self.num_retries + 1):
            last = attempt == self.num_retries
            try:
                async with session.post(self.url, data=payload) as response:
                    raw = await response.read()
                    status = response.status
                    headers = {} if status < 300 else {k.lower(): v for k, v in response.headers.items()}
            except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
                if last:
                    raise transport_error(exc, model=self.model, timeout=True) from exc
                await asyncio.sleep(backoff_seconds(attempt, None))
                continue
            except (aiohttp.ClientError, OSError) as exc:
                if last:
                    raise transport_error(exc, model=self.model, timeout=False) from exc
                await asyncio.sleep(backoff_seconds(attempt, None))
                continue
            if status < 300:
                try:
                    data = orjson.loads(raw)
                except orjson.JSONDecodeError as exc:
                    raise status_error(
                        502, "response is not JSON", model=self.model, retry_after=None
                    ) from exc
                if isinstance(data, dict):
                    return data
                raise status_error(502, "response is not a JSON object", model=self.model, retry_after=None)
            wait = retry_after_seconds(headers)
            if status not in RETRY_STATUSES or last:
                raise status_error(status, error_message(raw), model=self.model, retry_after=wait)
            await asyncio.sleep(backoff_seconds(attempt, wait))
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _result(self, data: dict[str, Any]) -> ChatResult:
        choices = data.get("choices") or [{}]
        choice = choices[0] if isinstance(choices[0], dict) else {}
        message = choice.get("message") or {}
        usage = token_usage(data.get("usage"))
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        return ChatResult(
            text=message.get("content") or "",
            reasoning=reasoning if isinstance(reasoning, str) and reasoning else None,
            usage=usage,
            cost=self._cost(data.get("usage")),
            model=data.get("model") if isinstance(data.get("model"), str) else None,
            finish_reason=choice.get("finish_reason"),
        )

    def _cost(self, raw: Any) -> float | None:
        """USD for one answer at the snapshot's per-token prices; None if unpriced or unreported."""
        if self._rates is None:
            self._rates = _rates(self.provider, self.model_id)
        input_rate, output_rate, cached_rate = self._rates
        if input_rate is None or output_rate is None or not isinstance(raw, Mapping):
            return None
        prompt, completion = raw.get("prompt_tokens"), raw.get("completion_tokens")
        if not isinstance(prompt, int) or not isinstance(completion, int):
            return None
        details = raw.get("prompt_tokens_details") or {}
        cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
        cached = cached if isinstance(cached, int) and 0 <= cached <= prompt else 0
        return (
            (prompt - cached) * input_rate + cached * (cached_rate or input_rate) + completion * output_rate
        )


def env_proxy(url: str) -> str | None:
    """The proxy ``HTTP(S)_PROXY`` / ``NO_PROXY`` name for ``url`` (as httpx, DSPy's engine, reads them).

    Resolved once per connection pool: aiohttp's ``trust_env`` would re-read the
    environment (and ``~/.netrc``) on every request, which cost ~0.2 ms of CPU per call.
    """
    import urllib.parse
    import urllib.request

    parts = urllib.parse.urlsplit(url)
    if parts.hostname is None or urllib.request.proxy_bypass(parts.hostname):
        return None
    return urllib.request.getproxies().get(parts.scheme)


def _rates(provider: str, model_id: str) -> tuple[float | None, float | None, float | None]:
    """(input, output, cached-input) USD per token from DSPy's bundled price snapshot."""
    from dspy.clients.model_metadata import model_info, rate

    info = model_info(provider, model_id) if provider in ("openai", "hosted_vllm") else {}
    return (
        rate(info, "input_cost_per_token"),
        rate(info, "output_cost_per_token"),
        rate(info, "cache_read_input_token_cost"),
    )


def _dspy_cache() -> Any:
    import dspy

    return getattr(dspy, "cache", None)


async def close_direct_sessions() -> None:
    """Close every attached transport's pool on the running loop (end of a run)."""
    for transport in set(_attached.values()):
        await transport.aclose()


async def closing_transports(awaitable: Awaitable[_T]) -> _T:
    """Await ``awaitable``, then close the direct transports' pools on this loop.

    Wrap the top-level coroutine of ``asyncio.run`` in it: a pool belongs to one event
    loop and would otherwise outlive it (aiohttp warns about unclosed sessions).
    """
    try:
        return await awaitable
    finally:
        await close_direct_sessions()
