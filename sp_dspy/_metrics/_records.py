"""Result records (contract section 4), judgments, and the rules for merging them.

Two kinds of line share one file format: a per-policy *record* (one case, its
predicted rule set) and a per-rule *judgment* (one case x one rule, a binary verdict,
``"kind": "judgment"``). ``_reader`` accepts the reference harness's lines, our own
runner's lines and the minimal "bring your own predictions" form
``{"id": ..., "violated_rules": [...]}``.

Merging follows retry semantics: a later file (or a later line) replaces an earlier
record with the same id, and a judgment replaces an earlier one for the same
(case, rule). The reference harness double-counts judgments when per-rule files are
merged; de-duplicating here is what makes a re-run of failed judgments safe.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, field_validator

from .._data._rule_number import RuleNumber

if TYPE_CHECKING:
    pass

#: Completions at or over this many tokens hit a provider's output cap (cap-aware mode).
CAP_THRESHOLD = 65_000

#: ``kind`` values read as per-policy records; any other kind (the harness's ``summary``
#: lines, manifests) carries no prediction and is skipped and counted.
POLICY_KINDS = (None, "policy", "record", "case")


class Usage(BaseModel):
    """Token counts of one LM call (or the sum over a case's calls)."""

    model_config = ConfigDict(extra="allow")

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    reasoning_tokens: int | None = None

    @field_validator("prompt_tokens", "completion_tokens", "total_tokens", mode="before")
    @classmethod
    def _null_is_zero(cls, value: object) -> object:
        return 0 if value is None else value


def _flag(value: object) -> object:
    """Harness files write ``null`` for "not refused"; treat it as ``False``."""
    return False if value is None else value


def _error_text(value: object) -> object:
    """Some harnesses store an error object; keep it as text, it only has to be truthy."""
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


class PolicyRecord(BaseModel):
    """One case's prediction: the reference harness's result line or the minimal form."""

    model_config = ConfigDict(extra="allow")

    id: str
    index: int | None = None
    violated_rules: list[RuleNumber] | None = None
    refused: bool = False
    parse_failed: bool = False
    error: str | None = None
    error_class: str | None = None
    analysis: str | None = None
    predicted_label: str | None = None
    model_name: str | None = None
    timestamp: str | None = None
    usage: Usage | None = None
    parse_status: str | None = None

    null_flags_are_false = field_validator("refused", "parse_failed", mode="before")(_flag)
    error_as_text = field_validator("error", mode="before")(_error_text)

    @field_validator("violated_rules", mode="before")
    @classmethod
    def _rule_objects(cls, value: object) -> object:
        """Accept ``{"rule": 5, "explanation": ...}`` items as well as bare numbers."""
        if isinstance(value, list):
            return [item.get("rule") if isinstance(item, dict) else item for item in value]
        return value

    def excluded(self, *, cap_aware: bool = False) -> bool:
        """Whether the record leaves every metric denominator (contract section 2).

        Mirrors the reference: refused, errored, parse-failed (also when flagged only
        inside the harness's ``structured_scores``), no prediction at all, or, in
        cap-aware mode, a completion that ran into the output cap.
        """
        if self.refused or self.error or self.parse_failed or self.violated_rules is None:
            return True
        nested = (self.model_extra or {}).get("structured_scores")  # the harness's nested scores
        if isinstance(nested, dict) and (nested.get("refused") or nested.get("parse_failed")):
            return True
        completion_tokens = 0 if self.usage is None else self.usage.completion_tokens
        return cap_aware and completion_tokens >= CAP_THRESHOLD


class JudgmentRecord(BaseModel):
    """One per-rule verdict (contract section 5); ``pred=None`` means no verdict."""

    model_config = ConfigDict(extra="allow")

    kind: Literal["judgment"] = "judgment"
    cid: str
    level: str | None = None
    rule: RuleNumber
    rule_type: str | None = None
    gt: bool | None = None
    pred: bool | None = None
    refused: bool = False
    parse_failed: bool = False
    error: str | None = None
    error_class: str | None = None
    usage: Usage | None = None

    null_flags_are_false = field_validator("refused", "parse_failed", mode="before")(_flag)
    error_as_text = field_validator("error", mode="before")(_error_text)

    @property
    def has_verdict(self) -> bool:
        """A usable verdict: not refused, parsed, no error, and a boolean prediction.

        The reference folds unparseable outputs into "refused"; so do we, for both
        case exclusion and ``per_rule_refusal_rate``.
        """
        return not (self.refused or self.parse_failed or self.error) and self.pred is not None

    @property
    def flagged(self) -> bool:
        """Whether this judgment puts its rule into the case's predicted set."""
        return self.has_verdict and bool(self.pred)


def sum_usage(usages: Iterable[Usage | None]) -> Usage | None:
    """The sum of the given usages (None when there is none).

    A missing count is 0; ``reasoning_tokens`` stays None unless some usage gives it.
    """
    prompt = completion = total = 0
    reasoning: int | None = None
    present = False
    for usage in usages:
        if usage is None:
            continue
        present = True
        prompt += usage.prompt_tokens or 0
        completion += usage.completion_tokens or 0
        total += usage.total_tokens or 0
        if (count := usage.reasoning_tokens) is not None:
            reasoning = (reasoning or 0) + count
    if not present:
        return None
    return Usage(
        prompt_tokens=prompt, completion_tokens=completion, total_tokens=total, reasoning_tokens=reasoning
    )
