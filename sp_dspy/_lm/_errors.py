"""Name the kind of an LM failure, for excluded records and retry decisions.

Errors reach sp-dspy from several layers: DSPy's public ``LM*Error`` classes, lm15's
canonical errors, LiteLLM/OpenAI SDK exceptions and plain Python ``OSError``s. They
are recognised by class name along the MRO (no import of any of those libraries, so
this stays cheap and survives their refactors) or by HTTP status, walking the
exception's cause chain.
"""

from __future__ import annotations

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
#: Failures that every later call of the run would meet as well: the key, the account, the
#: model name or the address is wrong, or the server rejects the request's form or settings.
#: Retrying does not help; the runner stops early on them (``_runner._failures``).
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

# Checked in order: the more specific meaning first (a context-window error is also a
# bad request; a timeout is also an OSError like a connection error; a refused
# connection is a connection error that no retry will get through).
_BY_CLASS_NAME: tuple[tuple[str, frozenset[str]], ...] = (
    ("context_length", frozenset({"ContextWindowExceededError", "ContextLengthError"})),
    ("rate_limit", frozenset({"LMRateLimitError", "RateLimitError"})),
    # No key at all (DSPy's "not configured") is an auth failure too: the fix is the same.
    (
        "auth",
        frozenset(
            {
                "LMAuthError",
                "AuthError",
                "AuthenticationError",
                "PermissionDeniedError",
                "LMNotConfiguredError",
                "NotConfiguredError",
            }
        ),
    ),
    ("billing", frozenset({"LMBillingError", "BillingError"})),
    ("not_found", frozenset({"LMUnsupportedModelError", "UnsupportedModelError", "NotFoundError"})),
    (
        "timeout",
        frozenset(
            {
                "LMTimeoutError",
                "Timeout",
                "TimeoutError",
                "APITimeoutError",
                "TimeoutException",
                "ReadTimeout",
            }
        ),
    ),
    (
        "server_error",
        frozenset({"LMServerError", "ServerError", "InternalServerError", "ServiceUnavailableError"}),
    ),
    # Nothing accepted the connection: refused, unknown host, no route (aiohttp, httpx, socket).
    (
        "unreachable",
        frozenset(
            {
                "ConnectionRefusedError",
                "ClientConnectorError",
                "ConnectError",
                "gaierror",
                "ClientConnectorDNSError",
            }
        ),
    ),
    (
        "connection",
        frozenset(
            {
                "LMTransportError",
                "TransportError",
                "APIConnectionError",
                "ConnectionError",
                "RemoteProtocolError",
            }
        ),
    ),
    (
        "bad_request",
        frozenset(
            {
                "LMInvalidRequestError",
                "InvalidRequestError",
                "BadRequestError",
                "UnprocessableEntityError",
            }
        ),
    ),
    ("parse", frozenset({"AdapterParseError", "JSONDecodeError"})),
    (
        "config",
        frozenset({"LMConfigurationError", "ConfigurationError", "ConfigError", "LMUnsupportedFeatureError"}),
    ),
)


def _by_class(exc: BaseException) -> str | None:
    names = {cls.__name__ for cls in type(exc).__mro__}
    for kind, known in _BY_CLASS_NAME:
        if names & known:
            return kind
    return None


def _by_status(exc: BaseException) -> str | None:
    status = getattr(exc, "status", None) or getattr(exc, "status_code", None)
    if not isinstance(status, int) or isinstance(status, bool):
        return None
    if status == 429:
        return "rate_limit"
    if status in (401, 403):
        return "auth"
    if status == 402:
        return "billing"
    if status == 408:
        return "timeout"
    if status == 404:
        return "not_found"
    if status >= 500:
        return "server_error"
    if 400 <= status < 500:
        return "bad_request"
    return None


def classify_error(exc: BaseException) -> str:
    """One of :data:`ERROR_KINDS` for ``exc`` (``"other"`` when nothing is recognised).

    The first recognised exception along the cause chain decides, except that a
    transport error caused by a timeout is a ``"timeout"`` (DSPy reports a read
    timeout of its HTTP engine as a transport error) and one caused by a refused or
    unresolvable connection is ``"unreachable"``; an invalid request with status 404
    (clients raise one class for every 4xx) is ``"not_found"`` (unknown model or route).
    """
    kinds: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        kind = _by_class(current) or _by_status(current)
        if kind == "bad_request" and _by_status(current) == "not_found":
            kind = "not_found"
        if kind is not None:
            kinds.append(kind)
        current = current.__cause__ or current.__context__
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
    current: BaseException | None = exc
    seen: set[int] = set()
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        text = str(current).lower()
        if any(hint in text for hint in CONTEXT_HINTS):
            return True
        current = current.__cause__ or current.__context__
    return False


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
