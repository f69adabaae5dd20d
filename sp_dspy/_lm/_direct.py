"""sp-dspy's HTTP engine: each request built from a config and its provider profile, posted as built.

:meth:`DirectChat.request` builds the one :class:`HttpRequest` that is sent, cached and shown
(``eval --show-request``). It is a ``dspy.LM``'s engine, one attempt per request: every call
(DSPy programs and the official baseline's raw messages alike) goes through DSPy's execution,
which owns the response cache and the retries.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import json
import urllib.parse
import urllib.request
import weakref
from collections.abc import Awaitable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, Self, TypeVar

import orjson

from .._errors import ConfigError
from .._redact import redact_data
from .._usage import Usage, parse_usage
from ._answers import anthropic_answer, openai_answer
from ._cache import BODY_FIELDS_KEY, ENDPOINT_GROUP_KEY
from ._compat import price_rates
from ._config import _KEY_HEADERS, LMConfig, display_endpoint
from ._dspy import AsyncEngine, Shared, SyncEngine, import_dspy, request_system
from ._errors import error_message, retry_after_seconds, status_error, transport_error
from ._logprobs import openai_logprobs
from ._profiles import PROFILES, SELF_HOSTED_PLACEHOLDER_KEY, key_for, model_id
from ._prompt_cache import cache_marked
from ._rate import controller_for
from ._rate_wait import send_rate_limited

if TYPE_CHECKING:
    import aiohttp
    from dspy.lm15 import Request, Response

#: Request-config fields a DSPy program may set per call, sent under the same name.
_CALL_FIELDS = ("temperature", "top_p", "seed", "presence_penalty", "frequency_penalty", "response_format")
#: A nested JSON schema's fields, in the order they are sent.
_SCHEMA_FIELDS = ("name", "strict", "schema")
_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_call"}

_T = TypeVar("_T")
_clients: weakref.WeakSet[DirectChat] = weakref.WeakSet()
#: The requests built in this context while :func:`logging_requests` collects them.
_request_log: contextvars.ContextVar[list[HttpRequest] | None] = contextvars.ContextVar(
    "sp_dspy_request_log", default=None
)


@dataclass(frozen=True)
class HttpRequest:
    """One request exactly as it goes on the wire (the key included in ``headers``)."""

    url: str
    headers: dict[str, str]
    body: dict[str, Any]

    def shown(self) -> dict[str, Any]:
        """The request with keys masked (``Bearer sk-...`` -> ``Bearer ***``, ``https://user:KEY@host``
        -> ``https://***@host``): what ``--show-request`` prints."""
        headers = {}
        for name, value in self.headers.items():
            if name.lower() in _KEY_HEADERS:
                scheme, _, secret = value.partition(" ")
                value = f"{scheme} ***" if secret else "***"
            headers[name] = value
        return {"method": "POST", "url": display_endpoint(self.url), "headers": headers, "body": self.body}


class RequestCaptured(BaseException):
    """Raised instead of sending while a client captures (``--show-request``); a ``BaseException``
    so that no layer between the program and the client turns it into an error record."""

    def __init__(self, request: HttpRequest) -> None:
        super().__init__("request captured, not sent")
        self.request = request


class PresetAnswers(Protocol):
    """Answers obtained in advance (a run's batch results, ``sp_dspy._batch``): consulted instead of
    the network, so that each request is built and cached exactly as when it is sent alone."""

    def answer(self, request: HttpRequest) -> dict[str, Any]:
        """The answer's JSON, or raise what sending would have raised (or :class:`RequestCaptured`)."""
        ...

    def key(self, request: HttpRequest) -> str:
        """The request's id among these answers (an answer carries it: :data:`BATCHED`)."""
        ...

    def holds(self, key: str) -> bool:
        """Whether ``key`` names one of these answers: a replay of it is this run's batch answer."""
        ...


#: The ``provider_data`` key of an answer read from :attr:`DirectChat.preset` (its request's id
#: there): DSPy's response cache keeps it, so a replay of a batch answer is still known as one.
BATCHED = "sp_dspy_batched"


class DirectChat(Shared):
    """Requests to one endpoint on its provider's wire: body, cache, retries, usage, cost; an
    LM's copies share it (it holds connection pools, one per event loop)."""

    def __init__(self, config: LMConfig, api_base: str) -> None:
        profile = PROFILES[config.provider]
        api_key = key_for(config, api_base) or SELF_HOSTED_PLACEHOLDER_KEY
        if urllib.parse.urlsplit(api_base.strip()).username is not None:
            # aiohttp would send them as Basic auth in the Authorization header the key needs.
            raise ConfigError(
                f"model '{config.display_name()}': endpoint {display_endpoint(api_base)} carries "
                "credentials (user:password@), which cannot be sent beside the key's header; drop them "
                "from the URL and name the key's variable in api_key_env (--api-key-env)"
            )
        self.anthropic = profile.wire == "anthropic-messages"
        if config.thinking is not None and not self.anthropic:
            raise ConfigError(
                f"model '{config.display_name()}': 'thinking' is an Anthropic messages setting; "
                "for other providers put the provider's field in extra_body"
            )
        self.config = config
        self.api_base = api_base
        base = api_base.strip().rstrip("/")  # an Anthropic base may end in /v1 or not
        self.url = base.removesuffix("/v1") + "/v1/messages" if self.anthropic else base + "/chat/completions"
        self.model_id = model_id(config.model)
        auth = {"x-api-key": api_key} if self.anthropic else {"Authorization": f"Bearer {api_key}"}
        self.headers = {"Content-Type": "application/json", **auth, **dict(profile.headers)}
        self.headers.update(config.extra_headers or {})
        self.limit_field = profile.limit_field_of(self.model_id)
        limit = config.max_tokens if config.max_tokens is not None else profile.default_limit
        self.params: dict[str, Any] = {}
        if config.temperature is not None:
            self.params["temperature"] = config.temperature
        if limit is not None:
            self.params[self.limit_field] = limit
        if config.reasoning_effort is not None and profile.effort_field is not None:
            # "reasoning.effort" -> {"reasoning": {"effort": ...}}
            *parents, last = profile.effort_field.split(".")
            target = self.params
            for name in parents:
                target = target.setdefault(name, {})
            target[last] = config.reasoning_effort
        if config.thinking is not None:
            self.params["thinking"] = dict(config.thinking)
        self.capturing = False  # eval --show-request: raise RequestCaptured instead of sending
        #: ``eval --batch``: answers from the provider's batch API, read instead of sending; their
        #: prices are the batch rates.
        self.preset: PresetAnswers | None = None
        self._sessions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aiohttp.ClientSession] = (
            weakref.WeakKeyDictionary()
        )
        #: Answers the endpoint sent, whoever asked (not cache replays): the manifest's ``endpoint_requests``.
        self.answered = 0
        #: The admission of calls to this endpoint and model, shared by every client of the process.
        self.rate = controller_for(display_endpoint(self.url), self.model_id, adaptive=config.adaptive)
        _clients.add(self)

    @property
    def _rates(self) -> tuple[float | None, float | None, float | None, float | None]:
        return _rates_of(self.config.provider, self.model_id, batch=self.preset is not None)

    def request(self, messages: Sequence[Mapping[str, Any]], **overrides: Any) -> HttpRequest:
        """The request for ``messages``; ``overrides`` (``max_tokens``, ``temperature``, ...) win,
        ``extra_body`` is merged last. While :attr:`capturing`, :class:`RequestCaptured` is raised
        instead of sending."""
        body: dict[str, Any] = {"model": self.model_id}
        plain = [dict(m) for m in messages]
        if self.anthropic:
            system = [str(m.get("content") or "") for m in plain if m.get("role") == "system"]
            if system:
                body["system"] = "\n\n".join(system)
            body["messages"] = [m for m in plain if m.get("role") != "system"]
            body = cache_marked(body, plain, self.model_id)  # DSPy programs' stable prefix, where long enough
        else:
            body["messages"] = plain
        body.update(self.params)
        limit = overrides.pop("max_tokens", None)
        if limit is not None:
            body[self.limit_field] = limit
        if self.anthropic and overrides.get("response_format") is not None:
            raise ConfigError(
                f"model '{self.config.display_name()}': Anthropic's messages API takes no response_format; "
                "drop json_schema for this model"
            )
        body.update({k: v for k, v in overrides.items() if v is not None})
        body.update(self.config.extra_body or {})
        request = HttpRequest(self.url, self.headers, body)
        log = _request_log.get()
        if log is not None:
            log.append(request)
        if self.capturing:
            raise RequestCaptured(request)
        return request

    def run_sync(self, make: Any) -> Any:
        """Run the coroutine ``make()`` on a short-lived event loop (its own thread inside a running
        one), opening and closing its connection: the synchronous API is the rare path."""

        async def once() -> Any:
            try:
                return await make()
            finally:
                await self.aclose()

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(once())
        with ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(asyncio.run, once()).result()

    async def acomplete(self, request: Request) -> Response:
        """One attempt for a DSPy request (DSPy owns the cache and the retries): the answer's
        text, reasoning (a thinking part) and usage, its prompt-cache reads included."""
        lm15 = import_dspy().lm15
        sent = self.request(request_messages(request), **request_overrides(request))
        # The answer enters sp-dspy here: keys masked before DSPy caches it or anything reads it.
        data = redact_data(await self._post(sent))
        batched = None if self.preset is None else {BATCHED: self.preset.key(sent)}
        text, reasoning, finish = (
            anthropic_answer(data) if self.anthropic else openai_answer(data, self.config.model)
        )
        logprobs = None if self.anthropic else openai_logprobs(data)
        finish = _FINISH.get(finish, finish) if isinstance(finish, str) else None
        usage = parse_usage(data.get("usage"))
        parts: list[Any] = [lm15.ThinkingPart(reasoning)] if reasoning else []
        answer_id = data.get("id")
        return lm15.Response(
            id=answer_id if isinstance(answer_id, str) and answer_id else None,
            model=data["model"] if isinstance(data.get("model"), str) else request.model,
            message=lm15.Message.assistant([*parts, lm15.TextPart(text)]),
            finish_reason=finish if finish in ("stop", "length", "tool_call", "content_filter") else "stop",
            usage=lm15.Usage()
            if usage is None
            else lm15.Usage(
                input_tokens=usage.prompt_tokens,
                output_tokens=usage.completion_tokens,
                total_tokens=usage.total_tokens,
                reasoning_tokens=usage.reasoning_tokens,
                cache_read_tokens=usage.cache_read_tokens,
                cache_write_tokens=usage.cache_write_tokens,
            ),
            logprobs=logprobs,
            provider_data=batched,
        )

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
            session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=300),
                timeout=aiohttp.ClientTimeout(total=self.config.timeout),
                headers=self.headers,
                proxy=env_proxy(self.url),
            )
            self._sessions[loop] = session
        return session

    async def _post(self, request: HttpRequest) -> dict[str, Any]:
        """The answer's JSON, else DSPy's error class for the failure (``Retry-After`` kept).

        A rate limit (429, an "overloaded" answer) is no failure: the call waits (the later of
        the provider's hints and a jittered backoff) and is sent again through the endpoint's
        controller until answered, or until ``rate_limit_timeout`` seconds of rate limits end it
        with :class:`RateLimitTimeout`; DSPy's retries (``num_retries``) are not spent on it.
        """
        if self.preset is not None:
            return self.preset.answer(request)
        model = self.config.model
        timeout = self.config.rate_limit_timeout
        status, raw, headers = await send_rate_limited(
            self.rate, lambda: self._send(request), timeout=timeout
        )
        if status >= 300:
            raise status_error(
                status, error_message(raw), model=model, retry_after=retry_after_seconds(headers)
            )
        self.answered += 1
        return _json_object(raw, model)

    async def _send(self, request: HttpRequest) -> tuple[int, bytes, dict[str, str]]:
        """One attempt: the status, body and (lower-cased) headers, else DSPy's transport error."""
        import aiohttp

        try:
            async with self._session().post(request.url, data=orjson.dumps(request.body)) as response:
                raw = await response.read()
                headers = {k.lower(): v for k, v in response.headers.items()}
                return response.status, raw, headers
        except (aiohttp.ClientError, OSError) as exc:  # TimeoutError is an OSError
            timeout = isinstance(exc, TimeoutError | aiohttp.ServerTimeoutError)
            raise transport_error(exc, model=self.config.model, timeout=timeout) from exc

    def price(self, usage: Usage) -> float | None:
        """USD of an answer that took ``usage`` tokens here at the snapshot's prices (the batch
        API's for batch answers): prompt tokens read from the provider's prompt cache at its
        cache-read rate, those written to it at its cache-write rate; None if unpriced."""
        input_rate, output_rate, read_rate, write_rate = self._rates
        if input_rate is None or output_rate is None:
            return None
        prompt = usage.prompt_tokens
        read, written = usage.cache_read_tokens or 0, usage.cache_write_tokens or 0
        if not (read >= 0 and written >= 0 and read + written <= prompt):
            read = written = 0
        return (
            (prompt - read - written) * input_rate
            + read * (read_rate if read_rate is not None else input_rate)
            + written * (write_rate if write_rate is not None else input_rate)
            + usage.completion_tokens * output_rate
        )


