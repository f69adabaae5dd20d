"""Several replicas of one self-hosted model behind one ``dspy.LM``, routed by LiteLLM.

``--api-base URL1,URL2`` names OpenAI-compatible servers that serve the *same* model
(two vLLM instances, several llama.cpp processes). Rather than balance requests by
hand, the LM gets a DSPy custom engine whose every call goes through
``litellm.Router`` with one deployment per endpoint:

- **least-busy** routing sends each request to the replica with the fewest requests
  in flight, which is what evenly sized servers of one model want (ties go to the
  first listed endpoint, so a strictly sequential run uses one replica);
- a replica that fails (HTTP 5xx, 429, a dropped connection, a timeout) is cooled
  down and the request is retried *at once* on another one: the router makes at most
  one attempt per replica. DSPy's own retries (``num_retries``) wrap that: when every
  replica has failed, the call waits until the cooldown ends (the router's "no
  deployment available" error is given that as its ``retry_after``) and tries again;
- every answer says which deployment produced it, so :class:`EndpointCounter`
  (``lm.endpoint_requests``) knows how many requests each endpoint served; the
  runner writes it into the manifest. Answers replayed from the response cache
  reached no endpoint and are not counted.

DSPy's response cache keys a custom engine's calls by the request and the LM's
settings only (a custom engine owns its connection, so ``api_base`` may not appear
among them). The LM therefore carries the endpoint group in its ``metadata`` setting
(under :data:`ENDPOINT_GROUP_KEY`, the one request field DSPy passes through
untouched); it is part of every cache key and the engine removes it before anything
is sent.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from .._redact import redact
from ._cache import ENDPOINT_GROUP_KEY
from ._config import _URL_USERINFO, LMConfig

if TYPE_CHECKING:
    import dspy
    from dspy.lm15 import Request, Response

ROUTING_STRATEGY = "least-busy"
MODEL_GROUP = "sp-dspy-replicas"
# Seconds a failed replica receives no requests; the others take its share meanwhile.
COOLDOWN_S = 5.0
# What the wire carries: the OpenAI chat parameters these servers read.
SUPPORTED_PARAMS = frozenset(
    {"temperature", "max_tokens", "max_completion_tokens", "top_p", "stop", "seed", "stream",
     "presence_penalty", "frequency_penalty", "logit_bias", "logprobs", "top_logprobs", "user"}
)  # fmt: skip


_CANCELLED_RELEASE = "an attempt's release was cancelled before it finished"


class _QuietSharedCountRelease(logging.Filter):
    """Drop LiteLLM's warning that a background release was cancelled at loop close.

    After each routed call the router updates its in-flight count in memory at once and
    then, in a background task, in Redis. A pool uses no Redis, so that task does
    nothing, but the runner's ``asyncio.run`` ending right after the last call cancels
    it and LiteLLM warns about every one. Nothing is lost; the warning only confuses.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != _CANCELLED_RELEASE


_quiet = _QuietSharedCountRelease()


def display_endpoint(url: str) -> str:
    """An endpoint as results may show it: no ``user:password@``, no known secret."""
    return redact(_URL_USERINFO.sub("***@", url.strip().rstrip("/")))


class EndpointCounter(Mapping[str, int]):
    """Requests served per endpoint (a live, thread-safe, read-only mapping).

    Every endpoint of the pool is listed from the start, so a replica that served
    nothing shows ``0`` instead of being missing. Copies of the LM (optimizers
    deep-copy programs) share the one counter, like they share the engine.
    """

    def __init__(self, endpoints: Sequence[str]) -> None:
        self._counts = dict.fromkeys(endpoints, 0)
        self._lock = threading.Lock()

    def add(self, endpoint: str) -> None:
        with self._lock:
            self._counts[endpoint] = self._counts.get(endpoint, 0) + 1

    def __getitem__(self, endpoint: str) -> int:
        with self._lock:
            return self._counts[endpoint]

    def __iter__(self) -> Iterator[str]:
        with self._lock:
            return iter(list(self._counts))

    def __len__(self) -> int:
        return len(self._counts)

    def __repr__(self) -> str:
        with self._lock:
            return f"EndpointCounter({self._counts!r})"

    def __deepcopy__(self, memo: dict[int, Any]) -> EndpointCounter:
        return self

    def __copy__(self) -> EndpointCounter:
        return self


