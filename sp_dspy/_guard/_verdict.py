"""What a guard answers an application: the violated rules and how far to trust them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .._metrics import PolicyRecord
from .._protocol import Protocol, Status, case_rule_numbers, keep_policy_rules, replace_surrogates
from .._usage import Usage

if TYPE_CHECKING:
    from .._data import Case


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
        description="The failure's class (auth, not_found, unreachable, ...; deadline: the check's "
        "Guard.load deadline passed) when status is error.",
    )
    dropped_rules: list[int] = Field(
        default_factory=list, description="Numbers the model named that are not rules of the policy."
    )
    rule_probabilities: dict[int, float] = Field(
        default_factory=dict,
        description="P(violated) per rule where the program records one (a per-rule guard model's "
        "first-token P(Yes), from logprobs); empty otherwise.",
    )

    @classmethod
    def of(cls, case: Case, answer: PolicyRecord, *, program: str, model: str) -> Verdict:
        """The verdict of a program's answer (its record) on ``case``, as an application reads it.

        Rule numbers the policy lacks are dropped; a per-rule answer has no error of its own,
        so its first failed judgment says why.
        """
        judgments = answer.judgments or []
        checked = sorted({j.rule for j in judgments}) or sorted(entry.rule for entry in case.rubric.entries())
        kept = keep_policy_rules(answer.violated_rules, case_rule_numbers(case))
        status = kept.status or answer.parse_status
        assert status is not None, "a program's answer states how it read"
        failed = next((j for j in judgments if j.error_class), answer)
        return cls(
            violated_rules=None if kept.rules is None else sorted(set(kept.rules)),
            status=status,
            rules_checked=checked,
            usage=answer.usage or Usage(),
            program=program,
            protocol=answer.protocol or "per-policy",
            model=model,
            reasoning=answer.analysis or answer.reasoning or "",
            error=failed.error,
            error_class=failed.error_class,
            dropped_rules=kept.dropped,
            rule_probabilities={
                j.rule: j.yes_probability for j in judgments if j.yes_probability is not None
            },
        )

    @field_validator("reasoning", "error", "program", "model")
    @classmethod
    def _encodable(cls, value: str | None) -> str | None:
        return None if value is None else replace_surrogates(value)

    @property
    def compliant(self) -> bool | None:
        """``True`` when no rule is violated, ``None`` when there is no usable answer."""
        return None if self.violated_rules is None else not self.violated_rules
