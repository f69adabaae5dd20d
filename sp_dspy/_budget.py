"""What a job may spend and what it spent: the caps, and the one :class:`Ledger` every LM call is admitted by.

Eval, compile, experiment and the guard service cap calls, tokens and dollars this way: before
a call its worst case (its prompt and its output limit, priced at the run's rate) is reserved
under a lock, a call the caps cannot cover does not start, and when the answer comes the
reservation is settled at what it used. Below the runner, compile and the service.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ._errors import ConfigError
from ._pricing import Pricing
from ._usage import Usage

CAP_NAMES = ("max_calls", "max_tokens", "max_usd")  # the order caps are checked in
NO_ERROR_LIMIT = 1_000_000_000  # failing LMs are stopped by other means than a count
SETTLE_POLL_S = 0.01  # how often a call waiting for the calls in flight to settle asks again


class BudgetExceeded(Exception):
    """A call was refused: it would cross a cap (or the share of it this phase may use)."""


class NotYet(BudgetExceeded):
    """A call that does not fit beside the calls in flight, and may once they settle (``admit(later=True)``)."""


class OptimizerStopped(BaseException):
    """Unwinds the optimizer once the budget refused one of its calls (a ``BaseException``:
    DSPy catches ``Exception`` per example and goes on; this passes up to the compile)."""


class BudgetCaps(BaseModel):
    """The user's caps; ``None`` means uncapped."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_calls: int | None = Field(default=None, ge=1)
    max_tokens: int | None = Field(default=None, ge=1)  # whole-run total (--max-total-tokens)
    max_usd: float | None = Field(default=None, gt=0)

    @property
    def any(self) -> bool:
        return any(getattr(self, cap) is not None for cap in CAP_NAMES)


def _add(a: float | None, b: float | None) -> float | None:
    return None if a is None and b is None else (a or 0.0) + (b or 0.0)


class Spend(BaseModel):
    """LM calls and what they used (``usage``, its cost what counts against ``--max-usd``): one
    role's spend, all roles' together, or a projection of either.

    ``paid`` is the USD paid now (an answer replayed from the response cache paid nothing);
    ``None`` with ``usage.cost``: unpriced.
    """

    calls: int = 0
    cache_hits: int = 0
    usage: Usage = Field(default_factory=Usage)
    paid: float | None = None

    @property
    def tokens(self) -> int:
        """Prompt plus completion tokens: what ``--max-total-tokens`` counts."""
        return self.usage.prompt_tokens + self.usage.completion_tokens

    @property
    def usd(self) -> float | None:
        return self.usage.cost

    def __add__(self, other: Spend) -> Spend:
        return Spend(
            calls=self.calls + other.calls,
            cache_hits=self.cache_hits + other.cache_hits,
            usage=self.usage + other.usage,
            paid=_add(self.paid, other.paid),
        )

    def as_dict(self) -> dict[str, Any]:
        """The figures a compile artifact's manifest stores."""
        priced = self.usd is not None
        return {
            "calls": self.calls,
            "cache_hits": self.cache_hits,
            "prompt_tokens": self.usage.prompt_tokens,
            "completion_tokens": self.usage.completion_tokens,
            "total_tokens": self.tokens,
            "usd": round(self.usd or 0.0, 6) if priced else None,
            "usd_paid": round(self.paid or 0.0, 6) if priced else None,
        }


def spent(
    calls: int,
    prompt_tokens: int,
    completion_tokens: int,
    usd: float | None,
    *,
    cached: bool,
    replays_count: bool,
) -> Spend:
    """What ``calls`` answers used (``usd`` None: unpriced). A replayed answer (``cached``) paid
    nothing now; ``replays_count``: its cost still counts against the caps (a compile counts every
    call, so that its rerun is a replay; an eval run counts what it pays)."""
    cost = None if usd is None else (usd if replays_count or not cached else 0.0)
    return Spend(
        calls=calls,
        cache_hits=calls if cached else 0,
        usage=Usage(
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            total_tokens=prompt_tokens + completion_tokens,
            cost=cost,
        ),
        paid=None if usd is None else 0.0 if cached else usd,
    )


def projected(calls: int, prompt_per_call: float, completion_per_call: int, pricing: Pricing) -> Spend:
    """The spend of ``calls`` calls of this estimated size (unpriced when the model is)."""
    prompt = round(calls * prompt_per_call)
    completion = calls * completion_per_call
    usd = pricing.usd(prompt, completion) if pricing.known else None
    usage = Usage(
        prompt_tokens=prompt, completion_tokens=completion, total_tokens=prompt + completion, cost=usd
    )
    return Spend(calls=calls, usage=usage)


