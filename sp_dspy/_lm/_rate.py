"""Adaptive concurrency per endpoint and model: one :class:`RateController` shared by every caller.

A provider limits requests and tokens per minute; the limit is the account's, so every caller of
the endpoint in the process (the runner's workers, compile's threads, the guard service's pool,
``check --batch``, a batch run's fallbacks) shares one controller, whatever LM object or event
loop it calls from. The controller admits at most :attr:`RateController.limit` calls at once:

- it starts moderate (:data:`START`) and grows by :data:`SLOW_START_GROWTH` per answered call while
  the limit is what holds callers back (four times as many every round trip: a 64-slot pool is
  full after the first round trip when the provider has no limit, so an unlimited run loses a
  fraction of one round trip), by one per round trip once a rate limit was met;
- a rate-limit *episode* cuts it once (:data:`CUT`): the 429s of calls sent before the cut belong
  to the episode that caused it and cut nothing more;
- where answers carry ``x-ratelimit-remaining-*``, it stops growing when little is left and steps
  down by one (once per round trip) when nothing is, before the provider answers 429.

With ``adaptive`` off the controller admits every caller (the caller's own pool, ``--concurrency
N --no-adaptive``, pins what is in flight) and only counts. It is a separate concept from spending
admission: :meth:`slot` is the one entry point an admission can wrap a call in.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field

from ._limit_hints import LimitHints

#: Calls admitted at once before anything is known of the provider's limits.
START = 16
#: Calls the limit grows by per answered call until the first rate limit (x4 per round trip).
SLOW_START_GROWTH = 3
#: No controller admits more than this many calls at once (the runner's own ceiling).
CEILING = 1024
#: The share of the limit a rate-limit episode keeps.
CUT = 0.7
#: Below this share of its window left (``x-ratelimit-remaining-*``), the limit stops growing.
LOW_REMAINING = 0.1


@dataclass
class RateStats:
    """What a controller has seen since it was made (a run takes the difference over its calls)."""

    answered: int = 0
    rate_limited: int = 0  # 429s and "overloaded" answers, each retried
    episodes: int = 0  # cuts of the limit
    wait_s: float = 0.0  # seconds callers slept after a rate limit, summed over callers

    def since(self, earlier: RateStats) -> RateStats:
        """The counts between ``earlier`` (a copy taken before) and now."""
        return RateStats(
            answered=self.answered - earlier.answered,
            rate_limited=self.rate_limited - earlier.rate_limited,
            episodes=self.episodes - earlier.episodes,
            wait_s=round(self.wait_s - earlier.wait_s, 3),
        )


@dataclass(frozen=True)
class Ticket:
    """An admitted call: when it was sent, so that its answer is placed before or after a cut."""

    sent_at: float


@dataclass
class _Waiter:
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[None]


@dataclass
class RateController:
    """The admission of calls to one endpoint and model (thread-safe, any event loop)."""

    key: str
    adaptive: bool = True
    limit: float = START
    ceiling: int = CEILING
    clock: Callable[[], float] = time.monotonic
    stats: RateStats = field(default_factory=RateStats)
    in_flight: int = 0
    _slow_start: bool = True
    _last_cut: float = -math.inf  # calls sent before it answer for the episode that made it
    _growth: float = 0.0
    _hold_until: float = 0.0  # no call is admitted before (an exhausted window's reset)
    _waiters: deque[_Waiter] = field(default_factory=deque)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def concurrency(self) -> int:
        """The calls admitted at once now (what progress shows); 0 when not adaptive."""
        return int(self.limit) if self.adaptive else 0

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[Ticket]:
        """Hold one of the limit's places for a call; leaving the block gives it back."""
        ticket = await self.acquire()
        try:
            yield ticket
        finally:
            self.release()

    async def acquire(self) -> Ticket:
        """Wait until the limit admits one more call (first come, first served)."""
        while True:
            wait = self._hold_left()
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            with self._lock:
                if not self.adaptive or (self.in_flight < self.limit and not self._waiters):
                    self.in_flight += 1
                    return Ticket(self.clock())
                loop = asyncio.get_running_loop()
                waiter = _Waiter(loop, loop.create_future())
                self._waiters.append(waiter)
            try:
                await waiter.future  # the releaser hands its place over: in_flight already counts it
                wait = self._hold_left()  # handed a place during a hold: it still waits for the window
                if wait > 0:
                    await asyncio.sleep(wait)
            except asyncio.CancelledError:
                with self._lock:
                    handed = waiter not in self._waiters
                    if not handed:
                        self._waiters.remove(waiter)
                if handed and waiter.future.done() and not waiter.future.cancelled():
                    self.release()  # it held a place (a cancelled future's place goes back in _wake)
                raise
            return Ticket(self.clock())

    def release(self) -> None:
        """Give a place back: to the first waiter while the limit admits it."""
        with self._lock:
            self.in_flight -= 1
            self._admit_waiters()

    def _admit_waiters(self) -> None:
        """Hand places to waiters while the limit allows (the lock held)."""
        while self._waiters and (not self.adaptive or self.in_flight < self.limit):
            waiter = self._waiters.popleft()
            self.in_flight += 1
            try:
                waiter.loop.call_soon_threadsafe(self._wake, waiter)
            except RuntimeError:  # its loop closed: the place goes back
                self.in_flight -= 1

    def _wake(self, waiter: _Waiter) -> None:
        if waiter.future.done():  # cancelled meanwhile: nobody takes the place
            self.release()
        else:
            waiter.future.set_result(None)

    def _hold_left(self) -> float:
        return self._hold_until - self.clock() if self.adaptive else 0.0

    def answered(self, ticket: Ticket, hints: LimitHints) -> None:
        """A call sent at ``ticket`` was answered: grow while the limit is what holds callers back."""
        with self._lock:
            self.stats.answered += 1
            if not self.adaptive:
                return
            share = hints.remaining_share()
            if share is not None and share <= 0.0:
                self._step_down(ticket, hints)
            elif share is None or share > LOW_REMAINING:
                self._grow()
            self._admit_waiters()

    def rate_limited(self, ticket: Ticket) -> None:
        """A call sent at ``ticket`` met a rate limit: the first of an episode cuts the limit."""
        with self._lock:
            self.stats.rate_limited += 1
            if not self.adaptive or ticket.sent_at < self._last_cut:
                return
            self.stats.episodes += 1
            self._slow_start = False
            self.limit = max(1.0, math.floor(self.limit * CUT))
            self._last_cut = self.clock()

    def waited(self, seconds: float) -> None:
        """A caller slept ``seconds`` after a rate limit (the manifest's wait)."""
        with self._lock:
            self.stats.wait_s += seconds

    def _grow(self) -> None:
        if self.in_flight + len(self._waiters) < self.limit or self.limit >= self.ceiling:
            return  # callers are not held back: growing would only pile up a later cut
        if self._slow_start:
            self.limit = min(self.ceiling, self.limit + SLOW_START_GROWTH)
            return
        self._growth += 1 / self.limit
        if self._growth >= 1 - 1e-9:  # one round trip's answers (float sums fall short of 1)
            self._growth = 0.0
            self.limit += 1

    def _step_down(self, ticket: Ticket, hints: LimitHints) -> None:
        """Nothing left in the provider's window: hold new calls until one fits, one place less."""
        self._hold_until = max(self._hold_until, self.clock() + hints.next_slot_s())
        if ticket.sent_at >= self._last_cut:
            self._slow_start = False
            self.limit = max(1.0, self.limit - 1)
            self._last_cut = self.clock()

    def snapshot(self) -> RateStats:
        """A copy of the counts now."""
        with self._lock:
            return RateStats(**vars(self.stats))


