"""``BudgetedLM``: a ``dspy.BaseLM`` whose every call of the LM it wraps is admitted by a :class:`Ledger`.

Optimizers call LMs deep inside DSPy, so a compile's caps are enforced in the LM: each call
reserves its worst case (its prompt and its output limit), is refused past a cap, and settles what it used. Every call
counts, cached or not, so a capped compile is deterministic and its rerun a replay. This
module imports DSPy; a compile imports it when it builds its LMs.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import dspy

from sp_dspy._budget import Ledger, spent, worst_case
from sp_dspy._compile._failures import CallFailures, CallOutcome
from sp_dspy._lm import classify_error, history_usage, redact
from sp_dspy._pricing import Pricing, estimate_tokens, message_text, prompt_bound

# Failures that belong to one input (too long, rejected by a content filter, unreadable),
# not to the LM: they leave that example unanswered and do not count towards stopping.
PER_EXAMPLE_ERRORS = frozenset({"context_length", "bad_request", "parse"})


class BudgetedLM(dspy.BaseLM):
    """Wraps ``inner`` (any ``dspy.LM``): reserve, call it, settle what the call used; a refused
    call raises ``BudgetExceeded``, or with ``stops_optimizer`` (an optimizer's LMs) ``OptimizerStopped``.

    Each call runs on a fresh ``inner.copy()`` with the wrapper's settings, so a copy of the
    wrapper with other settings (SIMBA's ``lm.copy(temperature=1.0)``) calls with those.
    """

    def __init__(
        self,
        inner: Any,
        budget: Ledger,
        role: str,
        pricing: Pricing | None = None,
        *,
        stops_optimizer: bool = False,
        failures: CallFailures | None = None,
    ) -> None:
        super().__init__(
            model=inner.model, model_type=inner.model_type, cache=inner.cache, **dict(inner.kwargs)
        )
        self.kwargs = dict(inner.kwargs)  # exactly the inner LM's request settings
        self.num_retries = getattr(inner, "num_retries", 0)
        self.inner = inner
        self.budget = budget
        self.role = role
        self.pricing = pricing or Pricing()
        self.stops_optimizer = stops_optimizer
        self.failures = failures or CallFailures()

    # Adapters read the LM's capabilities: the inner LM's (``BaseLM`` properties, so set here).
    supports_function_calling = property(operator.attrgetter("inner.supports_function_calling"))
    supports_reasoning = property(operator.attrgetter("inner.supports_reasoning"))
    supports_response_schema = property(operator.attrgetter("inner.supports_response_schema"))
    supported_params = property(operator.attrgetter("inner.supported_params"))

    @contextmanager
    def _charged(self, prompt: Any, messages: Any, kwargs: Mapping[str, Any]) -> Iterator[Any]:
        """A fresh copy of the inner LM to call, its call reserved before and settled after."""
        n = int(kwargs.get("n") or self.kwargs.get("n") or 1)
        text = message_text(prompt, messages)
        prompt_tokens = estimate_tokens(text)  # what an answer reporting no usage is counted at
        limit = kwargs.get("max_tokens") or kwargs.get("max_completion_tokens")
        pricing = self.pricing if not limit else dataclasses.replace(self.pricing, output_limit=int(limit))
        worst = worst_case(pricing, prompt_bound(text, len(messages or []) or 1), calls=n)
        ticket = self.budget.admit(self.role, worst, optimizer=self.stops_optimizer)
        call = self.inner.copy()
        call.kwargs = dict(self.kwargs)
        try:
            yield call
        except Exception as exc:
            kind = classify_error(exc)
            first = (str(exc).strip().splitlines() or [""])[0]
            error = redact(f"{type(exc).__name__}: {first}"[:300])
            if kind not in PER_EXAMPLE_ERRORS:
                self.budget.record_error(self.role, error)
            failed = CallOutcome(kind, f"{self.role} LM: {error}", self.role, prompt_tokens)
            if self.failures.observe(failed):
                self.budget.halt()
            raise
        else:
            self.failures.observe(CallOutcome(role=self.role))
        finally:
            entry = call.history[-1] if call.history else {}
            # Reported tokens (a replayed answer's too); estimates only where none are reported.
            used, cache_hit = history_usage(entry) if entry else (None, False)
            if used is None:
                outputs = entry.get("outputs") or []
                text = "".join(o.get("text") or "" if isinstance(o, Mapping) else str(o) for o in outputs)
                completion = estimate_tokens(text)
            else:
                completion = used.completion_tokens
            cost = entry.get("cost")
            used_prompt = (used.prompt_tokens if used else 0) or prompt_tokens * ticket.calls
            usd_spent = (
                float(cost)
                if cost is not None
                else self.pricing.usd(used_prompt, completion)
                if self.pricing.known
                else None
            )
            self.budget.settle(
                ticket,
                spent(ticket.calls, used_prompt, completion, usd_spent, cached=cache_hit, replays_count=True),
            )
            self.history.extend(call.history)

    def __call__(self, prompt: Any = None, *, messages: Any = None, **kwargs: Any) -> Any:
        with self._charged(prompt, messages, kwargs) as call:
            return call(prompt, messages=messages, **kwargs)

    async def acall(self, prompt: Any = None, *, messages: Any = None, **kwargs: Any) -> Any:
        with self._charged(prompt, messages, kwargs) as call:
            return await call.acall(prompt, messages=messages, **kwargs)