@dataclass(frozen=True)
class Reservation:
    """The worst case of one admission: its calls, their prompt tokens, all their tokens (prompt
    plus each call's output limit) and those tokens' USD at the run's rate."""

    calls: int
    prompt_tokens: int
    tokens: int
    usd: float


@dataclass(frozen=True)
class Ticket:
    """An admitted reservation, to settle once its calls end; ``parent``: its share in the parent ledger."""

    role: str
    reservation: Reservation
    parent: Ticket | None = None

    @property
    def calls(self) -> int:
        return self.reservation.calls


@dataclass
class Admission:
    """What :meth:`Ledger.admitted` yields: the ticket, and ``used``, set by the caller to what
    its calls spent (left ``None``: nothing, a call that failed before any answer)."""

    ticket: Ticket
    used: Spend | None = None


class Ledger:
    """The one spend ledger of a job (an eval run, a compile, an experiment, the guard service):
    its caps, what was spent per role, and what the calls in flight reserved.

    Every LM call is admitted here first (:meth:`admit`, or :meth:`admitted` around the call): it
    reserves the call's worst case, and is refused (``BudgetExceeded``) when spent plus reserved
    plus that would pass a cap; :meth:`settle` replaces the reservation with what the call used.
    The check and the reservation are one step under a lock no ``await`` is ever made under, so
    threads and asyncio tasks alike never start a call the cap cannot cover. A ledger with a
    ``parent`` (a compile inside an experiment) is admitted by both: its own caps and the
    parent's hold, and the parent's total is every child's. ``earlier``: what the job spent before
    this invocation (a resumed experiment's finished steps).
    """

    def __init__(
        self,
        caps: BudgetCaps | None = None,
        *,
        parent: Ledger | None = None,
        max_lm_errors: int = 10,
        earlier: Spend | None = None,
        replays_count: bool | None = None,
    ) -> None:
        self.caps = caps or BudgetCaps()
        self.parent = parent
        #: Whether an answer replayed from the response cache counts at its price (a compile's, an
        #: experiment's: their reruns are replays) or as nothing (an eval run counts what it pays).
        inherited = parent is not None and parent.replays_count
        self.replays_count: bool = replays_count if replays_count is not None else inherited
        self.max_lm_errors = max_lm_errors
        self.roles: dict[str, Spend] = {} if earlier is None else {EARLIER: earlier}
        self.refusals = 0
        self.refused_by: str | None = None
        self.optimizer_stopped = False
        self.lm_errors = 0
        self.last_error: str | None = None
        self.halted = False  # a lasting failure (``halt``): every later call is refused
        self._held = _ZERO
        self._reserved = _ZERO
        self._lock = threading.Condition()

    def __deepcopy__(self, memo: dict[int, Any]) -> Ledger:
        return self  # shared by every copy of a budgeted LM, like a connection

    @property
    def exhausted(self) -> bool:
        return self.refusals > 0

    @property
    def failing(self) -> bool:
        """Whether the LM errors reached ``max_lm_errors``, or a lasting failure halted the calls
        (calls are refused from then on)."""
        return self.halted or self.lm_errors >= self.max_lm_errors

    def halt(self) -> None:
        """Refuse every later call: a failure no retry fixes (a refused key, a dead server) was met."""
        with self._lock:
            self.halted = True

    def record_error(self, role: str, error: str) -> None:
        """Count a call that raised (after DSPy's own retries)."""
        with self._lock:
            self.lm_errors += 1
            self.last_error = f"{role} LM: {error}"

    def total(self) -> Spend:
        """What was spent (settled), every role together (``earlier``: before this invocation)."""
        with self._lock:
            return sum(self.roles.values(), Spend())

    def reserved(self) -> Reservation:
        """What the calls in flight hold now."""
        with self._lock:
            return self._reserved

    def left(self) -> dict[str, float]:
        """What each cap (here or in a parent) leaves after what is spent and reserved; uncapped: absent."""
        with self._lock:
            total, held = self.total(), self._reserved
            used = {"max_calls": total.calls + held.calls, "max_tokens": total.tokens + held.tokens,
                    "max_usd": (total.usd or 0.0) + held.usd}  # fmt: skip
            left: dict[str, float] = {
                cap: getattr(self.caps, cap) - used[cap]
                for cap in CAP_NAMES
                if getattr(self.caps, cap) is not None
            }
        if self.parent is not None:
            above = self.parent.left()
            for cap in CAP_NAMES:
                if cap in above:
                    left[cap] = min(left.get(cap, above[cap]), above[cap])
        return left

    @contextmanager
    def hold_back(self, calls: int = 0, tokens: int = 0, usd: float = 0.0) -> Iterator[None]:
        """Within the block, calls may use the caps minus these amounts."""
        with self._lock:
            previous, self._held = self._held, Reservation(calls, 0, tokens, usd)
        try:
            yield
        finally:
            with self._lock:
                self._held = previous

    def admit(self, role: str, worst: Reservation, *, optimizer: bool = False, later: bool = False) -> Ticket:
        """Reserve ``worst`` (a call's worst case), or raise ``BudgetExceeded``; an ``optimizer`` call
        raises :class:`OptimizerStopped` instead, and sets ``optimizer_stopped``: later optimizer calls do too.
        ``later``: a call that would fit once the calls in flight settle raises :class:`NotYet` instead
        (no refusal is counted), for the caller to ask again then."""
        try:
            with self._lock:
                self._check(role, worst, optimizer, later)
                parent = None
                if self.parent is not None:
                    try:
                        parent = self.parent.admit(role, worst, later=later)
                    except NotYet:
                        raise
                    except BudgetExceeded:
                        self._refused(self.parent.refused_by or "max_calls", optimizer)
                        raise
                self._reserved = _plus(self._reserved, worst)
                return Ticket(role, worst, parent)
        except NotYet:
            raise
        except BudgetExceeded as exc:
            if not optimizer:
                raise
            raise OptimizerStopped(str(exc)) from exc

    def _check(self, role: str, worst: Reservation, optimizer: bool, later: bool) -> None:
        """Raise ``BudgetExceeded`` when ``worst`` may not start (holding the lock), ``NotYet`` when
        (with ``later``) it may once the calls in flight settle."""
        if optimizer and self.optimizer_stopped:
            raise BudgetExceeded(f"the optimizer was stopped: {role} LM call refused")
        if self.failing:
            self.optimizer_stopped = self.optimizer_stopped or optimizer
            why = "a lasting LM failure" if self.halted else f"{self.lm_errors} failed LM calls"
            raise BudgetExceeded(f"{why}: {role} LM call refused")
        spent, reserved = self.total(), self._reserved
        used = (spent.calls, spent.tokens, spent.usd or 0.0)
        held = (self._held.calls, self._held.tokens, self._held.usd)
        asked = (worst.calls, worst.tokens, worst.usd)
        flying = (reserved.calls, reserved.tokens, reserved.usd)
        for cap, *figures in zip(CAP_NAMES, used, held, asked, flying, strict=True):
            limit = getattr(self.caps, cap)
            total, back, ask, fly = figures
            if limit is None or total + fly + ask <= limit - back:
                continue
            if later and fly > 0 and total + ask <= limit - back:
                raise NotYet(cap)  # it fits once the calls in flight settle, unless they spend it
            self._refused(cap, optimizer)
            raise BudgetExceeded(f"{cap} reached: {role} LM call refused")

    def _refused(self, cap: str, optimizer: bool) -> None:
        self.optimizer_stopped = self.optimizer_stopped or optimizer
        self.refusals += 1
        self.refused_by = self.refused_by or cap

    def settle(self, ticket: Ticket, spent: Spend) -> None:
        """Replace a reservation with what its calls actually used (the parent's share too)."""
        with self._lock:
            self._reserved = _minus(self._reserved, ticket.reservation)
            if self._reserved.calls == 0:
                self._reserved = _ZERO  # no float residue of the dollars once nothing is in flight
            self.roles[ticket.role] = self.roles.get(ticket.role, Spend()) + spent
            self._lock.notify_all()
        if ticket.parent is not None and self.parent is not None:
            self.parent.settle(ticket.parent, spent)

    @contextmanager
    def admitted(self, role: str, worst: Reservation) -> Iterator[Admission]:
        """Admit ``worst`` for the block (the calls run inside it, on a thread) and settle at what the
        block set ``used`` to, whatever it raises."""
        admission = Admission(self.admit(role, worst))
        try:
            yield admission
        finally:
            self.settle(admission.ticket, admission.used or Spend())

    @asynccontextmanager
    async def aadmitted(self, role: str, worst: Reservation) -> AsyncIterator[Admission]:
        """:meth:`admitted` for asyncio tasks: the admission eval's units and the guard service's
        checks pass. A call that fits once the calls in flight settle waits for them (it is refused
        only when it cannot fit beside what is spent); a rate controller that decides when a call
        may start awaits here too, after the reservation and before the block."""
        while True:
            try:
                ticket = self.admit(role, worst, later=True)
                break
            except NotYet:
                await asyncio.sleep(SETTLE_POLL_S)
        admission = Admission(ticket)
        try:
            yield admission
        finally:
            self.settle(ticket, admission.used or Spend())

    def wait_idle(self) -> None:
        """Wait until every call in flight (a stopped optimizer's lingering threads) has settled."""
        with self._lock:
            self._lock.wait_for(lambda: self._reserved.calls == 0)


