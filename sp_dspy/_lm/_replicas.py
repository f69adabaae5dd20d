"""Several replicas of one self-hosted model (``--api-base URL1,URL2``) behind one ``dspy.LM``.

Every call goes through ``litellm.Router``, one deployment per endpoint, least-busy (ties go to
the first endpoint); a failing replica is cooled down and the request retried at once on another.
When every replica failed, DSPy's ``num_retries`` waits out the cooldown (``retry_after``).
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Self

from .._redact import redact_data
from ._config import display_endpoint
from ._direct import request_messages, request_overrides
from ._dspy import AsyncEngine, Shared, SyncEngine, ensure_offline_env, import_dspy
from ._errors import classify_error, lm_error
from ._profiles import SELF_HOSTED_PLACEHOLDER_KEY

if TYPE_CHECKING:
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


def _quiet_cancelled_release(record: logging.LogRecord) -> bool:
    """Drop LiteLLM's warning that a background release (of Redis counts a pool does not use)
    was cancelled at loop close: nothing is lost."""
    return record.getMessage() != "an attempt's release was cancelled before it finished"


class EndpointCounter(Shared, dict[str, int]):
    """Answers served per endpoint (``lm.endpoint_requests``, in the manifest), every endpoint
    listed from the start; the LM's copies share it."""

    def __init__(self, endpoints: Sequence[str]) -> None:
        super().__init__(dict.fromkeys(endpoints, 0))
        self._lock = threading.Lock()

    def add(self, endpoint: str) -> None:
        with self._lock:
            self[endpoint] = self.get(endpoint, 0) + 1


class ReplicaPool:
    """One ``litellm.Router`` over the replicas of ``model_id``, shared by both engines (built
    eagerly: importing LiteLLM takes seconds); ``timeout`` is per attempt on one replica."""

    def __init__(
        self, endpoints: Sequence[str], model_id: str, *, api_key: str, timeout: float | None = None
    ) -> None:
        ensure_offline_env()
        from litellm import Router

        self.endpoints = [e.strip().rstrip("/") for e in endpoints]
        self.model_id = model_id
        self.timeout = timeout
        self.counter = EndpointCounter([display_endpoint(e) for e in self.endpoints])
        logging.getLogger("LiteLLM Router").addFilter(_quiet_cancelled_release)  # idempotent: one function
        deployments = [
            {
                "model_name": MODEL_GROUP,
                "litellm_params": {"model": f"openai/{model_id}", "api_base": url, "api_key": api_key},
                "model_info": {"id": str(index)},
            }
            for index, url in enumerate(self.endpoints)
        ]
        self.router: Any = Router(
            model_list=deployments,
            routing_strategy=ROUTING_STRATEGY,
            # One attempt per replica; waiting and trying the pool again is DSPy's job.
            num_retries=len(deployments) - 1,
            retry_after=0,
            allowed_fails=0,
            cooldown_time=COOLDOWN_S,
            timeout=timeout,
        )

    def arguments(self, request: Request) -> dict[str, Any]:
        """The OpenAI chat body for ``request`` (as sp-dspy's HTTP engine builds it), minus the group key."""
        data = {k: v for k, v in request_overrides(request).items() if v is not None}
        data["messages"] = request_messages(request)
        return data

    def response(self, raw: Any, request: Request) -> Response:
        """DSPy's ``Response`` for a LiteLLM answer, counted for the replica that gave it."""
        response_from_openai_chat = import_dspy().lm15.response_from_openai_chat
        hidden = getattr(raw, "_hidden_params", None) or {}
        index = str(hidden.get("model_id", ""))
        if index.isdigit() and int(index) < len(self.endpoints):
            self.counter.add(display_endpoint(self.endpoints[int(index)]))
        # The answer enters sp-dspy here: keys masked before DSPy caches it or anything reads it.
        body = redact_data(raw.model_dump() if hasattr(raw, "model_dump") else dict(raw))
        return response_from_openai_chat(body, model=request.model)


@contextmanager
def _routed_errors(model: str) -> Iterator[None]:
    """LiteLLM's errors as DSPy's ``LM*Error`` classes, so DSPy retries them; "no deployments
    available" (all cooling down) carries the cooldown as ``retry_after``."""
    from litellm.types.router import RouterRateLimitError

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


class _ReplicaEngine(Shared):
    """What DSPy's adapters may ask of the pool (a custom engine declares it itself)."""

    def __init__(self, pool: ReplicaPool, *, json_schema: bool) -> None:
        self.pool = pool
        # The JSON adapter sends a schema only to an LM that says it supports one.
        self.supports_response_schema = json_schema
        self.supported_params = SUPPORTED_PARAMS | ({"response_format"} if json_schema else set())

    def dump_state(self) -> dict[str, Any]:
        """What a saved program records: endpoints and settings, never the key."""
        pool = self.pool
        return {
            "endpoints": [display_endpoint(e) for e in pool.endpoints],
            "model_id": pool.model_id,
            "timeout": pool.timeout,
            "json_schema": self.supports_response_schema,
        }

    @classmethod
    def load_state(cls, state: Mapping[str, Any]) -> Self:
        """The engine a saved program describes (both engines of a loaded LM share a pool); the
        state holds no key, so it sends the placeholder: for servers that check keys, use ``make_lm``."""
        endpoints = tuple(str(e) for e in state["endpoints"])
        pool = _loaded_pool(endpoints, str(state["model_id"]), state.get("timeout"))
        return cls(pool, json_schema=bool(state.get("json_schema")))


class ReplicaEngine(_ReplicaEngine, SyncEngine):
    """Synchronous DSPy engine: one routed call per request (DSPy owns retries and cache)."""

    def complete(self, request: Request) -> Response:
        data = self.pool.arguments(request)
        with _routed_errors(request.model):
            raw = self.pool.router.completion(model=MODEL_GROUP, **data)
        return self.pool.response(raw, request)


class AsyncReplicaEngine(_ReplicaEngine, AsyncEngine):
    """The async twin (the runner's path); it shares the sync engine's pool and counts."""

    async def complete(self, request: Request) -> Response:
        data = self.pool.arguments(request)
        with _routed_errors(request.model):
            raw = await self.pool.router.acompletion(model=MODEL_GROUP, **data)
        return self.pool.response(raw, request)


@functools.cache
def _loaded_pool(endpoints: tuple[str, ...], model_id: str, timeout: float | None) -> ReplicaPool:
    return ReplicaPool(endpoints, model_id, api_key=SELF_HOSTED_PLACEHOLDER_KEY, timeout=timeout)
