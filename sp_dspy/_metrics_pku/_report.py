"""Result models of the PKU-SafeRLHF metrics, and the paper's reference figures.

Rates are percentages rounded to 2 decimals (as on SafePyramid), ``None`` when undefined.
"""

from __future__ import annotations

from typing import Any, Final, Literal, TypedDict

from pydantic import BaseModel, Field


class CategoryScore(BaseModel):
    """One harm category (= one policy rule) over the evaluated cases."""

    rule: int
    category: str
    support: int = Field(description="evaluated cases whose gold set has this rule")
    predicted: int = Field(description="evaluated cases whose predicted set has this rule")
    tp: int
    fp: int
    fn: int
    precision: float | None
    recall: float | None
    f1: float | None


class CategoryMetrics(BaseModel):
    """Set-valued harm-category prediction: exact match, micro/macro F1, per category."""

    total: int
    excluded: int = Field(description="cases with no (None or missing) predicted set")
    n_eval: int
    exact_match: float | None = Field(description="predicted set == gold set, over n_eval")
    strict_exact_match: float | None = Field(description="the same over total: excluded count as wrong")
    micro_precision: float | None
    micro_recall: float | None
    micro_f1: float | None
    macro_f1: float | None = Field(description="mean F1 of the categories present in gold or predictions")
    out_of_range: int = Field(description="predicted rule numbers outside 1-19, counted as false positives")
    per_category: list[CategoryScore]


class BinaryMetrics(BaseModel):
    """Safe vs unsafe; *unsafe* is the positive class."""

    total: int
    excluded: int = Field(description="cases with neither a predicted flag nor a predicted set")
    n_eval: int
    tp: int
    fp: int
    fn: int
    tn: int
    accuracy: float | None
    strict_accuracy: float | None = Field(description="correct / total: excluded count as wrong")
    precision: float | None
    recall: float | None
    f1: float | None
    false_positive_rate: float | None = Field(description="safe responses flagged unsafe / safe responses")


class SeverityMetrics(BaseModel):
    """Severity level 0-3 (0 = safe, 3 = severe)."""

    total: int
    excluded: int = Field(description="cases with no predicted severity")
    n_eval: int
    accuracy: float | None
    strict_accuracy: float | None = Field(description="correct / total: excluded count as wrong")
    macro_f1: float | None = Field(description="mean F1 of the levels present in gold or predictions")
    confusion: list[list[int]] = Field(description="4x4 counts, confusion[gold][predicted]")


class PkuReport(BaseModel):
    """All PKU-SafeRLHF metrics of one run; ``severity`` is None when no severity was predicted."""

    benchmark: Literal["pku-saferlhf"] = "pku-saferlhf"
    categories: CategoryMetrics
    binary: BinaryMetrics
    severity: SeverityMetrics | None = None

    def to_json_dict(self) -> dict[str, Any]:
        """A plain JSON-compatible dict (what result files store)."""
        return self.model_dump(mode="json")


class PkuPublished(TypedDict):
    """The paper's moderator results, in the report's units (percent)."""

    binary_accuracy: float
    category_exact_match: float
    severity_accuracy: float
    model: str
    citation: str


PKU_PUBLISHED: Final[PkuPublished] = {
    "binary_accuracy": 93.0,
    "category_exact_match": 71.3,
    "severity_accuracy": 85.0,
    "model": "PKU-SafeRLHF moderator (the paper's trained classifier)",
    "citation": (
        'Ji et al., "PKU-SafeRLHF: Towards Multi-Level Safety Alignment for LLMs with Human '
        'Preference", arXiv:2406.15513 (2024)'
    ),
}
"""Reference points, not a leaderboard: the paper scores a fine-tuned classifier on its
own evaluation data, while this toolkit scores an in-context guard reading a policy."""
