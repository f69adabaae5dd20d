"""HTTP failures of sp-dspy's HTTP engine as DSPy's ``LM*Error`` classes, and the retry timing.

Its failures must look exactly like DSPy's engine's (the runner catches ``dspy.LMError``,
``classify_error`` names the kind). Retries wait as DSPy's engine and the OpenAI SDK do:
exponential backoff with jitter unless the server says how long (``Retry-After``).
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Mapping
from typing import Any

from ._errors import CONTEXT_HINTS, STATUS_KINDS

#: Statuses worth another attempt: rate limits, timeouts, server-side failures.
RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
#: Never wait longer than this for one retry, whatever ``Retry-After`` says.
MAX_RETRY_WAIT_S = 60.0
BASE_BACKOFF_S = 0.5


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """``Retry-After`` (or ``retry-after-ms``) as seconds, None when absent or unreadable."""
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


def backoff_seconds(attempt: int, retry_after: float | None) -> float:
    """Wait before retry number ``attempt`` (0-based): the server's word, else 0.5 s x 2^n +- 25%."""
    if retry_after is not None:
        return min(retry_after, MAX_RETRY_WAIT_S)
    base = min(BASE_BACKOFF_S * 2**attempt, MAX_RETRY_WAIT_S)
    return base * random.uniform(0.75, 1.25)


def error_message(body: bytes) -> str:
    """The server's own error text (OpenAI's ``{"error": {"message": ...}}`` or raw), bounded."""
    import orjson

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
    kind = STATUS_KINDS.get(status, "server_error" if status >= 500 else "bad_request")
    return lm_error(kind, text, model=model, status=status, retry_after=retry_after)


def lm_error(
    kind: str, text: str, *, model: str, status: int | None = None, retry_after: float | None = None
) -> Exception:
    """DSPy's public ``LM*Error`` for a failure kind of ``classify_error`` (one class per kind, every path)."""
    import dspy

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
    import dspy

    reason = f"{type(exc).__name__}: {exc}".rstrip(": ")
    if timeout:
        return dspy.LMTimeoutError(f"request timed out ({reason})", model=model)
    return dspy.LMTransportError(f"connection failed ({reason})", model=model)