class ReplicaPool:
    """One ``litellm.Router`` over the replicas of a model, shared by both engines.

    Built eagerly: importing LiteLLM takes seconds, better spent before the first
    call than inside a running event loop.

    Args:
        endpoints: OpenAI-compatible base URLs (``http://host:port/v1``), two or more.
        model_id: the model's name on the servers (what ``/v1/models`` lists).
        api_key: sent to every replica (self-hosted servers accept a placeholder).
        timeout: seconds per attempt on one replica; None: LiteLLM's default.
        cooldown_s: seconds a replica that failed is left out; None: :data:`COOLDOWN_S`.
    """

    def __init__(
        self,
        endpoints: Sequence[str],
        model_id: str,
        *,
        api_key: str,
        timeout: float | None = None,
        routing_strategy: str = ROUTING_STRATEGY,
        cooldown_s: float | None = None,
    ) -> None:
        if len(endpoints) < 2:
            raise ValueError("a replica pool needs at least two endpoints")
        self.endpoints = [e.strip().rstrip("/") for e in endpoints]
        self.model_id = model_id
        self.routing_strategy = routing_strategy
        self.cooldown_s = COOLDOWN_S if cooldown_s is None else cooldown_s
        self.timeout = timeout
        self.counter = EndpointCounter([display_endpoint(e) for e in self.endpoints])
        self.router: Any = self._build_router(api_key)

    def _build_router(self, api_key: str) -> Any:
        from ._dspy import ensure_offline_env

        ensure_offline_env()
        from litellm import Router

        logging.getLogger("LiteLLM Router").addFilter(_quiet)  # idempotent: one filter object
        deployments = [
            {
                "model_name": MODEL_GROUP,
                "litellm_params": {
                    "model": f"openai/{self.model_id}",
                    "api_base": url,
                    "api_key": api_key,
                },
                "model_info": {"id": str(index)},
            }
            for index, url in enumerate(self.endpoints)
        ]
        return Router(
            model_list=deployments,
            routing_strategy=self.routing_strategy,
            # One attempt per replica; waiting and trying the pool again is DSPy's job.
            num_retries=len(deployments) - 1,
            retry_after=0,
            allowed_fails=0,
            cooldown_time=self.cooldown_s,
            timeout=self.timeout,
        )

    def arguments(self, request: Request) -> dict[str, Any]:
        """The OpenAI chat body for ``request`` (as sp-dspy's HTTP engine builds it), minus the group key."""
        from ._direct import request_messages, request_overrides

        data = {k: v for k, v in request_overrides(request).items() if v is not None}
        data["messages"] = request_messages(request)
        return data

    def response(self, raw: Any, request: Request) -> Response:
        """DSPy's ``Response`` for a LiteLLM answer, counted for the replica that gave it."""
        from dspy.lm15 import response_from_openai_chat

        hidden = getattr(raw, "_hidden_params", None) or {}
        index = str(hidden.get("model_id", ""))
        if index.isdigit() and int(index) < len(self.endpoints):
            self.counter.add(display_endpoint(self.endpoints[int(index)]))
        body = raw.model_dump() if hasattr(raw, "model_dump") else dict(raw)
        return response_from_openai_chat(body, model=request.model)

    def dump_state(self) -> dict[str, Any]:
        """What a saved program records: endpoints and settings, never the key."""
        return {
            "endpoints": [display_endpoint(e) for e in self.endpoints],
            "model_id": self.model_id,
            "timeout": self.timeout,
            "routing_strategy": self.routing_strategy,
        }


@contextmanager
def _routed_errors(model: str) -> Iterator[None]:
    """LiteLLM's errors as DSPy's ``LM*Error`` classes (the kind ``classify_error`` names), so DSPy retries them.

    When every replica is cooling down the router refuses at once with "no deployments
    available"; DSPy's default backoff (1, 2, 4 s) would spend all retries inside the
    cooldown, so the error carries the cooldown as ``retry_after``, which DSPy waits.
    """
    from litellm.types.router import RouterRateLimitError

    from ._errors import classify_error
    from ._http_errors import lm_error

    try:
        yield
    except RouterRateLimitError as exc:
        raise lm_error("rate_limit", str(exc), model=model, retry_after=exc.cooldown_time) from exc
    except Exception as exc:
        kind = classify_error(exc)
        if kind in ("other", "config", "parse"):
            raise
        status = getattr(exc, "status_code", None)
        raise lm_error(
            kind, str(exc), model=model, status=status if isinstance(status, int) else None
        ) from exc


