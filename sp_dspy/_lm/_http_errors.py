"""Turn HTTP failures of an OpenAI-compatible server into DSPy's ``LM*Error`` classes.

The direct transport (``_direct``) talks to servers without DSPy's engine, but its
failures must look exactly like the engine's: the runner's ``lm_errors()`` catches
``dspy.LMError``, ``classify_error`` names the kind, and retry decisions use
``is_transient``. This module holds that mapping and the retry timing, which is what
DSPy's engine and the OpenAI SDK do too: exponential backoff with jitter unless the
server says how long to wait (``Retry-After``, seconds or an HTTP date).
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Mapping
from typing import Any

#: Statuses worth another attempt: rate limits, timeouts, server-side failures.
RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
#: Never wait longer than this for one retry, whatever ``Retry-After`` says.
MAX_RETRY_WAIT_S = 60.0
BASE_BACKOFF_S = 0.5
_CONTEXT_HINTS = (
    "context length",
    "context window",
    "maximum context",
    "too many tokens",
    "prompt is too long",
)


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    """``Retry-After`` (or ``retry-after-ms``) as seconds, None when absent or unreadable."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        parsed = email.utils.parsedate_to_datetime(value)
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
    if isinstance(error, str):
        return error[:300]
    return str(data)[:300]


def status_error(status: int, message: str, *, model: str, retry_after: float | None) -> Exception:
    """The DSPy error class DSPy's own engine raises for an HTTP ``status``."""
    import dspy

    fields: dict[str, Any] = {"model": model, "status": status, "provider": "openai-compatible"}
    text = f"HTTP {status}: {message}" if message else f"HTTP {status}"
    if status == 429:
        return dspy.LMRateLimitError(text, retry_after=retry_after, **fields)
    if status in (401, 403):
        return dspy.LMAuthError(text, **fields)
    if status == 402:
        return dspy.LMBillingError(text, **fields)
    if status == 408:
        return dspy.LMTimeoutError(text, **fields)
    if status >= 500:
        return dspy.LMServerError(text, retry_after=retry_after, **fields)
    if any(hint in message.lower() for hint in _CONTEXT_HINTS):
        return dspy.ContextWindowExceededError(message=text, **fields)
    return dspy.LMInvalidRequestError(text, **fields)


def transport_error(exc: BaseException, *, model: str, timeout: bool) -> Exception:
    """A timeout or a failed connection (no HTTP response) as DSPy's classes name them."""
    import dspy

    reason = f"{type(exc).__name__}: {exc}".rstrip(": ")
    if timeout:
        return dspy.LMTimeoutError(f"request timed out ({reason})", model=model)
    return dspy.LMTransportError(f"connection failed ({reason})", model=model)
