"""The official fixed-prompt baselines: the contract's messages, byte for byte.

Not DSPy programs on purpose: an adapter would wrap the policy in its own format, and the
leaderboard was produced without one. ``mode="strict"`` is the reference parser.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, ClassVar

from sp_dspy.errors import ConfigError
from sp_dspy.lm import ChatResult, achat, chat
from sp_dspy.protocol import (
    PARSE_MODES,
    ParseMode,
    RuleTarget,
    build_targets,
    parse_policy_output,
    parse_verdict_output,
    per_policy_messages,
    per_rule_messages,
    policy_response_format,
    verdict_response_format,
)

from ._outputs import (
    JudgmentRecord,
    Layout,
    PolicyRecord,
    Protocol,
    Usage,
    aggregate_judgments,
    error_fields,
)

if TYPE_CHECKING:
    import dspy

    from sp_dspy.data import Case


def lm_errors() -> tuple[type[BaseException], ...]:
    """What a failed LM call raises: DSPy's LM errors, and transport errors below them.

    Anything else is a bug and propagates instead of becoming an ``error`` record.
    """
    import dspy

    return (dspy.LMError, OSError)


def _check_mode(mode: str) -> ParseMode:
    if mode not in PARSE_MODES:
        raise ConfigError(f"parse mode {mode!r}: expected 'strict' or 'robust'")
    return mode


class OfficialPerPolicy:
    """The per-policy baseline: two fixed messages, one call, the official parser."""

    protocol: ClassVar[Protocol] = "per-policy"

    def __init__(self, mode: ParseMode = "strict", constrained: bool = False) -> None:
        self.mode = _check_mode(mode)
        # Constrained decoding adds a response_format; the messages stay the official bytes.
        self.extra: dict[str, Any] = {"response_format": policy_response_format()} if constrained else {}

    async def acall_case(self, case: Case, lm: dspy.LM) -> PolicyRecord:
        try:
            result = await achat(lm, per_policy_messages(case), **self.extra)
        except lm_errors() as exc:
            return _error_output(case, exc)
        return self._output(case, result)

    def call_case(self, case: Case, lm: dspy.LM) -> PolicyRecord:
        try:
            result = chat(lm, per_policy_messages(case), **self.extra)
        except lm_errors() as exc:
            return _error_output(case, exc)
        return self._output(case, result)

    def _output(self, case: Case, result: ChatResult) -> PolicyRecord:
        parsed = parse_policy_output(result.text, mode=self.mode)
        return PolicyRecord(
            id=case.id,
            violated_rules=parsed.violated_rules,
            parse_status=parsed.status,
            refused=parsed.refused,
            parse_failed=parsed.parse_failed,
            analysis=parsed.analysis or "",
            reasoning=result.reasoning or parsed.reasoning or "",
            usage=result.usage or Usage(),
            cache_hits=int(result.cached),
            batched=int(result.batched),
            protocol=self.protocol,
            # The official JSON may carry the model's own "label"; it is its explicit safe flag.
            predicted_safe=None if parsed.predicted_label is None else parsed.predicted_label == "safe",
            answer=None if parsed.status == "clean" else result.text,
        )


class RuleByRule(ABC):
    """A per-rule program's whole case: each rule of the case judged on its own, at most
    ``max_concurrency`` at once, then the judgments folded into one record. The programs say how
    one rule is judged (``ajudge``/``_judge``) and how the judgments become the case's record."""

    max_concurrency: int

    @abstractmethod
    async def ajudge(self, case: Case, target: RuleTarget, lm: dspy.LM) -> JudgmentRecord:
        """One judgment (the runner's unit of work, so per-rule runs resume per judgment)."""

    @abstractmethod
    def _judge(self, case: Case, target: RuleTarget, lm: dspy.LM) -> JudgmentRecord:
        """One judgment, synchronously."""

    @abstractmethod
    def _output(self, case: Case, judgments: list[JudgmentRecord]) -> PolicyRecord:
        """The case's record from its judgments."""

    async def acall_case(self, case: Case, lm: dspy.LM) -> PolicyRecord:
        gate = asyncio.Semaphore(self.max_concurrency)

        async def judge(target: RuleTarget) -> JudgmentRecord:
            async with gate:
                return await self.ajudge(case, target, lm)

        judgments = await asyncio.gather(*(judge(t) for t in build_targets(case)))
        return self._output(case, list(judgments))

    def call_case(self, case: Case, lm: dspy.LM) -> PolicyRecord:
        targets = build_targets(case)
        with ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(targets)) or 1) as pool:
            judgments = list(pool.map(lambda target: self._judge(case, target, lm), targets))
        return self._output(case, judgments)


