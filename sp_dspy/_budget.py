"""What a run may spend and what it spent: caps, and a budget that reserves each call's share.

Eval and compile both cap calls, tokens and dollars this way: each call (an eval unit, a
compile's LM call) reserves its estimated share under a lock, is refused past a cap, and
settles what it used. Below both the runner and compile.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ._errors import ConfigError
from ._pricing import Pricing
from ._usage import Usage

CAP_NAMES = ("max_calls", "max_tokens", "max_usd")  # the order caps are checked in
NO_ERROR_LIMIT = 1_000_000_000  # failing LMs are stopped by other means than a count


class BudgetExceeded(Exception):
    """A call was refused: it would cross a cap (or the share of it this phase may use)."""


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
class Ticket:
    role: str
    calls: int
    tokens: int
    usd: float
    prompt_tokens: int


@dataclass
class Budget:
    """Caps, what was spent per role, and the reservations of calls in flight."""

    caps: BudgetCaps = field(default_factory=BudgetCaps)
    roles: dict[str, Spend] = field(default_factory=dict)
    refusals: int = 0
    refused_by: str | None = None
    optimizer_stopped: bool = False
    max_lm_errors: int = 10
    lm_errors: int = 0
    last_error: str | None = None
    halted: bool = False  # a lasting failure (``halt``): every later call is refused
    _held: tuple[int, int, float] = (0, 0, 0.0)
    _reserved: tuple[int, int, float] = (0, 0, 0.0)
    _lock: threading.Condition = field(default_factory=threading.Condition)

    def __deepcopy__(self, memo: dict[int, Any]) -> Budget:
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
        with self._lock:  # reentrant: ``reserve`` calls this holding it
            return sum(self.roles.values(), Spend())

    @contextmanager
    def hold_back(self, calls: int = 0, tokens: int = 0, usd: float = 0.0) -> Iterator[None]:
        """Within the block, calls may use the caps minus these amounts."""
        with self._lock:
            previous, self._held = self._held, (calls, tokens, usd)
        try:
            yield
        finally:
            with self._lock:
                self._held = previous

    def reserve(
        self, role: str, calls: int, prompt_tokens: int, tokens: int, usd: float, *, optimizer: bool = False
    ) -> Ticket:
        """Reserve a call's estimated share, or raise ``BudgetExceeded``; an ``optimizer`` call raises
        :class:`OptimizerStopped` instead, and sets ``optimizer_stopped``: later optimizer calls do too."""
        try:
            with self._lock:
                if optimizer and self.optimizer_stopped:
                    raise BudgetExceeded(f"the optimizer was stopped: {role} LM call refused")
                if self.failing:
                    self.optimizer_stopped = self.optimizer_stopped or optimizer
                    why = "a lasting LM failure" if self.halted else f"{self.lm_errors} failed LM calls"
                    raise BudgetExceeded(f"{why}: {role} LM call refused")
                spent, reserved = self.total(), self._reserved
                after = (
                    spent.calls + reserved[0] + calls,
                    spent.tokens + reserved[1] + tokens,
                    (spent.usd or 0.0) + reserved[2] + usd,
                )
                for cap, total, held in zip(CAP_NAMES, after, self._held, strict=True):
                    limit = getattr(self.caps, cap)
                    if limit is not None and total > limit - held:
                        self.optimizer_stopped = self.optimizer_stopped or optimizer
                        self.refusals += 1
                        self.refused_by = self.refused_by or cap
                        raise BudgetExceeded(f"{cap} reached: {role} LM call refused")
                self._reserved = (reserved[0] + calls, reserved[1] + tokens, reserved[2] + usd)
                return Ticket(role, calls, tokens, usd, prompt_tokens)
        except BudgetExceeded as exc:
            if not optimizer:
                raise
            raise OptimizerStopped(str(exc)) from exc

    def settle(self, ticket: Ticket, spent: Spend) -> None:
        """Replace a reservation with what the call actually cost."""
        with self._lock:
            res_calls, res_tokens, res_usd = self._reserved
            self._reserved = (res_calls - ticket.calls, res_tokens - ticket.tokens, res_usd - ticket.usd)
            self.roles[ticket.role] = self.roles.get(ticket.role, Spend()) + spent
            self._lock.notify_all()

    def wait_idle(self) -> None:
        """Wait until every call in flight (a stopped optimizer's lingering threads) has settled."""
        with self._lock:
            self._lock.wait_for(lambda: self._reserved[0] == 0)


def require_prices(caps: BudgetCaps, pricing: Mapping[str, Pricing]) -> None:
    """``--max-usd`` needs every model (``pricing`` by name) priced: an unpriced one would never reach the cap."""
    unpriced = [name for name, each in pricing.items() if not each.known]
    if caps.max_usd is not None and unpriced:
        raise ConfigError(
            f"--max-usd: no price for {' or '.join(unpriced)} in the price map DSPy uses; "
            "cap --max-calls or --max-total-tokens instead"
        )
