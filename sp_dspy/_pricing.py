"""What an LM call is expected to cost before it is made: USD per token, and token estimates.

Prices come from the snapshot DSPy prices calls with; prompt tokens are estimated as
characters / 4 of the real prompts. Eval's ``--dry-run`` and caps and compile's plan and
budget all estimate this way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._lm import (
    BATCH_DISCOUNT,
    FAKE_OUTPUT_LIMIT,
    PROFILES,
    LMConfig,
    has_batch_prices,
    import_dspy,
    price_rates,
)
from ._usage import Usage

CHARS_PER_TOKEN = 4
# Typical completion lengths (tokens) of one answer.
COMPLETION_GUESS = {"per-policy": 120, "per-rule": 40}
COT_EXTRA = 300
#: Tokens a chat template adds per message (role markers), and once more to prime the answer, at most.
TEMPLATE_TOKENS = 8
PROMPT_SAMPLE = 200  # prompts whose size a mean is taken over (an even spread is enough)


@dataclass(frozen=True)
class Pricing:
    """USD per prompt and per completion token; ``None`` prices when the model is not priced."""

    prompt: float | None = None
    completion: float | None = None
    completion_guess: int = 200
    #: The most completion tokens one call may write (None: unknown): what a reservation holds.
    output_limit: int | None = None

    @property
    def known(self) -> bool:
        return self.prompt is not None and self.completion is not None

    def usd(self, prompt_tokens: int, completion_tokens: int) -> float:
        if self.prompt is None or self.completion is None:
            return 0.0
        return prompt_tokens * self.prompt + completion_tokens * self.completion


def pricing_for(config: LMConfig, completion_guess: int, *, batch: bool = False) -> Pricing:
    """USD per token from the price map DSPy prices calls with (``batch``: the batch API's);
    unpriced for fakes and unknown models."""
    limit = output_limit(config)
    if config.is_fake or not config.provider:
        return Pricing(completion_guess=completion_guess, output_limit=limit)
    import_dspy()  # the offline price-map environment is set before DSPy loads
    model = config.model.split("/", 1)[1]
    try:
        prompt, completion, *_ = price_rates(config.provider, model, batch=batch)
    except Exception:  # advisory metadata: a malformed entry must not stop a compile
        prompt = completion = None
    return Pricing(
        prompt=prompt, completion=completion, completion_guess=completion_guess, output_limit=limit
    )


def output_limit(config: LMConfig) -> int | None:
    """The most completion tokens one call of ``config`` may write: its ``max_tokens``, else the limit
    its provider's requests carry by default (Anthropic's), else the model's maximum output in
    LiteLLM's model map; the fake's own limit; None when none is known (a served model without one)."""
    if config.max_tokens:
        return config.max_tokens
    if config.is_fake:
        return FAKE_OUTPUT_LIMIT
    profile = PROFILES.get(config.provider)
    if profile is not None and profile.default_limit is not None:
        return profile.default_limit
    if not config.provider:
        return None
    import_dspy()  # the offline model-map environment is set before LiteLLM loads
    import litellm

    try:
        info = litellm.get_model_info(config.model)
    except Exception:  # not in the map (a custom or served model): unknown
        return None
    limit = info.get("max_output_tokens") or info.get("max_tokens")
    return int(limit) if limit else None


def cache_savings(config: LMConfig, usage: Usage, *, batch: bool = False) -> float | None:
    """USD the provider's prompt cache saved on answers of ``usage`` tokens: cache reads below the
    input price, less cache writes above it (None: unpriced)."""
    if config.is_fake or not config.provider:
        return None
    import_dspy()
    model = config.model.split("/", 1)[1]
    input_rate, _, read_rate, write_rate = price_rates(config.provider, model, batch=batch)
    if input_rate is None:
        return None
    read, written = usage.cache_read_tokens or 0, usage.cache_write_tokens or 0
    saved = read * (input_rate - (read_rate if read_rate is not None else input_rate))
    return saved - written * ((write_rate if write_rate is not None else input_rate) - input_rate)


def batch_price_basis(config: LMConfig) -> str:
    """Where a batched call's price comes from: the price map's batch prices, else the discount."""
    import_dspy()
    model = config.model.split("/", 1)[1] if "/" in config.model else config.model
    if has_batch_prices(config.provider, model):
        return "the price map's batch prices"
    return f"the provider's documented batch discount ({BATCH_DISCOUNT:.0%} of the list price)"


def context_window(config: LMConfig) -> int | None:
    """The prompt tokens the model accepts, from LiteLLM's model map (``max_input_tokens``, else
    ``max_tokens``); None for fakes and models the map does not know (a local server's: its ``n_ctx``)."""
    if config.is_fake or not config.provider:
        return None
    import_dspy()  # the offline model-map environment is set before LiteLLM loads
    import litellm

    try:
        info = litellm.get_model_info(config.model)
    except Exception:  # not in the map (a custom or served model): unknown, as for prices
        return None
    window = info.get("max_input_tokens") or info.get("max_tokens")
    return int(window) if window else None


def completion_guess(protocol: str, cot: bool, config: LMConfig) -> int:
    """The completion tokens one answer is expected to take (capped by the config's ``max_tokens``)."""
    guess = COMPLETION_GUESS[protocol] + (COT_EXTRA if cot else 0)
    return min(guess, config.max_tokens) if config.max_tokens else guess


def prompt_bound(text: str, messages: int = 1) -> int:
    """The most prompt tokens ``text`` (in ``messages`` chat messages) can be: one per UTF-8 byte (a
    tokenizer's token covers a byte at least) and a chat template's markers. What a reservation holds;
    ``estimate_tokens`` is what a projection expects."""
    return len(text.encode("utf-8")) + TEMPLATE_TOKENS * (messages + 1)


def estimate_tokens(text: str) -> int:
    """Rough token count of text (characters / 4), for reservations and dry runs."""
    return max(1, len(text) // CHARS_PER_TOKEN) if text else 0


def message_text(prompt: Any, messages: Any) -> str:
    """The text of a call's messages (or its bare prompt), as its prompt tokens are estimated from."""
    if messages:
        parts = []
        for message in messages:
            content = message.get("content") if isinstance(message, Mapping) else None
            if isinstance(content, list):
                content = "".join(str(p.get("text") or "") for p in content if isinstance(p, Mapping))
            parts.append(str(content or ""))
        return "\n".join(parts)
    return str(prompt or "")


def prompt_sizes(student: Any, examples: Sequence[Any]) -> list[int]:
    """Estimated prompt tokens (no demos) of the student's first predictor on an even spread of
    at most :data:`PROMPT_SAMPLE` of ``examples``: enough for a mean, and for the largest of a spread."""
    import dspy

    _, predictor = student.named_predictors()[0]
    adapter = dspy.settings.adapter or dspy.ChatAdapter()
    step = max(1, len(examples) // PROMPT_SAMPLE)
    sizes = []
    for example in list(examples)[::step]:
        messages = adapter.format(predictor.signature, demos=[], inputs=example.inputs().toDict())
        sizes.append(estimate_tokens(message_text(None, messages)))
    return sizes


def mean_prompt_tokens(student: Any, examples: Sequence[Any]) -> float:
    """Mean estimated prompt tokens of the student's first predictor over ``examples``."""
    sizes = prompt_sizes(student, examples)
    return sum(sizes) / len(sizes) if sizes else 0.0