class OfficialPerRule(RuleByRule):
    """The per-rule baseline: one fixed-prompt call per target, verdicts folded into a set."""

    protocol: ClassVar[Protocol] = "per-rule"

    def __init__(
        self,
        mode: ParseMode = "strict",
        layout: Layout = "official",
        max_concurrency: int = 8,
        constrained: bool = False,
    ) -> None:
        if layout not in ("official", "prefix"):
            raise ConfigError(f"per-rule layout {layout!r}: expected 'official' or 'prefix'")
        self.mode = _check_mode(mode)
        self.layout: Layout = layout
        self.max_concurrency = max(1, max_concurrency)
        self.extra: dict[str, Any] = {"response_format": verdict_response_format()} if constrained else {}

    async def ajudge(self, case: Case, target: RuleTarget, lm: dspy.LM) -> JudgmentRecord:
        """One judgment (the runner's unit of work, so per-rule runs resume per judgment)."""
        try:
            result = await achat(lm, per_rule_messages(case, target, layout=self.layout), **self.extra)
        except lm_errors() as exc:
            return _error_judgment(case, target, exc)
        return self._judgment(case, target, result)

    def _judge(self, case: Case, target: RuleTarget, lm: dspy.LM) -> JudgmentRecord:
        try:
            result = chat(lm, per_rule_messages(case, target, layout=self.layout), **self.extra)
        except lm_errors() as exc:
            return _error_judgment(case, target, exc)
        return self._judgment(case, target, result)

    def _judgment(self, case: Case, target: RuleTarget, result: ChatResult) -> JudgmentRecord:
        parsed = parse_verdict_output(result.text, mode=self.mode)
        return JudgmentRecord(
            cid=case.id,
            rule=target.rule,
            rule_type=target.type,
            gt=target.gold,
            pred=None if parsed.verdict is None else parsed.verdict == "violated",
            refused=parsed.refused,
            parse_failed=parsed.parse_failed,
            parse_status=parsed.status,
            reason=parsed.reason or "",
            usage=result.usage or Usage(),
            cache_hits=int(result.cached),
            batched=int(result.batched),
            answer=None if parsed.status == "clean" else result.text,
        )

    def _output(self, case: Case, judgments: list[JudgmentRecord]) -> PolicyRecord:
        violated, status = aggregate_judgments(judgments)
        return PolicyRecord(
            id=case.id,
            violated_rules=violated,
            parse_status=status,
            refused=status == "refused",
            usage=Usage.total(j.usage for j in judgments if j.usage is not None),
            cache_hits=sum(j.cache_hits for j in judgments),
            batched=sum(j.batched for j in judgments),
            judgments=judgments,
            protocol=self.protocol,
            layout=self.layout,
        )


def _error_judgment(case: Case, target: RuleTarget, exc: BaseException) -> JudgmentRecord:
    return JudgmentRecord(
        cid=case.id,
        rule=target.rule,
        rule_type=target.type,
        gt=target.gold,
        pred=None,
        parse_status="error",
        **error_fields(exc),
    )


def _error_output(case: Case, exc: BaseException) -> PolicyRecord:
    return PolicyRecord(
        id=case.id, violated_rules=None, parse_status="error", protocol="per-policy", **error_fields(exc)
    )
