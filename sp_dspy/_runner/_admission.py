"""How a run's units pass the ledger: each unit's worst case before it starts, its record's spend after.

Eval and the guard service run guard programs unit by unit (a case, or one per-rule judgment);
every LM call of a unit is admitted by the run's :class:`~sp_dspy._budget.Ledger` as part of
its unit: the unit reserves the worst case of all its calls (its exact prompt as an upper bound,
each call's output limit, priced at the run's rate) and settles at what its record used.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from sp_dspy.programs import is_raw_program

from .._budget import (
    NO_ERROR_LIMIT,
    BudgetCaps,
    BudgetExceeded,
    Ledger,
    Reservation,
    Spend,
    require_prices,
    spent,
    worst_case,
)
from .._data import Case
from .._lm import LMConfig, import_dspy
from .._pricing import Pricing, message_text, prompt_bound
from ._cost import raw_request, run_pricing
from ._engine import Record
from ._units import units_of

#: Calls one DSPy predictor may make for one answer: the chat adapter asks again through the JSON
#: adapter when it cannot parse the first answer.
ADAPTER_ATTEMPTS = 2
#: What a guard model's own chat template adds around the settings a guard format sends it
#: (Granite Guardian's and ShieldGemma's instructions: a few hundred tokens), held on top.
GUARD_TEMPLATE_TOKENS = 1024


def unit_worst_case(program: Any, protocol: str, pricing: Pricing) -> Callable[[Any], Reservation]:
    """The reservation of one unit of ``program`` (a case, or a ``(case, target)`` judgment per-rule)."""
    if is_raw_program(program):
        return lambda unit: _raw_worst_case(program, unit, pricing)
    bound = _dspy_bound(program, protocol)
    return lambda unit: worst_case(pricing, bound(unit), attempts=ADAPTER_ATTEMPTS)


def case_worst_case(program: Any, protocol: str, pricing: Pricing) -> Callable[[Case], Reservation]:
    """The reservation of checking one whole case (the guard service): every unit of it."""
    unit = unit_worst_case(program, protocol, pricing)

    def of_case(case: Case) -> Reservation:
        parts = [unit(each) for each in units_of([case], protocol)]
        return Reservation(
            calls=sum(p.calls for p in parts),
            prompt_tokens=sum(p.prompt_tokens for p in parts),
            tokens=sum(p.tokens for p in parts),
            usd=sum(p.usd for p in parts),
        )

    return of_case


def _raw_worst_case(program: Any, unit: Any, pricing: Pricing) -> Reservation:
    """One unit of a program sending its own messages (the official baselines, a guard model's format):
    their bound, with the body settings a guard model's chat template renders into the prompt beside
    its own text, and the call's own output limit where its format sets one (a guard model's few tokens)."""
    messages, body, settings = raw_request(program, unit)
    bound = prompt_bound(message_text(None, messages), len(messages))
    if body:
        bound += prompt_bound(json.dumps(body, ensure_ascii=False), 0) + GUARD_TEMPLATE_TOKENS
    limit = settings.get("max_tokens")
    priced = pricing if not limit else dataclasses.replace(pricing, output_limit=int(limit))
    return worst_case(priced, bound)


def _dspy_bound(program: Any, protocol: str) -> Callable[[Any], int]:
    """The prompt bound of one unit of a DSPy program: each predictor's prompt for the unit's inputs,
    demonstrations included, as the adapter in effect formats it."""
    from sp_dspy.programs import case_to_example, target_examples

    dspy = import_dspy()
    predictors = [predictor for _, predictor in program.named_predictors()]

    def bound(inputs: dict[str, Any]) -> int:
        adapter = dspy.settings.adapter or dspy.ChatAdapter()
        total = 0
        for predictor in predictors:
            demos = list(getattr(predictor, "demos", None) or [])
            messages = adapter.format(predictor.signature, demos=demos, inputs=inputs)
            total += prompt_bound(message_text(None, messages), len(messages))
        return total

    if protocol != "per-rule":
        return lambda case: bound(case_to_example(case, "per-policy").inputs().toDict())
    by_case: dict[str, dict[int, int]] = {}

    def judgment(unit: tuple[Case, Any]) -> int:
        case, target = unit
        if case.id not in by_case:
            if len(by_case) > 256:  # units come case by case: the recent cases are enough
                by_case.clear()
            by_case[case.id] = {
                example.target_rule: bound(example.inputs().toDict()) for example in target_examples(case)
            }
        return by_case[case.id][target.rule]

    return judgment


def record_spend(
    record: Record | None, calls: int, pricing: Pricing, *, replays_count: bool = False
) -> Spend:
    """What a unit's record says its calls used (``None``: nothing); a replayed answer paid nothing now,
    and the caps count what a run pays (``replays_count``: at its price, as an experiment counts)."""
    usage = None if record is None else record.usage
    prompt = 0 if usage is None else usage.prompt_tokens
    completion = 0 if usage is None else usage.completion_tokens
    cost = None if usage is None else usage.cost
    cached = record is not None and bool(record.cache_hits)
    known = cost is not None or pricing.known
    usd = (float(cost) if cost is not None else pricing.usd(prompt, completion)) if known else None
    return spent(
        calls if record is not None else 0, prompt, completion, usd, cached=cached, replays_count=False
    )


@dataclass
class UnitAdmission:
    """An eval run's units through its ledger: a unit that would cross a cap is not started
    (:class:`BudgetExceeded`), and once a cap refused one no further unit starts."""

    ledger: Ledger
    pricing: Pricing
    worst: Callable[[Any], Reservation]

    def wrap(self, work: Callable[[Any], Awaitable[Record]]) -> Callable[[Any], Awaitable[Record]]:
        """``work`` admitted by the ledger before it starts and settled when it ends."""

        async def admitted(unit: Any) -> Record:
            if self.ledger.exhausted:  # once a cap is met the run takes no further unit, small or not
                raise BudgetExceeded(f"{self.ledger.refused_by} reached")
            worst = self.worst(unit)
            async with self.ledger.aadmitted("task", worst) as admission:
                record = await work(unit)
                admission.used = record_spend(
                    record, worst.calls, self.pricing, replays_count=self.ledger.replays_count
                )
                return record

        return admitted


def run_admission(
    caps: BudgetCaps, program: Any, protocol: str, lm_config: LMConfig, *, parent: Ledger | None = None
) -> UnitAdmission | None:
    """The admission of an eval run's units: a ledger of ``caps`` (under ``parent``'s, an experiment's)
    at the list price; ``None`` when nothing caps the run."""
    if not caps.any and parent is None:
        return None
    pricing = run_pricing(program, protocol, lm_config)
    ledger = Ledger(caps, parent=parent, max_lm_errors=NO_ERROR_LIMIT)  # failing LMs: EarlyStop
    scope: Ledger | None = ledger
    while scope is not None:  # the job's caps need what the run's own do: prices, an output limit
        require_prices(scope.caps, {lm_config.model: pricing})
        scope = scope.parent
    return UnitAdmission(ledger, pricing, unit_worst_case(program, protocol, pricing))
