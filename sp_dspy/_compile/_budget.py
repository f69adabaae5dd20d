"""Hard budget caps for a compile: every LM call asks first, none is made past a cap.

Optimizers make their LM calls deep inside DSPy (threads, adapters, retries of
parsing), so the caps cannot be checked around the optimizer; they are checked in
the LM itself. ``_budgeted_lm.budgeted`` turns a ``dspy.LM`` into a ``BudgetedLM``
(same object state, a subclass that overrides ``__call__``/``acall``) whose every
call first *reserves* its share here, under a lock, and raises
:class:`BudgetExceeded` instead of calling when the reservation would cross a cap.
Copies of the LM (DSPy copies LMs to change temperature or history) share the one
:class:`Budget`.

What counts: every call the compile issues, answered from the response cache or
not, so a capped compile is deterministic and its rerun is a pure cache replay (a
larger cap then continues from the cache). ``n`` completions count as ``n`` calls.
Tokens and dollars are reserved from an estimate (prompt characters / 4, plus a
typical completion) and settled with the reported usage and cost; a call starts only
if the spend so far plus its estimate fits, so the last call can overrun the token
or dollar cap by no more than its completion exceeding the estimate. Retries of a
transient network error happen inside one call and are part of it. With calls in
parallel, which call meets the cap first can vary between runs.

Once the optimizer's LMs meet a refusal, the optimizer is stopped
(:class:`OptimizerStopped`) rather than left to run on with every call refused.

A phase can hold part of the caps back (``hold_back``) so that the dev evaluation
after the optimizer still has budget when the optimizer spent its share.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

CHARS_PER_TOKEN = 4


class BudgetExceeded(Exception):
    """A call was refused: it would cross a cap (or the share of it this phase may use)."""


class OptimizerStopped(BaseException):
    """Unwinds the optimizer once the budget refused one of its calls.

    A ``BaseException`` on purpose: DSPy's evaluators and optimizers catch
    ``Exception`` per example and go on, so a refused call raised as an ``Exception``
    would be logged (with its whole example) and followed by every remaining call
    being refused in turn. This one passes through their handlers (and through
    worker threads, whose futures re-raise it) up to the compile, which then
    scores the candidates found so far. Raised only by the optimizer's LMs
    (``budgeted(..., stops_optimizer=True)``); the compile's own dev evaluations
    get ``BudgetExceeded`` per case.
    """


class LMFailing(BudgetExceeded):
    """A call was refused because the LM kept failing (``Budget.max_lm_errors`` errors).

    A subclass of ``BudgetExceeded`` so every place that stops cleanly on a cap also
    stops on it; the compile then reports the failure instead of saving a program.
    """


class BudgetCaps(BaseModel):
    """The user's caps; ``None`` means uncapped."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_calls: int | None = Field(default=None, ge=1)
    max_tokens: int | None = Field(default=None, ge=1)  # whole-run total (--max-total-tokens)
    max_usd: float | None = Field(default=None, gt=0)

    @property
    def any(self) -> bool:
        return any(value is not None for value in (self.max_calls, self.max_tokens, self.max_usd))