class _EngineCapabilities:
    """What DSPy's adapters may ask of the pool (a custom engine declares it itself)."""

    def __init__(self, pool: ReplicaPool, *, json_schema: bool) -> None:
        self.pool = pool
        self.json_schema = json_schema
        # The JSON adapter sends a schema only to an LM that says it supports one.
        self.supports_response_schema = json_schema
        self.supported_params = SUPPORTED_PARAMS | ({"response_format"} if json_schema else set())

    def dump_state(self) -> dict[str, Any]:
        return {**self.pool.dump_state(), "json_schema": self.json_schema}

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return self  # an engine is a connection: copies of a program share it

    def __copy__(self) -> Any:
        return self


class ReplicaEngine(_EngineCapabilities):
    """Synchronous DSPy engine: one routed call per request (DSPy owns retries and cache)."""

    def complete(self, request: Request) -> Response:
        data = self.pool.arguments(request)
        with _routed_errors(request.model):
            raw = self.pool.router.completion(model=MODEL_GROUP, **data)
        return self.pool.response(raw, request)

    def stream(self, request: Request) -> Iterator[Any]:
        """The whole answer as one stream (guard answers are short and parsed whole)."""
        from dspy.lm15 import response_to_events

        return iter(response_to_events(self.complete(request)))

    def close(self) -> None:
        """Nothing to release: LiteLLM owns the HTTP clients."""

    @classmethod
    def load_state(cls, state: Mapping[str, Any]) -> ReplicaEngine:
        return cls(_pool_from_state(state), json_schema=bool(state.get("json_schema")))


class AsyncReplicaEngine(_EngineCapabilities):
    """The async twin (the runner's path); it shares the sync engine's pool and counts."""

    async def complete(self, request: Request) -> Response:
        data = self.pool.arguments(request)
        with _routed_errors(request.model):
            raw = await self.pool.router.acompletion(model=MODEL_GROUP, **data)
        return self.pool.response(raw, request)

    async def stream(self, request: Request) -> AsyncIterator[Any]:
        from dspy.lm15 import response_to_events

        for event in response_to_events(await self.complete(request)):
            yield event

    async def aclose(self) -> None:
        """Nothing to release: LiteLLM owns the HTTP clients."""

    @classmethod
    def load_state(cls, state: Mapping[str, Any]) -> AsyncReplicaEngine:
        return cls(_pool_from_state(state), json_schema=bool(state.get("json_schema")))


_loaded_pools: dict[tuple[Any, ...], ReplicaPool] = {}
_loaded_lock = threading.Lock()


def _pool_from_state(state: Mapping[str, Any]) -> ReplicaPool:
    """The pool a saved engine describes; both engines of a loaded LM get the same one.

    The state holds no key, so a loaded pool sends the self-hosted placeholder; for
    servers that check keys, build the LM again with ``make_lm``.
    """
    from ._keys import SELF_HOSTED_PLACEHOLDER_KEY

    endpoints = tuple(str(e) for e in state["endpoints"])
    strategy = str(state.get("routing_strategy", ROUTING_STRATEGY))
    key = (endpoints, str(state["model_id"]), state.get("timeout"), strategy)
    with _loaded_lock:
        if key not in _loaded_pools:
            _loaded_pools[key] = ReplicaPool(
                endpoints,
                key[1],
                api_key=SELF_HOSTED_PLACEHOLDER_KEY,
                timeout=key[2],
                routing_strategy=strategy,
            )
        return _loaded_pools[key]


def make_replica_lm(config: LMConfig, *, model_id: str, api_key: str) -> dspy.LM:
    """A ``dspy.LM`` that spreads ``config``'s requests over all of its ``api_bases``.

    ``lm.endpoint_requests`` counts the requests each endpoint served.
    """
    from ._cache import ensure_cache_configured, register_endpoint_group
    from ._dspy import import_dspy

    dspy = import_dspy()
    endpoints = config.api_bases
    register_endpoint_group(endpoints)
    pool = ReplicaPool(endpoints, model_id, api_key=api_key, timeout=config.timeout)
    ensure_cache_configured()
    # The LM's settings are saved with programs and shown in its history: the group is
    # written as the manifest writes endpoints, without URL credentials.
    group = ",".join(pool.counter)
    kwargs: dict[str, Any] = {"metadata": {ENDPOINT_GROUP_KEY: group}}
    if config.reasoning_effort is not None:
        kwargs["reasoning_effort"] = config.reasoning_effort
    lm = dspy.LM(
        config.model,
        engine=ReplicaEngine(pool, json_schema=config.json_schema),
        async_engine=AsyncReplicaEngine(pool, json_schema=config.json_schema),
        temperature=config.temperature,
        max_tokens=config.max_tokens,
        cache=config.cache,
        num_retries=config.num_retries,
        **kwargs,
    )
    lm.endpoint_requests = pool.counter
    return lm