EARLIER = "earlier"  # the role of what a resumed job spent before this invocation
_ZERO = Reservation(0, 0, 0, 0.0)


def _plus(a: Reservation, b: Reservation) -> Reservation:
    return Reservation(
        a.calls + b.calls, a.prompt_tokens + b.prompt_tokens, a.tokens + b.tokens, a.usd + b.usd
    )


def _minus(a: Reservation, b: Reservation) -> Reservation:
    return Reservation(
        a.calls - b.calls, a.prompt_tokens - b.prompt_tokens, a.tokens - b.tokens, a.usd - b.usd
    )


def worst_case(pricing: Pricing, prompt_tokens: int, *, calls: int = 1, attempts: int = 1) -> Reservation:
    """The reservation of ``calls`` calls of ``prompt_tokens`` each (an upper bound: ``prompt_bound``),
    each writing at most the model's output limit, priced at ``pricing``'s rate (batch or list).
    ``attempts``: calls one of them may take (a DSPy adapter's fallback asks again); they count as one
    call against ``--max-calls``, as a unit's record does. Without a known output limit (only when no
    token or dollar cap needs it, :func:`require_prices`) the expected completion stands in."""
    limit = pricing.output_limit if pricing.output_limit is not None else pricing.completion_guess
    sent = calls * attempts
    return Reservation(
        calls=calls,
        prompt_tokens=sent * prompt_tokens,
        tokens=sent * (prompt_tokens + limit),
        usd=sent * pricing.usd(prompt_tokens, limit),
    )


