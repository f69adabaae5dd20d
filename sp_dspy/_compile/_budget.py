"""What a compile may spend and what it will spend: caps, budget, budgeted LM, plan.

Optimizers call LMs deep inside DSPy, so caps are enforced in the LM (:func:`budgeted`): each
call reserves its estimated share under a lock, is refused past a cap, and settles what it used.
Every call counts, cached or not, so a capped compile is deterministic and its rerun a replay.
"""

from __future__ import annotations

import functools
import operator
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from sp_dspy._errors import ConfigError
from sp_dspy._lm import LMConfig

CHARS_PER_TOKEN = 4
# Typical completion lengths (tokens) of one answer.
COMPLETION_GUESS = {"per-policy": 120, "per-rule": 40}
COT_EXTRA = 300
HELPER_COMPLETION = 400
HELPER_PREAMBLE = 500
HELPER_CONTEXT_PROMPTS = 3
PROMPT_SAMPLE = 200
# Failures that belong to one input (too long, rejected by a content filter, unreadable),
# not to the LM: they leave that example unanswered and do not count towards stopping.
PER_EXAMPLE_ERRORS = frozenset({"context_length", "bad_request", "parse"})
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
        for name in ("calls", "cache_hits", "prompt_tokens", "completion_tokens", "usd", "usd_paid"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
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
        with self._lock:  # reentrant: ``reserve`` calls this holding it
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
        """Reserve a call's estimated share, or raise ``BudgetExceeded``; an ``optimizer`` call raises
        :class:`OptimizerStopped` instead, and sets ``optimizer_stopped``: later optimizer calls do too."""
        try:
            with self._lock:
                if optimizer and self.optimizer_stopped:
                    raise BudgetExceeded(f"the optimizer was stopped: {role} LM call refused")
                if self.failing:
                    self.optimizer_stopped = self.optimizer_stopped or optimizer
                    raise BudgetExceeded(f"{self.lm_errors} failed LM calls: {role} LM call refused")
                spent, reserved = self.total(), self._reserved
                after = (
                    spent.calls + reserved[0] + calls,
                    spent.tokens + reserved[1] + tokens,
                    spent.usd + reserved[2] + usd,
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

    def settle(self, ticket: Ticket, spent: Tally) -> None:
        """Replace a reservation with what the call actually cost."""
        with self._lock:
            res_calls, res_tokens, res_usd = self._reserved
            self._reserved = (res_calls - ticket.calls, res_tokens - ticket.tokens, res_usd - ticket.usd)
            self.roles.setdefault(ticket.role, Tally()).add(spent)
            self._lock.notify_all()

    def wait_idle(self) -> None:
        """Wait until every call in flight (a stopped optimizer's lingering threads) has settled."""
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
        if self.prompt is None or self.completion is None:
            return 0.0
        return prompt_tokens * self.prompt + completion_tokens * self.completion


def estimate_tokens(text: str) -> int:
    """Rough token count of text (characters / 4), for reservations and dry runs."""
    return max(1, len(text) // CHARS_PER_TOKEN) if text else 0


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


@functools.cache
def budgeted_class() -> type[Any]:
    """``BudgetedLM``: a ``dspy.BaseLM`` that wraps an LM and reserves each call against a :class:`Budget`."""
    from sp_dspy._lm import import_dspy

    dspy = import_dspy()

    class BudgetedLM(dspy.BaseLM):  # type: ignore[name-defined]
        """Wraps ``inner`` (any ``dspy.LM``): reserve, call it, settle what the call used.

        Each call runs on a fresh ``inner.copy()`` with the wrapper's settings, so a copy of the
        wrapper with other settings (SIMBA's ``lm.copy(temperature=1.0)``) calls with those.
        """

        def __init__(
            self, inner: Any, budget: Budget, role: str, pricing: Pricing, *, stops_optimizer: bool
        ) -> None:
            super().__init__(
                model=inner.model, model_type=inner.model_type, cache=inner.cache, **dict(inner.kwargs)
            )
            self.kwargs = dict(inner.kwargs)  # exactly the inner LM's request settings
            self.num_retries = getattr(inner, "num_retries", 0)
            self.inner = inner
            self.budget = budget
            self.role = role
            self.pricing = pricing
            self.stops_optimizer = stops_optimizer

        @contextmanager
        def _charged(self, prompt: Any, messages: Any, kwargs: Mapping[str, Any]) -> Iterator[Any]:
            """A fresh copy of the inner LM to call, its call reserved before and settled after."""
            from sp_dspy._lm import classify_error, history_usage, redact

            n = int(kwargs.get("n") or self.kwargs.get("n") or 1)
            prompt_tokens = estimate_tokens(_message_text(prompt, messages))
            guess = self.pricing.completion_guess
            tokens, usd = n * (prompt_tokens + guess), n * self.pricing.usd(prompt_tokens, guess)
            ticket = self.budget.reserve(
                self.role, n, prompt_tokens * n, tokens, usd, optimizer=self.stops_optimizer
            )
            call = self.inner.copy()
            call.kwargs = dict(self.kwargs)
            try:
                yield call
            except Exception as exc:
                if classify_error(exc) not in PER_EXAMPLE_ERRORS:
                    first = (str(exc).strip().splitlines() or [""])[0]
                    self.budget.record_error(self.role, redact(f"{type(exc).__name__}: {first}"[:300]))
                raise
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
                used_prompt = (used.prompt_tokens if used else 0) or ticket.prompt_tokens
                spent_usd = float(cost) if cost is not None else self.pricing.usd(used_prompt, completion)
                spent = Tally(
                    calls=ticket.calls,
                    cache_hits=ticket.calls if cache_hit else 0,
                    prompt_tokens=used_prompt,
                    completion_tokens=completion,
                    usd=spent_usd,
                    usd_paid=0.0 if cache_hit else spent_usd,
                    priced=cost is not None or self.pricing.known,
                )
                self.budget.settle(ticket, spent)
                self.history.extend(call.history)

        def __call__(self, prompt: Any = None, *, messages: Any = None, **kwargs: Any) -> Any:
            with self._charged(prompt, messages, kwargs) as call:
                return call(prompt, messages=messages, **kwargs)

        async def acall(self, prompt: Any = None, *, messages: Any = None, **kwargs: Any) -> Any:
            with self._charged(prompt, messages, kwargs) as call:
                return await call.acall(prompt, messages=messages, **kwargs)

    # Adapters read the LM's capabilities: the inner LM's (``BaseLM`` properties, so set here).
    for name in ("function_calling", "reasoning", "response_schema"):
        setattr(BudgetedLM, f"supports_{name}", property(operator.attrgetter(f"inner.supports_{name}")))
    BudgetedLM.supported_params = property(operator.attrgetter("inner.supported_params"))
    return BudgetedLM


def budgeted(
    lm: Any, budget: Budget, role: str, pricing: Pricing | None = None, *, stops_optimizer: bool = False
) -> Any:
    """``lm`` with its calls charged to ``budget`` under ``role``; a refused call raises
    :class:`BudgetExceeded`, or with ``stops_optimizer`` (an optimizer's LMs) :class:`OptimizerStopped`."""
    return budgeted_class()(lm, budget, role, pricing or Pricing(), stops_optimizer=stops_optimizer)


class RoleEstimate(BaseModel):
    """Projected spend of one LM role."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usd: float | None = None

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class CompilePlan(BaseModel):
    """The projection ``--dry-run`` prints and the compile reserves dev budget from."""

    phases: dict[str, dict[str, RoleEstimate]]
    total: RoleEstimate
    priced: dict[str, bool]
    assumptions: list[str] = Field(default_factory=list)


def pricing_for(config: LMConfig, completion_guess: int) -> Pricing:
    """USD per token from the price map DSPy prices calls with; unpriced for fakes and unknown models."""
    if config.is_fake or not config.provider:
        return Pricing(completion_guess=completion_guess)
    from sp_dspy._lm import import_dspy
    from sp_dspy._lm._compat import price_rates

    import_dspy()  # the offline price-map environment is set before DSPy loads
    model = config.model.split("/", 1)[1]
    try:
        prompt, completion, _ = price_rates(config.provider, model)
    except Exception:  # advisory metadata: a malformed entry must not stop a compile
        prompt = completion = None
    return Pricing(prompt=prompt, completion=completion, completion_guess=completion_guess)


def require_prices(caps: BudgetCaps, pricing: Mapping[str, Pricing]) -> None:
    """``--max-usd`` needs every model (``pricing`` by name) priced: an unpriced one would never reach the cap."""
    unpriced = [name for name, each in pricing.items() if not each.known]
    if caps.max_usd is not None and unpriced:
        raise ConfigError(
            f"--max-usd: no price for {' or '.join(unpriced)} in the price map DSPy uses; "
            "cap --max-calls or --max-total-tokens instead"
        )


def completion_guess(protocol: str, cot: bool, config: LMConfig) -> int:
    guess = COMPLETION_GUESS[protocol] + (COT_EXTRA if cot else 0)
    return min(guess, config.max_tokens) if config.max_tokens else guess


def mean_prompt_tokens(student: Any, examples: Sequence[Any]) -> float:
    """Mean estimated prompt tokens of the student's first predictor over ``examples``."""
    import dspy

    _, predictor = student.named_predictors()[0]
    adapter = dspy.settings.adapter or dspy.ChatAdapter()
    step = max(1, len(examples) // PROMPT_SAMPLE)  # an even spread is enough for a mean
    sizes = []
    for example in list(examples)[::step]:
        messages = adapter.format(predictor.signature, demos=[], inputs=example.inputs().toDict())
        sizes.append(estimate_tokens(_message_text(None, messages)))
    return sum(sizes) / len(sizes) if sizes else 0.0


def estimate(calls: int, prompt_per_call: float, completion_per_call: int, pricing: Pricing) -> RoleEstimate:
    prompt = round(calls * prompt_per_call)
    completion = calls * completion_per_call
    usd = pricing.usd(prompt, completion) if pricing.known else None
    return RoleEstimate(calls=calls, prompt_tokens=prompt, completion_tokens=completion, usd=usd)


def build_plan(
    *,
    recipe: Any,
    settings: BaseModel,
    student: Any,
    train_examples: Sequence[Any],
    dev_examples: Sequence[Any],
    task: Pricing,
    helper: tuple[str, Pricing] | None,
    top_k: int,
) -> CompilePlan:
    """The projected calls, tokens and dollars of every phase of one compile."""
    completion = task.completion_guess
    train_prompt = mean_prompt_tokens(student, train_examples)
    dev_prompt = mean_prompt_tokens(student, dev_examples)
    projection = recipe.projection(settings, len(train_examples), len(dev_examples))
    values = settings.model_dump()  # a prompt holds the instructions and at most this many demos
    labeled = values.get("max_labeled_demos", 0) or values.get("max_demos", 0)
    slots = 1 + values.get("max_bootstrapped_demos", 0) + labeled
    phases: dict[str, dict[str, RoleEstimate]] = {
        "dev_before": {"task": estimate(len(dev_examples), dev_prompt, completion, task)},
        "optimize": {"task": estimate(projection.program_calls, train_prompt * slots, completion, task)},
        "dev_after": {"task": estimate(top_k * len(dev_examples), dev_prompt * slots, completion, task)},
    }
    priced = {"task": task.known}
    if helper is not None and projection.helper_calls:
        role, helper_pricing = helper
        helper_prompt = HELPER_CONTEXT_PROMPTS * train_prompt + HELPER_PREAMBLE
        phases["optimize"][role] = estimate(
            projection.helper_calls, helper_prompt, HELPER_COMPLETION, helper_pricing
        )
        priced[role] = helper_pricing.known
    estimates = [each for phase in phases.values() for each in phase.values()]
    total = RoleEstimate(
        calls=sum(each.calls for each in estimates),
        prompt_tokens=sum(each.prompt_tokens for each in estimates),
        completion_tokens=sum(each.completion_tokens for each in estimates),
        usd=sum(each.usd or 0.0 for each in estimates) if all(priced.values()) else None,
    )
    assumptions = [
        "tokens ~ characters / 4 of the prompts the adapter builds for these examples",
        f"{completion} completion tokens per task call; {HELPER_COMPLETION} per helper call",
        "optimizer calls are upper estimates read off the optimizer's algorithm",
        f"dev evaluated once before and for {top_k} final candidate(s) after",
    ]
    return CompilePlan(phases=phases, total=total, priced=priced, assumptions=assumptions)