@dataclass
class Tally:
    """Spend of one LM role (or all together)."""

    calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usd: float = 0.0
    usd_paid: float = 0.0
    priced: bool = False

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, other: Tally) -> None:
        self.calls += other.calls
        self.cache_hits += other.cache_hits
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.usd += other.usd
        self.usd_paid += other.usd_paid
        self.priced = self.priced or other.priced

    def as_dict(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "cache_hits": self.cache_hits,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.tokens,
            "usd": round(self.usd, 6) if self.priced else None,
            "usd_paid": round(self.usd_paid, 6) if self.priced else None,
        }


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
    roles: dict[str, Tally] = field(default_factory=dict)
    refusals: int = 0
    refused_by: str | None = None
    optimizer_stopped: bool = False
    max_lm_errors: int = 10
    lm_errors: int = 0
    last_error: str | None = None
    _held: tuple[int, int, float] = (0, 0, 0.0)
    _reserved: tuple[int, int, float] = (0, 0, 0.0)
    _lock: threading.Condition = field(default_factory=threading.Condition)

    def __deepcopy__(self, memo: dict[int, Any]) -> Budget:
        return self  # shared by every copy of a budgeted LM, like a connection

    @property
    def exhausted(self) -> bool:
        """Whether any call has been refused."""
        return self.refusals > 0

    @property
    def failing(self) -> bool:
        """Whether the LM errors reached ``max_lm_errors`` (calls are refused from then on)."""
        return self.lm_errors >= self.max_lm_errors

    def record_error(self, role: str, error: str) -> None:
        """Count a call that raised (after DSPy's own retries)."""
        with self._lock:
            self.lm_errors += 1
            self.last_error = f"{role} LM: {error}"

    def total(self) -> Tally:
        with self._lock:
            return self._total()

    def _total(self) -> Tally:
        total = Tally()
        for tally in self.roles.values():
            total.add(tally)
        return total

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
        """Reserve a call's estimated share, or raise ``BudgetExceeded``.

        An ``optimizer`` call raises :class:`OptimizerStopped` instead, and sets
        ``optimizer_stopped`` so that every later optimizer call does too.
        """
        try:
            return self._reserve(role, calls, prompt_tokens, tokens, usd, optimizer)
        except BudgetExceeded as exc:
            if not optimizer:
                raise
            raise OptimizerStopped(str(exc)) from exc

    def _reserve(
        self, role: str, calls: int, prompt_tokens: int, tokens: int, usd: float, optimizer: bool
    ) -> Ticket:
        with self._lock:
            if optimizer and self.optimizer_stopped:
                raise BudgetExceeded(f"the optimizer was stopped: {role} LM call refused")
            if self.lm_errors >= self.max_lm_errors:
                self.optimizer_stopped = self.optimizer_stopped or optimizer
                raise LMFailing(f"{self.lm_errors} failed LM calls: {role} LM call refused")
            spent = self._total()
            held_calls, held_tokens, held_usd = self._held
            res_calls, res_tokens, res_usd = self._reserved
            caps = self.caps
            crossed = None
            if caps.max_calls is not None and spent.calls + res_calls + calls > caps.max_calls - held_calls:
                crossed = "max_calls"
            elif caps.max_tokens is not None and (
                spent.tokens + res_tokens + tokens > caps.max_tokens - held_tokens
            ):
                crossed = "max_tokens"
            elif caps.max_usd is not None and spent.usd + res_usd + usd > caps.max_usd - held_usd:
                crossed = "max_usd"
            if crossed is not None:
                self.optimizer_stopped = self.optimizer_stopped or optimizer
                self.refusals += 1
                self.refused_by = self.refused_by or crossed
                raise BudgetExceeded(f"{crossed} reached: {role} LM call refused")
            self._reserved = (res_calls + calls, res_tokens + tokens, res_usd + usd)
            return Ticket(role, calls, tokens, usd, prompt_tokens)

    def settle(self, ticket: Ticket, spent: Tally) -> None:
        """Replace a reservation with what the call actually cost."""
        with self._lock:
            res_calls, res_tokens, res_usd = self._reserved
            self._reserved = (res_calls - ticket.calls, res_tokens - ticket.tokens, res_usd - ticket.usd)
            self.roles.setdefault(ticket.role, Tally()).add(spent)
            self._lock.notify_all()

    def wait_idle(self) -> None:
        """Wait until every call in flight has settled.

        A stopped optimizer's worker threads may still be finishing calls they
        started before the stop; the compile waits for them so that what it records
        (and the next phase's share of the caps) counts them.
        """
        with self._lock:
            self._lock.wait_for(lambda: self._reserved[0] == 0)


@dataclass(frozen=True)
class Pricing:
    """USD per prompt and per completion token; ``None`` prices when the model is not priced."""

    prompt: float | None = None
    completion: float | None = None
    completion_guess: int = 200

    @property
    def known(self) -> bool:
        return self.prompt is not None and self.completion is not None

    def usd(self, prompt_tokens: int, completion_tokens: int) -> float:
        if not self.known:
            return 0.0
        return prompt_tokens * (self.prompt or 0.0) + completion_tokens * (self.completion or 0.0)


def estimate_tokens(text: str) -> int:
    """Rough token count of text (characters / 4), for reservations and dry runs."""
    return max(1, len(text) // CHARS_PER_TOKEN) if text else 0
