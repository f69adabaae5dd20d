"""The one result shape every guard program produces for one case: ``CaseOutput``.

Field names follow the reference harness's result records (contract section 4), so a
``CaseOutput`` dumps straight into a results line.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from sp_dspy.metrics import Usage
from sp_dspy.protocol import Layout, Protocol, Status, TargetType


class JudgmentOutput(BaseModel):
    """One per-rule judgment: the verdict on one target rule of a case."""

    model_config = ConfigDict(extra="forbid")

    rule: int
    rule_type: TargetType
    gt: bool | None = None
    pred: bool | None
    refused: bool = False
    parse_failed: bool = False
    status: Status
    reason: str = ""
    usage: Usage = Field(default_factory=Usage)
    cache_hits: int = 0
    error: str | None = None
    error_class: str | None = None
    answer: str | None = None  # the model's text when it did not parse cleanly (see CaseOutput)


class CaseOutput(BaseModel):
    """What a guard program answered for one case, ready to score and to store.

    ``violated_rules`` is ``None`` when the case is excluded. ``usage`` (tokens and cost) describes
    the answers as produced, also when replayed from the cache (counted in ``cache_hits``), so runs
    compare like with like. ``predicted_safe``/``predicted_severity``: only when stated.
    """

    model_config = ConfigDict(extra="forbid")

    id: str
    violated_rules: list[int] | None
    status: Status
    refused: bool = False
    parse_failed: bool = False
    analysis: str = ""
    reasoning: str = ""
    usage: Usage = Field(default_factory=Usage)
    cache_hits: int = 0
    judgments: list[JudgmentOutput] | None = None
    protocol: Protocol
    layout: Layout | None = None
    error: str | None = None
    error_class: str | None = None
    predicted_safe: bool | None = None
    predicted_severity: int | None = None
    answer: str | None = None  # the model's raw text when not read cleanly, for ``sp-dspy show``


def aggregate_judgments(judgments: list[JudgmentOutput]) -> tuple[list[int] | None, Status]:
    """Fold per-rule verdicts back into a case's violated set (contract section 5).

    Only ``violated`` verdicts flag their rule. The case has no answer (``None``) only
    when it had no judgments or all were refused or errored; all-unparseable judgments
    still answer the empty set, as the reference harness scores it.
    """
    if not judgments or all(j.status in ("refused", "error") for j in judgments):
        if judgments and all(j.status == "refused" for j in judgments):
            return None, "refused"
        return None, "error" if judgments else "failed"
    violated = sorted({j.rule for j in judgments if j.pred is True})
    status: Status = "clean" if all(j.status == "clean" for j in judgments) else "recovered"
    return violated, status


def error_fields(exc: BaseException) -> dict[str, Any]:
    """``error`` (``Type: first message line``, redacted) and ``error_class`` of a failure."""
    from sp_dspy.lm import classify_error, redact

    lines = str(exc).strip().splitlines()
    error = f"{type(exc).__name__}: {lines[0] if lines else ''}"[:500]
    return {"error": redact(error), "error_class": classify_error(exc)}
