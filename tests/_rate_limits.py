"""A provider's rate limits for the loopback servers: request and token buckets, OpenAI's headers.

:class:`RateLimits` admits a request when both buckets hold enough (requests: one, tokens: the
request's estimate), refilling steadily at ``requests_per_s`` / ``tokens_per_s`` up to a burst;
otherwise the server answers 429 with ``Retry-After`` (whole seconds, rounded up, as OpenAI
sends it), optionally ``retry-after-ms`` (exact, as Azure OpenAI sends it), and OpenAI's
``x-ratelimit-{limit,remaining,reset}-{requests,tokens}`` on every answer.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field


@dataclass
class _Bucket:
    capacity: float
    per_s: float
    level: float
    at: float

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.at) * self.per_s)
        self.at = now

    def wait_for(self, amount: float) -> float:
        return max(0.0, (amount - self.level) / self.per_s)

    def headers(self, name: str) -> dict[str, str]:
        reset_ms = math.ceil((self.capacity - self.level) / self.per_s * 1000)
        return {
            f"x-ratelimit-limit-{name}": str(int(self.capacity)),
            f"x-ratelimit-remaining-{name}": str(max(0, int(self.level))),
            f"x-ratelimit-reset-{name}": f"{reset_ms}ms",
        }


@dataclass
class RateLimits:
    """Request and token limits (``burst_s``: the seconds' worth each bucket holds when full)."""

    requests_per_s: float
    tokens_per_s: float | None = None
    burst: float = 10
    retry_after_ms: bool = False
    rejected: int = 0
    admitted: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _buckets: dict[str, _Bucket] = field(default_factory=dict)

    def __post_init__(self) -> None:
        now = time.monotonic()
        window_s = self.burst / self.requests_per_s
        self._buckets["requests"] = _Bucket(self.burst, self.requests_per_s, self.burst, now)
        if self.tokens_per_s is not None:
            capacity = self.tokens_per_s * window_s
            self._buckets["tokens"] = _Bucket(capacity, self.tokens_per_s, capacity, now)

    def admit(self, tokens: float) -> tuple[int, dict[str, str]]:
        """The status (200 or 429) for a request of ``tokens`` now, and the headers to send."""
        need = {"requests": 1.0, "tokens": tokens}
        with self._lock:
            now = time.monotonic()
            for bucket in self._buckets.values():
                bucket.refill(now)
            wait = max(bucket.wait_for(need[name]) for name, bucket in self._buckets.items())
            if wait <= 0:
                for name, bucket in self._buckets.items():
                    bucket.level -= need[name]
                self.admitted += 1
            else:
                self.rejected += 1
            headers: dict[str, str] = {}
            for name, bucket in self._buckets.items():
                headers.update(bucket.headers(name))
        if wait <= 0:
            return 200, headers
        headers["retry-after"] = str(max(1, math.ceil(wait)))
        if self.retry_after_ms:
            headers["retry-after-ms"] = str(math.ceil(wait * 1000))
        return 429, headers

    def ideal_s(self, requests: int, tokens: float, latency_s: float) -> float:
        """The limit-bound ideal wall time of ``requests`` (``tokens`` in all): at the slower
        bucket's rate, plus one answer's latency."""
        by_requests = requests / self.requests_per_s
        bucket = self._buckets.get("tokens")
        by_tokens = 0.0 if bucket is None else tokens / bucket.per_s
        return max(by_requests, by_tokens) + latency_s


def estimated_tokens(body: bytes) -> float:
    """What a request counts against the token limit: its prompt (4 bytes a token) plus its answer."""
    return len(body) / 4 + 20