def require_prices(caps: BudgetCaps, pricing: Mapping[str, Pricing]) -> None:
    """``--max-usd`` needs every model (``pricing`` by name) priced: an unpriced one would never reach
    the cap; ``--max-usd`` and ``--max-total-tokens`` need each model's output limit, a call's worst case."""
    unpriced = [name for name, each in pricing.items() if not each.known]
    if caps.max_usd is not None and unpriced:
        raise ConfigError(
            f"--max-usd: no price for {' or '.join(unpriced)} in the price map DSPy uses; "
            "cap --max-calls or --max-total-tokens instead"
        )
    unlimited = [name for name, each in pricing.items() if each.output_limit is None]
    flag = "--max-usd" if caps.max_usd is not None else "--max-total-tokens" if caps.max_tokens else None
    if flag is not None and unlimited:
        raise ConfigError(
            f"{flag}: no output limit is known for {' or '.join(unlimited)}, so a call's worst case cannot be "
            "reserved before it starts; set --max-tokens (the completion tokens a call may write)"
        )


def ledger_line(ledger: Ledger) -> str:
    """The spend and the reservations of the calls in flight, against each cap of ``ledger`` (or of
    the job above it): ``calls 12+3 reserved/40 | tokens 3,400+1,200 reserved/20,000 | $0.0123+0.0040 reserved/0.05``."""
    scope = ledger
    while not scope.caps.any and scope.parent is not None:
        scope = scope.parent  # a step without caps of its own: the job's caps, and the job's spend
    caps, total, held = scope.caps, scope.total(), scope.reserved()
    parts = []
    if caps.max_calls is not None:
        parts.append(f"calls {total.calls:,}+{held.calls:,} reserved/{caps.max_calls:,}")
    if caps.max_tokens is not None:
        parts.append(f"tokens {total.tokens:,}+{held.tokens:,} reserved/{caps.max_tokens:,}")
    if caps.max_usd is not None:
        parts.append(f"${total.usd or 0.0:.4f}+{held.usd:.4f} reserved/{caps.max_usd:g}")
    return " | ".join(parts) or f"calls {total.calls:,}+{held.calls:,} reserved"