@functools.cache
def _rates_of(
    provider: str, model: str, *, batch: bool
) -> tuple[float | None, float | None, float | None, float | None]:
    """USD per (input, output, cache-read, cache-write) token, at the batch API's rates where ``batch``."""
    return price_rates(provider, model, batch=batch)


def request_messages(request: Request) -> list[dict[str, Any]]:
    """A DSPy request's system prompt and text messages as role/content dicts."""
    system = request_system(request)
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for message in request.messages:
        if message.text is None:
            raise ConfigError(f"sp-dspy's HTTP engine sends text messages only, not {message.role} parts")
        messages.append({"role": message.role, "content": message.text})
    return messages


def request_overrides(request: Request) -> dict[str, Any]:
    """The per-call settings a DSPy request carries, as body fields."""
    config = request.config
    overrides: dict[str, Any] = {name: getattr(config, name) for name in _CALL_FIELDS}
    overrides["max_tokens"] = config.max_tokens
    # DSPy carries a JSON schema flat ({"type": "json_schema", "schema", "name", ...}, in its own
    # order); the chat-completions body nests it under "json_schema", its fields in the order
    # sp-dspy's formats write them (``_protocol.response_format``: the baseline's bytes).
    form = None if config.response_format is None else dict(config.response_format)
    if form and form.get("type") == "json_schema" and "json_schema" not in form:
        rest = {k: v for k, v in form.items() if k != "type"}
        nested = {k: rest.pop(k) for k in _SCHEMA_FIELDS if k in rest} | rest
        form = {"type": "json_schema", "json_schema": nested}
    overrides["response_format"] = form
    if config.stop:
        overrides["stop"] = list(config.stop)
    if config.logprobs is not None:  # 0: the chosen tokens' logprobs only; n: n alternatives each
        overrides["logprobs"] = True
        overrides["top_logprobs"] = config.logprobs or None
    extensions = dict(config.extensions or {})
    metadata = extensions.get("metadata")
    body_fields: Any = None
    if isinstance(metadata, Mapping) and {ENDPOINT_GROUP_KEY, BODY_FIELDS_KEY} & set(metadata):
        # The endpoint's share of DSPy's cache key (``_cache.ENDPOINT_GROUP_KEY``), never sent; a
        # program's own body fields (``_cache.BODY_FIELDS_KEY``), sent as body fields.
        body_fields = metadata.get(BODY_FIELDS_KEY)
        rest = {k: v for k, v in metadata.items() if k not in (ENDPOINT_GROUP_KEY, BODY_FIELDS_KEY)}
        extensions["metadata"] = rest or None
    overrides.update(extensions)
    if isinstance(body_fields, Mapping):
        overrides.update(body_fields)
    return overrides


