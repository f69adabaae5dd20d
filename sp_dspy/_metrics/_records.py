"""Result records (contract section 4), per-rule judgments, and what reading files gives.

Two kinds of line share one file format: a per-policy *record* (one case, its predicted
rule set; the reference harness's lines, our runner's, or the minimal
``{"id": ..., "violated_rules": [...]}``) and a per-rule *judgment* (one case x one rule,
``"kind": "judgment"``). Merging follows retry semantics: a later file or line replaces
an earlier record with the same id, and a judgment the earlier one for the same (case,
rule); the reference double-counts merged judgments, so only this makes re-runs safe.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, field_validator

from .._data._rule_number import RuleNumber
from .._usage import Usage

#: Completions at or over this many tokens hit a provider's output cap (cap-aware mode).
CAP_THRESHOLD = 65_000

#: ``kind`` values read as per-policy records; any other kind (the harness's ``summary``
#: lines, manifests) carries no prediction and is skipped and counted.
POLICY_KINDS = (None, "policy", "record", "case")


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
        """Whether the record leaves every metric denominator (contract section 2), as in the
        reference: refused, errored, parse-failed (also inside the harness's ``structured_scores``),
        no prediction, or, in cap-aware mode, a completion that ran into the output cap."""
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
        """A usable verdict: not refused, parsed, no error, and a boolean prediction (the
        reference folds unparseable outputs into "refused", for exclusion and refusal rate)."""
        return not (self.refused or self.parse_failed or self.error) and self.pred is not None


@dataclass
class ResultSet:
    """Everything read from result files: the latest record per case id and the latest
    judgment per (case, rule), in file order; the first ``bad_line_messages`` are kept."""

    records: dict[str, PolicyRecord] = field(default_factory=dict)
    judgments: list[JudgmentRecord] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    bad_lines: int = 0
    bad_line_messages: list[str] = field(default_factory=list)
    ignored_lines: int = 0
    replaced_records: int = 0
    duplicate_judgments: int = 0

    @property
    def has_judgments(self) -> bool:
        return bool(self.judgments)

    def result_ids(self) -> set[str]:
        """Every case id the files mention, records and judgments alike."""
        return set(self.records) | {judgment.cid for judgment in self.judgments}
