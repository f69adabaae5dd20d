"""Name the kind of an LM failure, for excluded records and retry decisions.

Errors come from DSPy's ``LM*Error`` classes, lm15, LiteLLM/OpenAI SDKs and plain
``OSError``s; they are recognised by class name along the MRO (no import of those
libraries, so this survives their refactors) or by HTTP status, along the cause chain.
"""

from __future__ import annotations

from collections.abc import Iterator

from .._redact import redact

ERROR_KINDS = (
    "rate_limit",
    "server_error",
    "timeout",
    "connection",
    "unreachable",
    "auth",
    "billing",
    "not_found",
    "context_length",
    "bad_request",
    "parse",
    "config",
    "other",
)
TRANSIENT_KINDS = frozenset({"rate_limit", "server_error", "timeout", "connection"})
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
# retry gets through. No key at all (DSPy's "not configured") is an auth failure: same fix.
_BY_CLASS_NAME: tuple[tuple[str, frozenset[str]], ...] = tuple(
    (kind, frozenset(names.split()))
    for kind, names in (
        ("context_length", "ContextWindowExceededError ContextLengthError"),
        ("rate_limit", "LMRateLimitError RateLimitError"),
        (
            "auth",
            "LMAuthError AuthError AuthenticationError PermissionDeniedError LMNotConfiguredError "
            "NotConfiguredError",
        ),
        ("billing", "LMBillingError BillingError"),
        ("not_found", "LMUnsupportedModelError UnsupportedModelError NotFoundError"),
        ("timeout", "LMTimeoutError Timeout TimeoutError APITimeoutError TimeoutException ReadTimeout"),
        ("server_error", "LMServerError ServerError InternalServerError ServiceUnavailableError"),
        # Nothing accepted the connection: refused, unknown host, no route (aiohttp, httpx, socket).
        (
            "unreachable",
            "ConnectionRefusedError ClientConnectorError ConnectError gaierror ClientConnectorDNSError",
        ),
        (
            "connection",
            "LMTransportError TransportError APIConnectionError ConnectionError RemoteProtocolError",
        ),
        ("bad_request", "LMInvalidRequestError InvalidRequestError BadRequestError UnprocessableEntityError"),
        ("parse", "AdapterParseError JSONDecodeError"),
        ("config", "LMConfigurationError ConfigurationError ConfigError LMUnsupportedFeatureError"),
    )
)


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
    return next((kind for kind, known in _BY_CLASS_NAME if names & known), None)


def _by_status(exc: BaseException) -> str | None:
    status = getattr(exc, "status", None) or getattr(exc, "status_code", None)
    if not isinstance(status, int) or isinstance(status, bool) or status < 400:
        return None
    return STATUS_KINDS.get(status, "server_error" if status >= 500 else "bad_request")


def classify_error(exc: BaseException) -> str:
    """One of :data:`ERROR_KINDS` for ``exc`` (``"other"`` when nothing is recognised).

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
    if kinds[0] == "bad_request" and is_context_overflow(exc):
        # Some clients raise a plain invalid-request error for it: same failure, same kind.
        return "context_length"
    return kinds[0]


def is_context_overflow(exc: BaseException) -> bool:
    """Whether ``exc`` (or its cause) says the request overflowed the model's context window."""
    return any(hint in str(current).lower() for current in _chain(exc) for hint in CONTEXT_HINTS)


def is_transient(kind: str) -> bool:
    """Whether a failure of this kind may succeed when retried later."""
    return kind in TRANSIENT_KINDS


def is_lasting(kind: str) -> bool:
    """Whether a failure of this kind would meet every later call of the run too."""
    return kind in LASTING_KINDS


def describe_error(exc: BaseException, limit: int = 300) -> str:
    """``"<kind>: <Type>: <first line>"``, redacted and bounded, for a result record."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    text = redact(f"{classify_error(exc)}: {type(exc).__name__}: {first}".rstrip(": "))
    return text if len(text) <= limit else text[: limit - 3] + "..."
