"""The guard service's request and answer bodies, and the OpenAPI document built from them.

Requests are validated with these models (one line per problem); the answers are what the
handlers send. The OpenAPI document is generated from the same models' JSON schemas, so it
cannot drift from what the service accepts and answers.
"""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .._guard import Verdict

#: What a check judges: ``Guard.check``'s ``scope``.
Scope = Literal["conversation", "last-turn"]


class CheckRequest(BaseModel):
    """One check: a policy and the conversation to check against it (chat messages or ``Turn N`` text)."""

    model_config = ConfigDict(extra="forbid")

    policy: str | None = Field(
        default=None,
        description="Numbered rules, one per line ('1. ...'); optional when the service was started with --policy.",
    )
    messages: list[dict[str, Any]] | None = Field(
        default=None, description="Chat messages: {role: user|assistant|system, content}."
    )
    conversation: str | None = Field(default=None, description="'Turn N - User/Chatbot: ...' text.")
    framework: str = Field(default="", description="Regulatory framework text shown to per-rule judges.")
    id: str | None = Field(default=None, description="Echoed with the verdict.")
    scope: Scope | None = Field(
        default=None,
        description="conversation: judge it whole; last-turn: only its last message, the earlier ones its "
        "context (not with the official program). Default: the service's --scope.",
    )

    @model_validator(mode="after")
    def _one_conversation(self) -> Self:
        if (self.messages is None) == (self.conversation is None):
            raise ValueError("give exactly one of messages (chat messages) or conversation (Turn N text)")
        return self

    @property
    def dialogue(self) -> str | list[dict[str, Any]]:
        """What ``Guard.acheck`` takes as the conversation."""
        return self.messages if self.messages is not None else str(self.conversation)


class BatchRequest(BaseModel):
    """Several checks answered together, in order."""

    model_config = ConfigDict(extra="forbid")

    checks: list[CheckRequest] = Field(min_length=1)


class ViolatedRule(BaseModel):
    """A violated rule with its text, as the policy states it."""

    rule: int
    text: str


class CheckAnswer(Verdict):
    """The guard's ``Verdict`` with the violated rules' texts and the check's latency."""

    violated: list[ViolatedRule] | None = Field(
        description="The violated rules with their texts (None: no usable answer, see status)."
    )
    latency_ms: float = Field(description="Milliseconds the check took in the service, LM calls included.")
    id: str | None = Field(default=None, description="The request's id, when it gave one.")


class BatchVerdict(CheckAnswer):
    """One check of a batch: its verdict."""

    line: int = Field(description="The check's position in the batch, from 1.")


class BatchError(BaseModel):
    """One check of a batch that has no verdict: why (a bad input, a budget cap)."""

    line: int = Field(description="The check's position in the batch, from 1.")
    id: str | None = None
    error: str


class BatchAnswer(BaseModel):
    """One answer per check of the batch, in order."""

    answers: list[BatchVerdict | BatchError]


class ErrorBody(BaseModel):
    """Every answer that is not a verdict: one line, and a stable class where there is one."""

    error: str
    error_class: str | None = None
