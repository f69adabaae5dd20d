"""A rate-limited call waits and is sent again: not a failure, and not one of DSPy's retries.

A 429, or a provider's "overloaded" answer (Anthropic's 529, a 503 saying so), means the account
or the provider is busy, not that the call is wrong: it is sent again after the later of the
provider's hints and a jittered backoff, for as long as the call's rate-limit budget
(``rate_limit_timeout``, ``--rate-limit-timeout``) lasts. ``num_retries`` stays for server errors.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from ._errors import error_message
from ._limit_hints import parse_hints

if TYPE_CHECKING:
    from ._limit_hints import LimitHints
    from ._rate import RateController

#: One attempt's status, body and lower-cased headers.
Answer = tuple[int, bytes, dict[str, str]]

#: Backoff after the n-th rate limit of one call: ``BASE * 2**n`` seconds, at most ``MAX``, jittered.
BACKOFF_BASE_S = 0.25
BACKOFF_MAX_S = 20.0
#: Statuses that are a rate limit whatever the body says (Anthropic's "overloaded" is 529).
RATE_LIMIT_STATUSES = frozenset({429, 529})


class RateLimitTimeout(Exception):
    """Rate limits went on for longer than the call's budget: the call ends as a ``rate_limit``
    error record (``--resume --retry-errors`` sends it again). A plain exception, so that DSPy's
    retries do not start the wait over."""


def is_rate_limited(status: int, body: bytes) -> bool:
    """Whether an answer is a rate limit: 429, 529, or a 503 that says the provider is overloaded."""
    return status in RATE_LIMIT_STATUSES or (status == 503 and b"overload" in body.lower())


def backoff_s(attempt: int, hint: float | None, rng: Callable[[], float] = random.random) -> float:
    """The wait before re-sending a rate-limited call: the later of the provider's hint and a
    jittered exponential backoff (the jitter spreads callers that one exact hint would collide)."""
    backoff = min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2**attempt) * (0.5 + rng() / 2)
    return max(backoff, hint or 0.0)


class RateLimitedCall:
    """The rate limits one call met: how long it waits before its next attempt, until its budget ends."""

    def __init__(
        self,
        controller: RateController,
        timeout_s: float,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.controller, self.timeout_s, self.clock = controller, timeout_s, clock
        self.attempts = 0
        self.started: float | None = None

    async def wait(self, status: int, message: str, hints: LimitHints) -> None:
        """Sleep before the next attempt, or raise :class:`RateLimitTimeout` when it would end
        past the budget."""
        now = self.clock()
        if self.started is None:
            self.started = now
        wait = backoff_s(self.attempts, hints.wait_s())
        self.attempts += 1
        spent = now - self.started
        if spent + wait > self.timeout_s:
            what = f"HTTP {status}: {message}" if message else f"HTTP {status}"
            raise RateLimitTimeout(
                f"rate limited for {spent:.0f} s ({self.attempts} answer(s) {what}); the next wait "
                f"({wait:.1f} s) passes the rate-limit timeout of {self.timeout_s:g} s (--rate-limit-timeout)"
            )
        self.controller.waited(wait)
        await asyncio.sleep(wait)


async def send_rate_limited(
    controller: RateController, send: Callable[[], Awaitable[Answer]], *, timeout: float
) -> Answer:
    """``send()`` through the endpoint's controller, again after each rate limit, until an answer
    that is not one (or :class:`RateLimitTimeout` after ``timeout`` seconds of rate limits)."""
    limits = RateLimitedCall(controller, timeout)
    while True:
        async with controller.slot() as ticket:
            status, raw, headers = await send()
            if not is_rate_limited(status, raw):
                controller.answered(ticket, parse_hints(headers))
                return status, raw, headers
            controller.rate_limited(ticket)
        await limits.wait(status, error_message(raw), parse_hints(headers))
