"""The bodies of the two gateway contracts the guard service speaks besides its own ``/v1/check``:
LiteLLM's Generic Guardrail API and OpenAI's moderation API.

Their fields are those contracts' (LiteLLM's ``GenericGuardrailAPIRequest``/``Response``,
OpenAI's ``ModerationCreateParams``/``ModerationCreateResponse``); what sp-dspy adds sits in
one extension field, ``sp_dspy``, which their clients ignore.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ._models import Scope


class GuardrailRequest(BaseModel):
    """What the LiteLLM proxy posts before (``request``) or after (``response``) a model call."""

    # LiteLLM also sends images, tools, tool calls, its version, metadata and headers: not judged.
    model_config = ConfigDict(extra="allow")

    input_type: Literal["request", "response"] = Field(
        description="request: before the model call; response: after it (texts: the model's answer)."
    )
    texts: list[str] | None = Field(default=None, description="The texts of the call (each a user turn).")
    structured_messages: list[dict[str, Any]] | None = Field(
        default=None, description="The conversation with roles (OpenAI chat messages); judged when given."
    )
    model: str | None = Field(default=None, description="The model the proxy calls.")
    litellm_call_id: str | None = Field(default=None, description="Echoed in the answer's sp_dspy.id.")
    additional_provider_specific_params: dict[str, Any] | None = Field(
        default=None,
        description="sp-dspy reads 'policy' (numbered rules; default: the service's --policy) and "
        "'scope' (conversation or last-turn; default: the service's --scope).",
    )


class GatewayVerdict(BaseModel):
    """sp-dspy's extension of a gateway answer: the verdict behind it."""

    status: str = Field(description="The verdict's status: ok, recovered, failed, refused or error.")
    violated_rules: list[int] | None = Field(description="None: the guard gave no verdict (see status).")
    error: str | None = None
    error_class: str | None = None
    on_error: Literal["block", "allow"] | None = Field(
        default=None, description="Set when the guard gave no verdict: what --on-error made of it."
    )
    latency_ms: float
    id: str | None = None


class GuardrailAnswer(BaseModel):
    """LiteLLM's ``GenericGuardrailAPIResponse``: BLOCKED with a reason, or NONE (the call goes on)."""

    action: Literal["BLOCKED", "NONE"]
    blocked_reason: str | None = Field(
        default=None, description="Each violated rule's number and text, or why the guard gave no verdict."
    )
    sp_dspy: GatewayVerdict


class ModerationRequest(BaseModel):
    """OpenAI's moderation request; ``policy`` is sp-dspy's extension (default: the service's)."""

    model_config = ConfigDict(extra="forbid")

    input: str | list[str] | list[dict[str, Any]] = Field(
        description="A text, texts, or text parts ({type: text, text}); each judged on its own, as a user "
        "message, or as a conversation when written as 'Turn N - User/Chatbot: ...' lines."
    )
    model: str | None = Field(default=None, description="Echoed; the service's guard judges.")
    policy: str | None = Field(default=None, description="sp-dspy: numbered rules (default: --policy).")


class ModerationResult(BaseModel):
    """One input's result; the categories are the policy's rules, ``rule_1`` .. ``rule_n``."""

    flagged: bool = Field(description="A rule is violated (or no verdict, with --on-error block).")
    categories: dict[str, bool]
    category_scores: dict[str, float] = Field(
        description="The model's P(violated) where the program records one (a per-rule guard model's "
        "first-token P(Yes)), else 1.0 violated, 0.0 not."
    )
    sp_dspy: GatewayVerdict


class ModerationExtension(BaseModel):
    """sp-dspy's extension of a moderation answer: the texts of the rules the categories name."""

    rules: dict[str, str] = Field(description="{rule_N: the rule's text}.")
    program: str
    scope: Scope


class ModerationAnswer(BaseModel):
    """OpenAI's ``ModerationCreateResponse``, one result per input, in order."""

    id: str
    model: str
    results: list[ModerationResult]
    sp_dspy: ModerationExtension
