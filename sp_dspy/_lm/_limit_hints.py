"""What a provider's answer says about its rate limits: waits to honour and what is left.

OpenAI (and servers copying it) send ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}``,
the reset as a duration (``1s``, ``6m0s``, ``120ms``); Anthropic sends
``anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}``, the reset as an RFC 3339 time;
a 429 may carry ``retry-after-ms`` (Azure OpenAI, OpenAI) and ``Retry-After`` (seconds or an
HTTP date). A window's reset is the time until it is full again.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from ._errors import retry_after_seconds

#: The windows a provider reports, in its headers' spelling.
_WINDOWS = ("requests", "tokens")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


@dataclass(frozen=True)
class Window:
    """One limited quantity (requests or tokens): its size, what is left, seconds until full."""

    limit: float | None
    remaining: float | None
    reset_s: float | None


@dataclass(frozen=True)
class LimitHints:
    """The rate-limit facts of one answer (none known: every field None)."""

    windows: tuple[Window, ...] = ()
    retry_after_s: float | None = None

    def remaining_share(self) -> float | None:
        """The smallest share left of a window (0: one is exhausted), None when none is reported."""
        shares = [
            w.remaining / w.limit
            for w in self.windows
            if w.remaining is not None and w.limit  # 0: unknown
        ]
        return min(shares) if shares else None

    def next_slot_s(self) -> float:
        """Seconds until an exhausted window admits one more call: its reset spread over the
        units it refills (a window refills steadily), else its whole reset."""
        waits = [0.0]
        for w in self.windows:
            if w.remaining is None or w.remaining > 0 or w.reset_s is None:
                continue
            waits.append(w.reset_s / w.limit if w.limit and w.limit >= 1 else w.reset_s)
        return max(waits)

    def wait_s(self) -> float | None:
        """The provider's wait for a rate-limited call: the later of ``retry-after(-ms)`` and the
        reset of each window it reports exhausted (None: it gave no hint)."""
        waits = [w.reset_s for w in self.windows if w.reset_s is not None and w.remaining == 0]
        if self.retry_after_s is not None:
            waits.append(self.retry_after_s)
        return max(waits) if waits else None


def parse_hints(headers: Mapping[str, str]) -> LimitHints:
    """The hints in ``headers`` (lower-case names); unreadable values count as absent."""
    if not any(name.startswith(_HINT_PREFIXES) for name in headers):
        return NO_HINTS  # most answers: nothing to read
    windows = []
    for window in _WINDOWS:
        for prefix, suffix in (("x-ratelimit-", f"-{window}"), (f"anthropic-ratelimit-{window}-", "")):
            values = [headers.get(f"{prefix}{field}{suffix}") for field in ("limit", "remaining", "reset")]
            if any(value is not None for value in values):
                limit, remaining, reset = values
                windows.append(Window(_number(limit), _number(remaining), _reset_s(reset)))
    retry_after = (
        retry_after_seconds(headers) if "retry-after" in headers or "retry-after-ms" in headers else None
    )
    return LimitHints(tuple(windows), retry_after)


_HINT_PREFIXES = ("x-ratelimit-", "anthropic-ratelimit-", "retry-after")
#: An answer without rate-limit headers.
NO_HINTS = LimitHints()


def _number(value: str | None) -> float | None:
    try:
        return None if value is None else float(value)
    except ValueError:
        return None


def _reset_s(value: str | None) -> float | None:
    """A reset as seconds from now: a bare number (seconds), a duration (``6m0s``) or a time."""
    if value is None:
        return None
    value = value.strip()
    number = _number(value)
    if number is not None:
        return max(0.0, number)
    parts = _DURATION.findall(value)
    if parts and "".join(amount + unit for amount, unit in parts) == value:
        return sum(float(amount) * _UNIT_S[unit] for amount, unit in parts)
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    return max(0.0, moment.timestamp() - datetime.now(moment.tzinfo).timestamp())