class DirectEngine(SyncEngine):
    """DSPy's synchronous custom engine over a :class:`DirectChat` (one attempt per call)."""

    def __init__(self, client: DirectChat) -> None:
        self.client = client
        schema = client.config.json_schema or client.config.provider in ("openai", "gemini")
        # The JSON adapter sends a schema only to an LM that says it supports one.
        self.supports_response_schema = schema and not client.anthropic
        self.supported_params = set(_CALL_FIELDS) - {"response_format"} | {"max_tokens", "stop"}
        if self.supports_response_schema:
            self.supported_params.add("response_format")

    def complete(self, request: Request) -> Response:
        return self.client.run_sync(lambda: self.client.acomplete(request))

    def dump_state(self) -> dict[str, Any]:
        """Saved with a program: the settings and endpoint, never the key."""
        return {"config": self.client.config.public_dict(), "api_base": self.client.api_base}

    @classmethod
    def load_state(cls, state: Mapping[str, Any]) -> Self:
        config = LMConfig.model_validate(state["config"])
        return cls(DirectChat(config, str(state["api_base"])))


class AsyncDirectEngine(AsyncEngine, DirectEngine):  # type: ignore[misc]
    """The async twin (the runner's path for DSPy programs); it shares the client and pools."""

    async def complete(self, request: Request) -> Response:
        return await self.client.acomplete(request)

    async def aclose(self) -> None:
        await self.client.aclose()


