"""The one result shape every guard program produces for one case.

Official baselines and DSPy programs differ in how they talk to the model, but the
runner, the cache of results and the scorer should not care: they all read a
``CaseOutput``. Field names follow the reference harness's result records
(contract section 4) so a ``CaseOutput`` dumps straight into a results line.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from sp_dspy.metrics import Usage

Status = Literal["clean", "recovered", "failed", "refused", "error"]
"""How an answer was obtained.

``clean``: parsed as the protocol asks; ``recovered``: usable only after a lenient
repair (robust parsing, or a per-rule case with some failed judgments); ``failed``:
no usable answer could be parsed; ``refused``: the model declined; ``error``: the call
itself failed (network, server, context window).
"""

Protocol = Literal["per-policy", "per-rule"]
Layout = Literal["official", "prefix"]
TargetType = Literal["decisive", "distractor", "exception"]


def add_costs(costs: Iterable[float | None]) -> float | None:
    """Sum costs; ``None`` (unknown) only when no part reported a cost at all."""
    known = [cost for cost in costs if cost is not None]
    return sum(known) if known else None


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
    cost: float | None = None
    cache_hits: int = 0
    error: str | None = None
    error_class: str | None = None
    answer: str | None = None  # the model's text when it did not parse cleanly (see CaseOutput)


class CaseOutput(BaseModel):
    """What a guard program answered for one case, ready to score and to store.

    ``violated_rules`` is ``None`` when the case must be excluded from scoring
    (refused, failed, errored, or a per-rule case with no usable judgment).
    ``usage`` and ``cost`` (USD, ``None`` when the model is not priced) describe the
    answers as they were produced, the same on every path whether a call reached the
    model or was replayed from the response cache, so runs and variants compare like
    with like; ``cache_hits`` counts the calls replayed (they cost nothing this time). ``predicted_safe`` and ``predicted_severity`` (0-3) are set
    only by programs that state them explicitly (PKU-SafeRLHF's severity program, or
    an official answer carrying ``"label": "safe"|"unsafe"``); otherwise the verdict
    is read from ``violated_rules`` (empty = safe).
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
    cost: float | None = None
    cache_hits: int = 0
    judgments: list[JudgmentOutput] | None = None
    protocol: Protocol
    layout: Layout | None = None
    error: str | None = None
    error_class: str | None = None
    predicted_safe: bool | None = None
    predicted_severity: int | None = None
    answer: str | None = None
    """The model's raw text when it was not read cleanly (failed, refused, recovered),
    so a reader (``sp-dspy show``) sees what went wrong; a clean answer is fully in the
    parsed fields."""


def aggregate_judgments(judgments: list[JudgmentOutput]) -> tuple[list[int] | None, Status]:
    """Fold per-rule verdicts back into a case's violated set (contract section 5).

    A ``violated`` verdict adds its rule; refused, unparseable and errored judgments
    count as not flagged. The case has no answer (``None``) only when it had no
    judgments or every judgment was refused or errored; a case whose judgments all
    failed to parse still answers the empty set, as the reference harness scores it.
    """
    if not judgments or all(j.status in ("refused", "error") for j in judgments):
        if judgments and all(j.status == "refused" for j in judgments):
            return None, "refused"
        return None, "error" if judgments else "failed"
    violated = sorted({j.rule for j in judgments if j.pred is True})
    status: Status = "clean" if all(j.status == "clean" for j in judgments) else "recovered"
    return violated, status


def error_fields(exc: BaseException) -> dict[str, Any]:
    """``error`` (one redacted line) and ``error_class`` (rate_limit, timeout, ...) of a failure."""
    from sp_dspy.lm import classify_error, redact

    return {"error": redact(one_line_error(exc)), "error_class": classify_error(exc)}


def one_line_error(exc: BaseException) -> str:
    """``Type: first line of the message``, short enough for a results line."""
    lines = str(exc).strip().splitlines()
    message = lines[0] if lines else ""
    return f"{type(exc).__name__}: {message}"[:500]
