"""Complete a program's answer into its result record (a superset of the reference harness's lines,
which it reads): the case, the run, the provenance, and the answer's verdict in the case's policy.

Rule numbers outside the case's policy are dropped (``dropped_rules``), but the strict
official parser scores as the reference does: they stay, listed in ``out_of_policy_rules``.
A unit whose call failed outright gets an error record of the same model, without usage.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from .._lm import HttpRequest, classify_error, redact
from .._metrics import JudgmentRecord, PolicyRecord
from .._protocol import case_rule_numbers, keep_policy_rules
from .._usage import Usage

if TYPE_CHECKING:
    from .._data import Case
    from .._protocol import RuleTarget


def case_scores(case: Case, violated: list[int] | None) -> dict[str, Any] | None:
    """Per-case set comparison, stored beside the prediction for quick inspection."""
    if violated is None:
        return None
    gold, pred = set(case.ground_truth_violations), set(violated)
    return {
        "tp": sorted(pred & gold),
        "fp": sorted(pred - gold),
        "fn": sorted(gold - pred),
        "exact_match": pred == gold,
    }


def sent_requests(requests: Sequence[HttpRequest]) -> list[dict[str, Any]]:
    """A record's ``requests`` (``--log-requests``): each as ``--show-request`` prints it (keys
    masked), then redacted as every text the runner writes."""
    return [json.loads(redact(json.dumps(request.shown(), ensure_ascii=False))) for request in requests]


def _provenance(case: Case, model: str, run: dict[str, Any]) -> dict[str, Any]:
    """The case's level and domain, the model, the time and the run's fields."""
    return {
        "level": case.level,
        "domain": case.domain,
        "model_name": model,
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
        **run,
    }


def _answered(answer: PolicyRecord | JudgmentRecord, latency_s: float) -> dict[str, Any]:
    """What a record with an answer states even at its default: usage (tokens and USD), cache
    hits (and batch answers, when there are any), latency, and the failure (redacted) when the program reported one."""
    fields: dict[str, Any] = {
        "usage": answer.usage or Usage(),
        "cache_hits": answer.cache_hits,
        "batched": answer.batched,
        "latency_s": round(latency_s, 3),
    }
    if answer.error:
        fields.update(error=redact(answer.error), error_class=answer.error_class or "other")
    return fields


def policy_record(
    case: Case, index: int, answer: PolicyRecord, *, model: str, run: dict[str, Any], latency_s: float
) -> PolicyRecord:
    """The per-policy record of a case's answer (rule numbers outside the case's policy dropped, but in strict mode)."""
    kept = keep_policy_rules(answer.violated_rules, case_rule_numbers(case))
    strict = run.get("parser") == "strict"
    violated = answer.violated_rules if strict else kept.rules
    status = answer.parse_status if strict else (kept.status or answer.parse_status)
    label = None if violated is None else ("unsafe" if violated else "safe")
    if answer.predicted_safe is not None:
        label = "safe" if answer.predicted_safe else "unsafe"
    update: dict[str, Any] = {
        "index": index,
        "violated_rules": violated,
        "refused": answer.refused,
        "parse_failed": answer.parse_failed or status == "failed",
        "parse_status": status,
        "analysis": answer.analysis or "",
        "reasoning": answer.reasoning or "",
        "predicted_label": label,
        "scores": case_scores(case, violated),
        **_provenance(case, model, run),
        **_answered(answer, latency_s),
    }
    if kept.dropped:
        update["out_of_policy_rules" if strict else "dropped_rules"] = kept.dropped
    return answer.model_copy(update=update)


def judgment_record(
    case: Case, answer: JudgmentRecord, *, model: str, run: dict[str, Any], latency_s: float
) -> JudgmentRecord:
    """The record of one per-rule judgment; ``refused`` also covers unparseable verdicts, as the reference counts them."""
    update: dict[str, Any] = {
        "kind": "judgment",
        "cid": case.id,
        "refused": answer.refused or answer.parse_failed or answer.pred is None,
        "parse_failed": answer.parse_failed,
        "parse_status": answer.parse_status,
        "reason": answer.reason or "",
        **_provenance(case, model, run),
        **_answered(answer, latency_s),
    }
    return answer.model_copy(update=update)


def error_policy_record(
    case: Case, index: int, exc: BaseException, *, model: str, run: dict[str, Any]
) -> PolicyRecord:
    """An excluded record for a case whose call failed after every retry."""
    return PolicyRecord(
        id=case.id,
        index=index,
        violated_rules=None,
        refused=False,
        parse_failed=False,
        **_failure(case, exc, model=model, run=run),
    )


def error_judgment_record(
    case: Case, target: RuleTarget, exc: BaseException, *, model: str, run: dict[str, Any]
) -> JudgmentRecord:
    """An excluded judgment whose call failed after every retry."""
    return JudgmentRecord(
        kind="judgment",
        cid=case.id,
        rule=target.rule,
        rule_type=target.type,
        gt=target.gold,
        pred=None,
        refused=True,
        parse_failed=False,
        **_failure(case, exc, model=model, run=run),
    )


def _failure(case: Case, exc: BaseException, *, model: str, run: dict[str, Any]) -> dict[str, Any]:
    """What both kinds of error record state: the failure, its class, provenance."""
    return {
        "parse_status": "error",
        "error": redact(f"{type(exc).__name__}: {exc}".splitlines()[0])[:500],
        "error_class": classify_error(exc),
        **_provenance(case, model, run),
    }