def client_of(lm: Any) -> DirectChat | None:
    """The :class:`DirectChat` behind ``lm``'s engine, or None."""
    engine = getattr(lm, "engine", None)
    return engine.client if isinstance(engine, DirectEngine) else None


def env_proxy(url: str) -> str | None:
    """The proxy ``HTTP(S)_PROXY`` / ``NO_PROXY`` name for ``url``, read once per pool (aiohttp's
    ``trust_env`` would re-read the environment and ``~/.netrc`` on every request)."""
    parts = urllib.parse.urlsplit(url)
    if parts.hostname is None or urllib.request.proxy_bypass(parts.hostname):
        return None
    return urllib.request.getproxies().get(parts.scheme)


async def closing_transports(awaitable: Awaitable[_T]) -> _T:
    """Await ``awaitable``, then close every HTTP engine's pool on this loop (wrap the top-level
    coroutine of ``asyncio.run`` in it: a pool belongs to one loop and would outlive it)."""
    try:
        return await awaitable
    finally:
        for client in list(_clients):
            await client.aclose()


@contextlib.contextmanager
def logging_requests() -> Iterator[list[HttpRequest]]:
    """The requests this engine builds inside the block, in this context and the tasks it starts
    (``--log-requests``: a unit's requests kept with its record); an answer replayed from the
    response cache builds none."""
    log: list[HttpRequest] = []
    token = _request_log.set(log)
    try:
        yield log
    finally:
        _request_log.reset(token)


async def close_transport(lm: Any) -> None:
    """Close the pool this event loop holds for ``lm``'s HTTP engine (none: nothing to do): what
    an owner of one LM (``Guard``) ends, where :func:`closing_transports` ends every engine's."""
    client = client_of(lm)
    if client is not None:
        await client.aclose()


def _json_object(raw: bytes, model: str) -> dict[str, Any]:
    """A 2xx body as a JSON object, else DSPy's error for a 502. The standard library reads it as
    DSPy's engine does (a lone surrogate escape included): a model answer is always recorded."""
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise status_error(502, "response is not JSON", model=model, retry_after=None) from exc
    if not isinstance(data, dict):
        raise status_error(502, "response is not a JSON object", model=model, retry_after=None)
    return data
