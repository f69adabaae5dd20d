"""What a compile will cost, worked out before any call: ``--dry-run`` and the dev reserve.

Calls come from the recipe's projection (program runs and helper calls, read off
each optimizer's source) plus the dev evaluations the compile adds: the starting
program once and each final candidate once. Tokens are estimated from the real
prompts: the student's adapter formats every train/dev example (no LM involved) and
characters / 4 stand in for tokens; demos an optimizer may add count as extra
examples in the prompt. Completions are a typical length per program kind, capped by
the LM's ``max_tokens``. Helper calls (instruction proposals, reflections) are
rougher: three task prompts' worth of context plus a fixed preamble. Dollars come
from the price map DSPy itself prices calls with (LiteLLM's, bundled with DSPy); a
model it does not know is reported unpriced.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from sp_dspy._compile._budget import Pricing, estimate_tokens
from sp_dspy._lm import LMConfig

# Typical completion lengths (tokens) of one answer.
COMPLETION_GUESS = {"per-policy": 120, "per-rule": 40}
COT_EXTRA = 300
HELPER_COMPLETION = 400
HELPER_PREAMBLE = 500
HELPER_CONTEXT_PROMPTS = 3
PROMPT_SAMPLE = 200


class RoleEstimate(BaseModel):
    """Projected spend of one LM role."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usd: float | None = None

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def plus(self, other: RoleEstimate) -> RoleEstimate:
        usd = None if self.usd is None and other.usd is None else (self.usd or 0.0) + (other.usd or 0.0)
        return RoleEstimate(
            calls=self.calls + other.calls,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            usd=usd,
        )


class CompilePlan(BaseModel):
    """The projection ``--dry-run`` prints and the compile reserves dev budget from."""

    phases: dict[str, dict[str, RoleEstimate]]
    total: RoleEstimate
    priced: dict[str, bool]
    assumptions: list[str] = Field(default_factory=list)

    def phase_total(self, name: str) -> RoleEstimate:
        total = RoleEstimate(usd=None)
        for estimate in self.phases.get(name, {}).values():
            total = total.plus(estimate)
        return total


def pricing_for(config: LMConfig, completion_guess: int) -> Pricing:
    """USD per token from the price map DSPy prices calls with (LiteLLM's, bundled).

    Unpriced for fakes and for models the map does not know (self-hosted ones).
    """
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
    if not isinstance(prompt, int | float) or not isinstance(completion, int | float):
        return Pricing(completion_guess=completion_guess)
    return Pricing(prompt=float(prompt), completion=float(completion), completion_guess=completion_guess)


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
        sizes.append(estimate_tokens("\n".join(str(m.get("content") or "") for m in messages)))
    return sum(sizes) / len(sizes) if sizes else 0.0


def demo_slots(settings: BaseModel) -> int:
    """Most demos the optimizer may put in the prompt."""
    values = settings.model_dump()
    return int(values.get("max_bootstrapped_demos", 0)) + int(
        values.get("max_labeled_demos", 0) or values.get("max_demos", 0)
    )


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
    helper: tuple[str, LMConfig, Pricing] | None,
    top_k: int,
) -> CompilePlan:
    """The projected calls, tokens and dollars of every phase of one compile."""
    task_pricing = task
    completion = task_pricing.completion_guess
    train_prompt = mean_prompt_tokens(student, train_examples)
    dev_prompt = mean_prompt_tokens(student, dev_examples)
    projection = recipe.projection(settings, len(train_examples), len(dev_examples))
    slots = 1 + demo_slots(settings)
    phases: dict[str, dict[str, RoleEstimate]] = {
        "dev_before": {"task": estimate(len(dev_examples), dev_prompt, completion, task_pricing)},
        "optimize": {
            "task": estimate(projection.program_calls, train_prompt * slots, completion, task_pricing)
        },
        "dev_after": {
            "task": estimate(top_k * len(dev_examples), dev_prompt * slots, completion, task_pricing)
        },
    }
    priced = {"task": task_pricing.known}
    if helper is not None and projection.helper_calls:
        role, _, helper_pricing = helper
        helper_prompt = HELPER_CONTEXT_PROMPTS * train_prompt + HELPER_PREAMBLE
        phases["optimize"][role] = estimate(
            projection.helper_calls, helper_prompt, HELPER_COMPLETION, helper_pricing
        )
        priced[role] = helper_pricing.known
    total = RoleEstimate(usd=None)
    for phase in phases.values():
        for role_estimate in phase.values():
            total = total.plus(role_estimate)
    if not all(priced.values()):
        total = total.model_copy(update={"usd": None})
    assumptions = [
        "tokens ~ characters / 4 of the prompts the adapter builds for these examples",
        f"{completion} completion tokens per task call; {HELPER_COMPLETION} per helper call",
        "optimizer calls are upper estimates read off the optimizer's algorithm",
        f"dev evaluated once before and for {top_k} final candidate(s) after",
    ]
    return CompilePlan(phases=phases, total=total, priced=priced, assumptions=assumptions)
