"""What a compile will spend, before any call: the projected calls, tokens and dollars per phase.

``compile --dry-run`` prints this plan; the compile reserves the final dev scoring from it
(caps, budget and the budgeted LM: ``sp_dspy._budget``, ``_budgeted_lm``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from sp_dspy._budget import Spend, projected
from sp_dspy._pricing import Pricing, mean_prompt_tokens

HELPER_COMPLETION = 400
HELPER_PREAMBLE = 500
HELPER_CONTEXT_PROMPTS = 3


class CompilePlan(BaseModel):
    """The projection ``--dry-run`` prints and the compile reserves dev budget from."""

    phases: dict[str, dict[str, Spend]]
    total: Spend
    priced: dict[str, bool]
    assumptions: list[str] = Field(default_factory=list)


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
    phases: dict[str, dict[str, Spend]] = {
        "dev_before": {"task": projected(len(dev_examples), dev_prompt, completion, task)},
        "optimize": {"task": projected(projection.program_calls, train_prompt * slots, completion, task)},
        "dev_after": {"task": projected(top_k * len(dev_examples), dev_prompt * slots, completion, task)},
    }
    priced = {"task": task.known}
    if helper is not None and projection.helper_calls:
        role, helper_pricing = helper
        helper_prompt = HELPER_CONTEXT_PROMPTS * train_prompt + HELPER_PREAMBLE
        phases["optimize"][role] = projected(
            projection.helper_calls, helper_prompt, HELPER_COMPLETION, helper_pricing
        )
        priced[role] = helper_pricing.known
    estimates = [each for phase in phases.values() for each in phase.values()]
    total = sum(estimates, Spend())
    if not all(priced.values()):  # a partly priced total would understate the dollars
        total.usage.cost = None
    assumptions = [
        "tokens ~ characters / 4 of the prompts the adapter builds for these examples",
        f"{completion} completion tokens per task call; {HELPER_COMPLETION} per helper call",
        "optimizer calls are upper estimates read off the optimizer's algorithm",
        f"dev evaluated once before and for {top_k} final candidate(s) after",
    ]
    return CompilePlan(phases=phases, total=total, priced=priced, assumptions=assumptions)
