"""Name the kind of an LM failure, for excluded records and retry decisions; raise HTTP failures as DSPy does.

Errors (DSPy's ``LM*Error``, lm15, LiteLLM/OpenAI SDKs, ``OSError``) are recognised along the cause
chain by class name along the MRO (importing none of those libraries) or by HTTP status.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Iterator, Mapping
from typing import Any

import orjson

from ._dspy import import_dspy

#: Failures every later call of the run would meet too (wrong key, account, model, address,
#: or a request form the server rejects); the runner stops early on them (``_runner._failures``).
LASTING_KINDS = frozenset({"auth", "billing", "not_found", "unreachable", "bad_request", "config"})
#: What providers say when a request overflows the context window (OpenAI, vLLM, Anthropic...).
CONTEXT_HINTS = (
    "context length",
    "context window",
    "maximum context",
    "context_length_exceeded",
    "too many tokens",
    "prompt is too long",
)
#: Kinds of HTTP statuses with a meaning of their own (other 4xx: bad_request, 5xx: server_error).
STATUS_KINDS = {429: "rate_limit", 401: "auth", 403: "auth", 402: "billing", 408: "timeout", 404: "not_found"}

# Checked in order, the more specific meaning first: a context-window error is also a bad
# request, a timeout is also an OSError, a refused connection is a connection error no
# retry gets through (aiohttp, httpx, socket). No key at all (DSPy's "not configured") is an
# auth failure: same fix.
_BY_CLASS_NAME = {
    "context_length": "ContextWindowExceededError ContextLengthError",
    "rate_limit": "LMRateLimitError RateLimitError RateLimitTimeout",
    "auth": "LMAuthError AuthError AuthenticationError PermissionDeniedError LMNotConfiguredError NotConfiguredError",
    "billing": "LMBillingError BillingError",
    "not_found": "LMUnsupportedModelError UnsupportedModelError NotFoundError",
    "timeout": "LMTimeoutError Timeout TimeoutError APITimeoutError TimeoutException ReadTimeout",
    "server_error": "LMServerError ServerError InternalServerError ServiceUnavailableError",
    "unreachable": "ConnectionRefusedError ClientConnectorError ConnectError gaierror ClientConnectorDNSError",
    "connection": "LMTransportError TransportError APIConnectionError ConnectionError RemoteProtocolError",
    "bad_request": "LMInvalidRequestError InvalidRequestError BadRequestError UnprocessableEntityError",
    "parse": "AdapterParseError JSONDecodeError",
    "config": "LMConfigurationError ConfigurationError ConfigError LMUnsupportedFeatureError",
}


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and its causes (``__cause__``, else ``__context__``), each once."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _by_class(exc: BaseException) -> str | None:
    names = {cls.__name__ for cls in type(exc).__mro__}
    return next((kind for kind, known in _BY_CLASS_NAME.items() if names & set(known.split())), None)


def _status_kind(status: int) -> str:
    return STATUS_KINDS.get(status, "server_error" if status >= 500 else "bad_request")


def _by_status(exc: BaseException) -> str | None:
    status = getattr(exc, "status", None) or getattr(exc, "status_code", None)
    if not isinstance(status, int) or isinstance(status, bool) or status < 400:
        return None
    return _status_kind(status)


def classify_error(exc: BaseException) -> str:
    """The kind of ``exc`` (a key of ``_BY_CLASS_NAME``; ``"other"`` when nothing is recognised).

    The first recognised exception along the cause chain decides, except that a
    transport error caused by a timeout is a ``"timeout"`` (DSPy reports a read
    timeout of its HTTP engine as a transport error) and one caused by a refused or
    unresolvable connection is ``"unreachable"``; an invalid request with status 404
    (clients raise one class for every 4xx) is ``"not_found"`` (unknown model or route).
    """
    kinds: list[str] = []
    for current in _chain(exc):
        kind = _by_class(current) or _by_status(current)
        if kind == "bad_request" and _by_status(current) == "not_found":
            kind = "not_found"
        if kind is not None:
            kinds.append(kind)
    if not kinds:
        return "other"
    if kinds[0] == "connection":
        for cause in ("timeout", "unreachable"):
            if cause in kinds:
                return cause
    if kinds[0] == "bad_request" and any(
        hint in str(current).lower() for current in _chain(exc) for hint in CONTEXT_HINTS
    ):  # some clients raise a plain invalid-request error for a context overflow
        return "context_length"
    return kinds[0]


def is_lasting(kind: str) -> bool:
    """Whether a failure of this kind would meet every later call of the run too."""
    return kind in LASTING_KINDS


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """``Retry-After`` (or ``retry-after-ms``) as seconds, None when absent or unreadable: the
    wait an error carries for DSPy's retries."""
    for raw, scale in ((headers.get("retry-after-ms"), 1000), (headers.get("retry-after"), 1)):
        if raw is not None:
            try:
                return max(0.0, float(raw) / scale)
            except ValueError:
                pass
    try:
        parsed = email.utils.parsedate_to_datetime(headers.get("retry-after") or "")
    except (TypeError, ValueError):
        return None
    return max(0.0, parsed.timestamp() - time.time())


def error_message(body: bytes) -> str:
    """The server's own error text (OpenAI's ``{"error": {"message": ...}}`` or raw), bounded."""
    try:
        data: Any = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body[:300].decode("utf-8", errors="replace").strip()
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        return str(error.get("message") or error)[:300]
    return str(error if isinstance(error, str) else data)[:300]


def status_error(status: int, message: str, *, model: str, retry_after: float | None) -> Exception:
    """The DSPy error class DSPy's own engine raises for an HTTP ``status``."""
    text = f"HTTP {status}: {message}" if message else f"HTTP {status}"
    if status == 400 and any(hint in message.lower() for hint in CONTEXT_HINTS):
        return lm_error("context_length", text, model=model, status=status)
    return lm_error(_status_kind(status), text, model=model, status=status, retry_after=retry_after)


def lm_error(
    kind: str, text: str, *, model: str, status: int | None = None, retry_after: float | None = None
) -> Exception:
    """DSPy's public ``LM*Error`` for a failure kind of ``classify_error`` (one class per kind, every path)."""
    dspy = import_dspy()
    fields: dict[str, Any] = {"model": model, "provider": "openai-compatible"}
    if status is not None:
        fields["status"] = status
    if kind in ("rate_limit", "server_error"):
        error_class = dspy.LMRateLimitError if kind == "rate_limit" else dspy.LMServerError
        return error_class(text, retry_after=retry_after, **fields)
    if kind == "connection":
        return dspy.LMTransportError(text, model=model)
    if kind == "context_length":
        return dspy.ContextWindowExceededError(message=text, **fields)
    simple = {"auth": dspy.LMAuthError, "billing": dspy.LMBillingError, "timeout": dspy.LMTimeoutError}
    return simple.get(kind, dspy.LMInvalidRequestError)(text, **fields)


def transport_error(exc: BaseException, *, model: str, timeout: bool) -> Exception:
    """A timeout or a failed connection (no HTTP response) as DSPy's classes name them."""
    dspy = import_dspy()
    reason = f"{type(exc).__name__}: {exc}".rstrip(": ")
    if timeout:
        return dspy.LMTimeoutError(f"request timed out ({reason})", model=model)
    return dspy.LMTransportError(f"connection failed ({reason})", model=model)
