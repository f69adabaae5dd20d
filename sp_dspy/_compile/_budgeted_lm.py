"""``BudgetedLM``: a ``dspy.LM`` that asks the compile's :class:`Budget` before every call.

See ``_budget`` for what is counted. A call that raises still counts; a failure of
the LM itself (server, network, rate limit after DSPy's retries, auth) is also
recorded, and after ``Budget.max_lm_errors`` of them every further call is refused,
so a dead endpoint stops a compile in seconds instead of scoring every candidate 0.
The call's usage and cost are read from the
history entry DSPy records for it, captured on the calling context (threads and
event loops each see their own), so concurrent calls never settle each other's
numbers.
"""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Mapping
from typing import Any

from sp_dspy._compile._budget import (
    Budget,
    Pricing,
    Tally,
    Ticket,
    estimate_tokens,
)

# Failures that belong to one input (too long, rejected by a content filter, unreadable),
# not to the LM: they leave that example unanswered and do not count towards stopping.
PER_EXAMPLE_ERRORS = frozenset({"context_length", "bad_request", "parse"})
_CAPTURED: contextvars.ContextVar[list[dict[str, Any]] | None] = contextvars.ContextVar(
    "sp_dspy_budget_capture", default=None
)


def _message_text(prompt: Any, messages: Any) -> str:
    if messages:
        parts = []
        for message in messages:
            content = message.get("content") if isinstance(message, Mapping) else None
            if isinstance(content, list):
                content = "".join(str(p.get("text") or "") for p in content if isinstance(p, Mapping))
            parts.append(str(content or ""))
        return "\n".join(parts)
    return str(prompt or "")


def _one_line(exc: BaseException) -> str:
    from sp_dspy._lm import redact

    lines = str(exc).strip().splitlines()
    return redact(f"{type(exc).__name__}: {lines[0] if lines else ''}"[:300])


def _outputs_text(entry: Mapping[str, Any]) -> str:
    outputs = entry.get("outputs") or []
    return "".join(o.get("text") or "" if isinstance(o, Mapping) else str(o) for o in outputs)


@functools.cache
def budgeted_class() -> type[Any]:
    """``BudgetedLM``: ``dspy.LM`` whose calls are reserved against a :class:`Budget` first."""
    from sp_dspy._lm import import_dspy

    dspy = import_dspy()

    class BudgetedLM(dspy.LM):  # type: ignore[name-defined]
        _sp_budget: Budget
        _sp_role: str
        _sp_pricing: Pricing
        _sp_stops_optimizer: bool

        def _sp_reserve(self, prompt: Any, messages: Any, kwargs: Mapping[str, Any]) -> Ticket:
            n = kwargs.get("n") or self.kwargs.get("n") or 1
            prompt_tokens = estimate_tokens(_message_text(prompt, messages))
            guess = self._sp_pricing.completion_guess
            tokens = n * (prompt_tokens + guess)
            usd = n * self._sp_pricing.usd(prompt_tokens, guess)
            return self._sp_budget.reserve(
                self._sp_role, int(n), prompt_tokens * n, tokens, usd, optimizer=self._sp_stops_optimizer
            )

        def _sp_settle(self, ticket: Ticket, entries: list[dict[str, Any]] | None) -> None:
            from sp_dspy._lm import TokenUsage, history_usage

            entry = entries[-1] if entries else {}
            # A replayed answer's tokens come from the response DSPy replayed, as on every
            # path; estimates only where nothing reports them.
            tokens, cache_hit = history_usage(entry) if entry else (TokenUsage(), False)
            prompt = tokens.prompt_tokens or ticket.prompt_tokens
            completion = tokens.completion_tokens
            if completion is None:
                completion = estimate_tokens(_outputs_text(entry))
            cost = entry.get("cost")
            pricing = self._sp_pricing
            usd = float(cost) if cost is not None else pricing.usd(prompt, completion)
            spent = Tally(
                calls=ticket.calls,
                cache_hits=ticket.calls if cache_hit else 0,
                prompt_tokens=prompt,
                completion_tokens=completion,
                usd=usd,
                usd_paid=0.0 if cache_hit else usd,
                priced=cost is not None or pricing.known,
            )
            self._sp_budget.settle(ticket, spent)

        def _sp_failed(self, exc: Exception) -> None:
            from sp_dspy._lm import classify_error

            if classify_error(exc) not in PER_EXAMPLE_ERRORS:
                self._sp_budget.record_error(self._sp_role, _one_line(exc))

        def __call__(self, prompt: Any = None, *, messages: Any = None, **kwargs: Any) -> Any:
            ticket = self._sp_reserve(prompt, messages, kwargs)
            captured: list[dict[str, Any]] = []
            token = _CAPTURED.set(captured)
            try:
                return super().__call__(prompt, messages=messages, **kwargs)
            except Exception as exc:
                self._sp_failed(exc)
                raise
            finally:
                _CAPTURED.reset(token)
                self._sp_settle(ticket, captured)

        async def acall(self, prompt: Any = None, *, messages: Any = None, **kwargs: Any) -> Any:
            ticket = self._sp_reserve(prompt, messages, kwargs)
            captured: list[dict[str, Any]] = []
            token = _CAPTURED.set(captured)
            try:
                return await super().acall(prompt, messages=messages, **kwargs)
            except Exception as exc:
                self._sp_failed(exc)
                raise
            finally:
                _CAPTURED.reset(token)
                self._sp_settle(ticket, captured)

        def update_history(self, entry: dict[str, Any]) -> None:
            captured = _CAPTURED.get()
            if captured is not None:
                captured.append(entry)
            super().update_history(entry)

    return BudgetedLM


def budgeted(
    lm: Any, budget: Budget, role: str, pricing: Pricing | None = None, *, stops_optimizer: bool = False
) -> Any:
    """A copy of ``lm`` whose calls are charged to ``budget`` under ``role``.

    With ``stops_optimizer`` (the LMs handed to an optimizer) a refused call raises
    :class:`OptimizerStopped`, which ends the optimizer run, and so does every later
    call once ``budget.optimizer_stopped`` is set; otherwise it raises
    :class:`BudgetExceeded`.

    The copy is ``lm``'s own class swapped for the ``BudgetedLM`` subclass: building
    a fresh ``dspy.LM`` would repeat everything ``make_lm`` decided (engine, keys,
    provider routing). A failed call (an error after it was sent) still counts.
    """
    copied = lm.copy()
    copied.__class__ = budgeted_class()
    copied._sp_budget = budget
    copied._sp_role = role
    copied._sp_pricing = pricing or Pricing()
    copied._sp_stops_optimizer = stops_optimizer
    return copied
