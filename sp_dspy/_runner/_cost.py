"""What an eval run will cost before any call (``--dry-run``): the projection compile makes too.

Its prices and prompt tokens as characters / 4 of the real prompts (``sp_dspy._pricing``); while
the run goes, its caps are the ledger's (``_admission``), which reserves each unit's worst case.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, Field

from sp_dspy.programs import NativePerPolicy, NativePerRule, is_raw_program, program_spec

from .._budget import Spend, projected
from .._data import Case
from .._lm import LMConfig, limit_bound_s, minimum_tokens
from .._pricing import (
    PROMPT_SAMPLE,
    Pricing,
    batch_price_basis,
    cache_savings,
    completion_guess,
    estimate_tokens,
    pricing_for,
    prompt_sizes,
)
from .._protocol import build_targets, per_policy_messages, per_rule_messages, prefix_layout_end
from .._usage import Usage
from ._units import units_of


class EvalPlan(BaseModel):
    """The projection ``eval --dry-run`` prints: one run of one model."""

    model: str
    program: str
    protocol: str
    cases: int
    estimate: Spend
    priced: bool
    largest_prompt: int = 0  # estimated tokens of the largest prompt among those sampled
    completion_guess: int = 0  # the tokens an answer is expected to take beside it
    assumptions: list[str] = Field(default_factory=list)
    #: ``--dry-run --batch``: the same calls' USD through the provider's batch API (None: unpriced or not asked).
    batch_usd: float | None = None
    #: Prompt tokens the provider's prompt cache could serve (a stable prefix reused), and the USD that saves.
    cache_read_tokens: int = 0
    cache_saved_usd: float | None = None
    #: Seconds the calls take at least under the model's known limits (``--rpm``, ``--tpm``); None: unknown.
    limit_bound_s: float | None = None
    limits: str = ""  # the limits it is bound by, as the user gave them


def _is_official(program: Any) -> bool:
    """A program sending its own messages (the official baselines, a guard model's format)."""
    return is_raw_program(program)


def raw_request(program: Any, unit: Any) -> tuple[list[dict[str, str]], dict[str, Any], dict[str, Any]]:
    """The exact messages of one unit of a program sending its own (the official baselines, a guard
    model's format), the body fields sent beside them and the call's own settings (a guard format's
    ``chat_template_kwargs`` and ``max_tokens``)."""
    if isinstance(program, NativePerRule):
        case, target = unit
        request = program.request_for(case, target)
        return request.messages, request.body, request.settings
    if isinstance(program, NativePerPolicy):
        request = program.request_for(unit)
        return request.messages, request.body, request.settings
    if isinstance(unit, tuple):
        case, target = unit
        return per_rule_messages(case, target, layout=program.layout), {}, {}
    return per_policy_messages(unit), {}, {}


def official_prompt_tokens(program: Any, unit: Any) -> int:
    """Estimated prompt tokens of one official-baseline unit: its exact messages / 4."""
    messages, _, _ = raw_request(program, unit)
    return estimate_tokens("\n".join(message["content"] for message in messages))


def dspy_prompt_tokens(program: Any, cases: Sequence[Case], protocol: str) -> tuple[float, int]:
    """Mean and largest estimated prompt tokens of a DSPy program's call over ``cases``, demos
    included (each demo counted as a mean prompt)."""
    from sp_dspy.programs import case_to_example, target_examples

    step = max(1, len(cases) // PROMPT_SAMPLE)
    sampled = list(cases)[::step]
    if protocol == "per-rule":
        examples = [example for case in sampled for example in target_examples(case)]
    else:
        examples = [case_to_example(case, "per-policy") for case in sampled]
    _, predictor = program.named_predictors()[0]
    demos = len(getattr(predictor, "demos", None) or [])
    sizes = prompt_sizes(program, examples) or [0]
    mean = sum(sizes) / len(sizes)
    return mean * (1 + demos), round(max(sizes) + mean * demos)


def run_pricing(program: Any, protocol: str, lm_config: LMConfig, *, batch: bool = False) -> Pricing:
    """USD per token of this model (``batch``: through its batch API), with the completion length
    a unit of this program reserves."""
    cot = not _is_official(program) and program_spec(program)["program"].endswith("-cot")
    return pricing_for(lm_config, completion_guess(protocol, cot, lm_config), batch=batch)


def plan_eval(
    program: Any,
    protocol: str,
    label: str,
    cases: Sequence[Case],
    lm_config: LMConfig,
    *,
    batch: bool = False,
) -> EvalPlan:
    """The projected calls, tokens and dollars of running ``program`` on ``cases`` (``batch``: also
    priced at the batch rate). Sends nothing."""
    pricing = run_pricing(program, protocol, lm_config)
    units = units_of(cases, protocol)
    if _is_official(program):
        sampled = units[:: max(1, len(units) // PROMPT_SAMPLE)]
        sizes = [official_prompt_tokens(program, unit) for unit in sampled] or [0]
        per_call, largest = sum(sizes) / len(sizes), max(sizes)
        own = isinstance(program, NativePerPolicy | NativePerRule)
        basis = f"characters / 4 of the {'guard format' if own else 'official'} messages"
        sample = f" (mean of {len(sampled)} calls spread over the run)" if len(sampled) < len(units) else ""
    else:
        per_call, largest = dspy_prompt_tokens(program, cases, protocol)
        basis = "characters / 4 of the prompts the DSPy adapter builds, demos included"
        shown = len(cases[:: max(1, len(cases) // PROMPT_SAMPLE)])
        sample = f" (mean over {shown} cases spread over the run)" if shown < len(cases) else ""
    estimate = projected(len(units), per_call, pricing.completion_guess, pricing)
    assumptions = []
    batch_usd = None
    if batch and pricing.known:
        batched = run_pricing(program, protocol, lm_config, batch=True)
        batch_usd = projected(len(units), per_call, batched.completion_guess, batched).usd
        assumptions.append(f"batched USD at {batch_price_basis(lm_config)}")
    read, written = cacheable_prefix(program, protocol, cases, lm_config, per_call, len(units))
    saved = cache_savings(lm_config, Usage(cache_read_tokens=read, cache_write_tokens=written), batch=batch)
    return EvalPlan(
        model=lm_config.display_name(),
        cache_read_tokens=read,
        cache_saved_usd=saved if read else None,
        program=label,
        protocol=protocol,
        cases=len(cases),
        estimate=estimate,
        limit_bound_s=limit_bound_s(estimate.calls, estimate.tokens, rpm=lm_config.rpm, tpm=lm_config.tpm),
        limits=", ".join(
            f"{limit:,} {what}/min"
            for limit, what in ((lm_config.rpm, "requests"), (lm_config.tpm, "tokens"))
            if limit
        ),
        batch_usd=batch_usd,
        priced=pricing.known,
        largest_prompt=largest,
        completion_guess=pricing.completion_guess,
        assumptions=[
            f"one call per {'judgment' if protocol == 'per-rule' else 'case'}; an estimate, not a bound",
            f"prompt tokens ~ {basis}{sample}",
            f"{pricing.completion_guess} completion tokens per call (reasoning models may write many more)",
            "answers already in the response cache cost nothing; --resume sends only missing units",
            *assumptions,
        ],
    )


def cacheable_prefix(
    program: Any, protocol: str, cases: Sequence[Case], lm_config: LMConfig, per_call: float, calls: int
) -> tuple[int, int]:
    """Estimated prompt tokens the provider's cache would serve (reads) and store (writes, which
    Anthropic bills) over a run: a DSPy program's demonstrations on every call after the first,
    the ``prefix`` layout's system message and conversation on every judgment of a case after
    its first; nothing for the official layouts or a prefix shorter than the provider caches."""
    provider = lm_config.provider
    if lm_config.is_fake or provider not in ("openai", "anthropic", "gemini"):
        return 0, 0
    smallest = minimum_tokens(lm_config.model.split("/", 1)[1]) if provider == "anthropic" else 1024
    writes = provider == "anthropic"
    if not _is_official(program):
        demos = len(getattr(program.named_predictors()[0][1], "demos", None) or [])
        prefix = round(per_call * demos / (1 + demos))
        if prefix < smallest or calls < 2:
            return 0, 0
        return prefix * (calls - 1), prefix if writes else 0
    if protocol != "per-rule" or getattr(program, "layout", None) != "prefix":
        return 0, 0
    read = written = 0
    for case in cases:
        targets = build_targets(case)
        messages = per_rule_messages(case, targets[0], layout="prefix") if targets else []
        end = prefix_layout_end(messages)
        if end is None or len(targets) < 2:
            continue
        prefix = estimate_tokens(messages[0]["content"] + messages[-1]["content"][: end[1]])
        if prefix >= smallest:
            read += prefix * (len(targets) - 1)
            written += prefix if writes else 0
    return read, written
