"""Pydantic models of the SafePyramid case schema (contract section 1).

Models are strict about what scoring needs (ids, levels, ground truth, rubric types)
and tolerant of the legacy spellings the published files use; normalisation happens
in ``_legacy.normalise_case`` before validation so these models stay simple.
"""

from __future__ import annotations

from functools import cached_property

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ._rule_number import CaseRuleNumber, RuleNumber
from ._types import LEVELS, Level, RuleType

__all__ = [
    "LEVELS",
    "Case",
    "FailureModeMetadata",
    "Level",
    "Rubric",
    "RubricEntry",
    "RuleNumber",
    "RuleType",
    "conversation_id",
]


class RubricEntry(BaseModel):
    """One rule of a case's rubric, with its interaction metadata."""

    model_config = ConfigDict(extra="allow")

    rule: CaseRuleNumber
    text: str
    type: RuleType
    paired_with: list[CaseRuleNumber] = Field(default_factory=list)
    applies: bool | None = None
    violated: bool | None = None
    active: bool | None = None

    @field_validator("paired_with", mode="before")
    @classmethod
    def _bare_int(cls, value: object) -> object:
        if value is None:
            return []
        if isinstance(value, int) and not isinstance(value, bool):
            return [value]
        return value


class Rubric(BaseModel):
    """The rubric split into violated and non-violated rules."""

    model_config = ConfigDict(extra="allow")

    violations: list[RubricEntry] = Field(default_factory=list)
    non_violations: list[RubricEntry] = Field(default_factory=list)

    def entries(self) -> list[RubricEntry]:
        """All entries sorted by rule number."""
        return sorted([*self.violations, *self.non_violations], key=lambda e: e.rule)

    def by_rule(self) -> dict[int, RubricEntry]:
        return {e.rule: e for e in self.entries()}


class FailureModeMetadata(BaseModel):
    """Rules that define the benchmark's failure modes (FM-D1, FM-C1, FM-C3)."""

    model_config = ConfigDict(extra="allow")

    distractor_rules: list[CaseRuleNumber] = Field(default_factory=list)
    waived_rules: list[CaseRuleNumber] = Field(default_factory=list)
    contradicted_rules: list[CaseRuleNumber] = Field(default_factory=list)
    decisive_rules: list[CaseRuleNumber] | None = None


class Case(BaseModel):
    """One benchmark case: a policy, a conversation and the violated rules."""

    model_config = ConfigDict(extra="allow")

    id: str
    domain: str
    level: Level
    conversation: str
    policy: str
    framework: str = ""
    ground_truth_violations: list[CaseRuleNumber]
    rubric: Rubric = Field(default_factory=Rubric)
    failure_mode_metadata: FailureModeMetadata = Field(default_factory=FailureModeMetadata)
    # Set by the PKU-SafeRLHF adapter only; SafePyramid cases leave them empty.
    benchmark: str = "safepyramid"
    safe: bool | None = None
    severity: int | None = None
    # Split group when it is not derivable from the id (PKU: both responses to a prompt).
    group: str | None = None
    # Labels a custom benchmark's cases carry (scored per tag); empty elsewhere.
    tags: list[str] = Field(default_factory=list)

    @cached_property
    def rule_types(self) -> dict[int, RuleType]:
        """Every rubric rule's type: violations, then non-violations (a rule listed twice keeps
        its last type), which is what the failure modes and error attribution read."""
        return {entry.rule: entry.type for entry in (*self.rubric.violations, *self.rubric.non_violations)}

    @property
    def conversation_id(self) -> str:
        """The id shared by the L0/L1/L2 versions of one conversation (the split group)."""
        return self.group or conversation_id(self.id)

    @property
    def unit(self) -> str:
        """The independent unit this case belongs to, which every bootstrap and paired test resamples
        whole: a SafePyramid conversation (its L0/L1/L2 cases share one dialogue, so their outcomes
        move together), a PKU-SafeRLHF prompt (both responses), a custom case's ``group``. It is the
        split group, so a unit is never cut by a split either (``BenchmarkKind.unit`` names it)."""
        return self.conversation_id


def conversation_id(case_id: str) -> str:
    """``priv-866-l2`` -> ``priv-866``; ids without a level suffix are their own group."""
    for suffix in ("-l0", "-l1", "-l2"):
        if case_id.lower().endswith(suffix):
            return case_id[: -len(suffix)]
    return case_id
