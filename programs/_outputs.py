"""What a guard program answers: result records, built here and completed by the runner.

A program answers one case with a ``PolicyRecord`` and one per-rule target with a
``JudgmentRecord`` (the models result files are read back into), filling in what the
model said and what it used; the runner adds the case, run and provenance fields.
"""

from __future__ import annotations

from typing import Any

from sp_dspy.lm import classify_error, redact
from sp_dspy.metrics import JudgmentRecord, PolicyRecord, Usage
from sp_dspy.protocol import Layout, Protocol, Status, TargetType

__all__ = [
    "JudgmentRecord",
    "Layout",
    "PolicyRecord",
    "Protocol",
    "Status",
    "TargetType",
    "Usage",
    "aggregate_judgments",
    "error_fields",
]


def aggregate_judgments(judgments: list[JudgmentRecord]) -> tuple[list[int] | None, Status]:
    """Fold per-rule verdicts back into a case's violated set (contract section 5).

    Only ``violated`` verdicts flag their rule. The case has no answer (``None``) only
    when it had no judgments or all were refused or errored; all-unparseable judgments
    still answer the empty set, as the reference harness scores it.
    """
    if not judgments or all(j.parse_status in ("refused", "error") for j in judgments):
        if judgments and all(j.parse_status == "refused" for j in judgments):
            return None, "refused"
        return None, "error" if judgments else "failed"
    violated = sorted({j.rule for j in judgments if j.pred is True})
    status: Status = "clean" if all(j.parse_status == "clean" for j in judgments) else "recovered"
    return violated, status


def error_fields(exc: BaseException) -> dict[str, Any]:
    """``error`` (``Type: first message line``, redacted) and ``error_class`` of a failure."""
    lines = str(exc).strip().splitlines()
    error = f"{type(exc).__name__}: {lines[0] if lines else ''}"[:500]
    return {"error": redact(error), "error_class": classify_error(exc)}
