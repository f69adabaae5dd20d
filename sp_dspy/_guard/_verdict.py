"""What a guard answers an application: the violated rules and how far to trust them."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .._protocol._parse_models import Status
from .._protocol._targets import Protocol
from .._protocol._text import replace_surrogates
from .._usage import Usage


class Verdict(BaseModel):
    """One check of a conversation against a policy.

    ``violated_rules`` is ``None`` when there is no usable answer (``failed``, ``refused``,
    ``error``): not "compliant". Rule numbers are the policy's, sorted; one the policy lacks
    is moved to ``dropped_rules`` and makes the status ``recovered`` (``failed`` if none is
    left). Lone surrogates in text fields become U+FFFD, so a verdict always serialises.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    violated_rules: list[int] | None
    status: Status
    rules_checked: list[int] = Field(description="The policy's rule numbers the guard judged.")
    usage: Usage = Field(
        default_factory=Usage,
        description="Tokens and USD of this check's answers (also when replayed from the cache; cost None: unpriced).",
    )
    program: str = Field(description="The program name (official, dspy, ...) or the artifact directory.")
    protocol: Protocol
    model: str
    reasoning: str = ""
    error: str | None = None
    error_class: str | None = Field(
        default=None,
        description="The failure's class (auth, not_found, unreachable, ...) when status is error.",
    )
    dropped_rules: list[int] = Field(
        default_factory=list, description="Numbers the model named that are not rules of the policy."
    )

    @field_validator("reasoning", "error", "program", "model")
    @classmethod
    def _encodable(cls, value: str | None) -> str | None:
        return None if value is None else replace_surrogates(value)

    @property
    def compliant(self) -> bool | None:
        """``True`` when no rule is violated, ``None`` when there is no usable answer."""
        return None if self.violated_rules is None else not self.violated_rules