class RateWatch:
    """What one run's calls met at a controller (the controller counts for the whole process):
    the difference since the watch began; a run on another engine sees nothing."""

    def __init__(self, controller: RateController | None) -> None:
        self.controller = controller
        self._start = controller.snapshot() if controller is not None else RateStats()

    def stats(self) -> RateStats:
        return RateStats() if self.controller is None else self.controller.snapshot().since(self._start)

    def describe(self) -> str:
        """``concurrency 12 | 429s 5, waited 3.1s``: the progress line's part (empty without a controller)."""
        if self.controller is None:
            return ""
        stats = self.stats()
        waits = f"429s {stats.rate_limited}, waited {stats.wait_s:.1f}s" if stats.rate_limited else "429s 0"
        limit = self.controller.concurrency
        return f"concurrency {limit} | {waits}" if limit else waits


_controllers: dict[str, RateController] = {}
_registry_lock = threading.Lock()


def controller_for(endpoint: str, model: str, *, adaptive: bool = True) -> RateController:
    """The one controller of ``model`` at ``endpoint`` in this process (made on first use; the
    latest caller's ``adaptive`` applies to all: a process runs one setting)."""
    key = f"{endpoint} {model}"
    with _registry_lock:
        controller = _controllers.get(key)
        if controller is None:
            controller = _controllers[key] = RateController(key, adaptive=adaptive)
        elif controller.adaptive != adaptive:
            controller.adaptive = adaptive
        return controller


def controllers() -> Mapping[str, RateController]:
    """Every controller made in this process, by endpoint and model."""
    with _registry_lock:
        return dict(_controllers)


def limit_bound_s(calls: int, tokens: int, *, rpm: int | None, tpm: int | None) -> float | None:
    """The least seconds ``calls`` using ``tokens`` take under an account's limits per minute
    (the slower of the two), None when neither is known: ``--dry-run``'s wall time."""
    bounds = [60 * amount / limit for amount, limit in ((calls, rpm), (tokens, tpm)) if limit]
    return max(bounds) if bounds else None
