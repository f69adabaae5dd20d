"""Guard models in their own formats: one program per model, each request as its authors document it.

A :class:`GuardFormat` says how one guard model is asked (messages, chat-template settings, call
settings) and how its answer reads (:class:`NativeAnswer`); :class:`NativePerPolicy` and
:class:`NativePerRule` run a format on the runner's units, as the official baselines run theirs.
An answer not in the documented form is a parse failure: an excluded answer, never a guess.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from sp_dspy.errors import ConfigError
from sp_dspy.lm import ChatResult, achat, chat
from sp_dspy.protocol import RuleTarget

from ._official import RuleByRule, _error_judgment, _error_output, lm_errors
from ._outputs import JudgmentRecord, PolicyRecord, Protocol, Status, Usage, aggregate_judgments

if TYPE_CHECKING:
    import dspy

    from sp_dspy.data import Case

_RULE_LINE = re.compile(r"^\s*(\d{1,9})\.\s+(\S.*?)\s*$")


@dataclass(frozen=True)
class NativeRequest:
    """What one call sends: chat messages, body fields sent as they are (``chat_template_kwargs``),
    and call settings (``logprobs``...)."""

    messages: list[dict[str, str]]
    body: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class NativeAnswer:
    """What an answer says: ``flagged`` (the format's own verdict: unsafe, FAIL, Yes; None: the
    answer is not in the documented form), the rules it names (None: it names none), why."""

    flagged: bool | None
    rules: list[int] | None = None
    reason: str = ""
    yes_probability: float | None = None


class GuardFormat(ABC):
    """One guard model's request and answer format (``name`` is its ``--program`` name)."""

    name: ClassVar[str]
    protocols: ClassVar[tuple[Protocol, ...]] = ("per-policy", "per-rule")

    @abstractmethod
    def request(self, case: Case, rules: dict[int, str], lm: Any = None) -> NativeRequest:
        """The call judging ``case`` against ``rules`` (all the policy's, or the one per-rule target)."""

    @abstractmethod
    def read(self, result: ChatResult, rules: list[int]) -> NativeAnswer:
        """The answer to a call about ``rules``."""


def case_rules(case: Case) -> dict[int, str]:
    """``{rule number: text}`` of a case's policy: its rubric's, else the policy's ``N. text`` lines."""
    entries = case.rubric.entries()
    if entries:
        return {entry.rule: entry.text for entry in entries}
    found = (_RULE_LINE.match(line) for line in case.policy.splitlines())
    return {int(m.group(1)): m.group(2) for m in found if m}


def check_protocol(fmt: GuardFormat, protocol: str) -> None:
    """One line naming the protocol ``fmt`` supports when it cannot express ``protocol``."""
    if protocol not in fmt.protocols:
        supported = " or ".join(fmt.protocols)
        raise ConfigError(
            f"program {fmt.name!r}: its format cannot express {protocol}; use --protocol {supported}"
        )


class NativePerPolicy:
    """A guard model asked once per case about the whole policy, in its own format."""

    protocol: ClassVar[Protocol] = "per-policy"

    def __init__(self, fmt: GuardFormat) -> None:
        check_protocol(fmt, self.protocol)
        self.format = fmt

    @property
    def name(self) -> str:
        return self.format.name

    def request_for(self, case: Case, lm: Any = None) -> NativeRequest:
        return self.format.request(case, case_rules(case), lm)

    async def acall_case(self, case: Case, lm: dspy.LM) -> PolicyRecord:
        sent = self.request_for(case, lm)
        try:
            result = await achat(lm, sent.messages, body=sent.body, **sent.settings)
        except lm_errors() as exc:
            return _error_output(case, exc)
        return self._output(case, result)

    def call_case(self, case: Case, lm: dspy.LM) -> PolicyRecord:
        sent = self.request_for(case, lm)
        try:
            result = chat(lm, sent.messages, body=sent.body, **sent.settings)
        except lm_errors() as exc:
            return _error_output(case, exc)
        return self._output(case, result)

    def _output(self, case: Case, result: ChatResult) -> PolicyRecord:
        rules = sorted(case_rules(case))
        answer = self.format.read(result, rules)
        violated: list[int] | None
        if answer.flagged is None:
            violated = None
        elif not answer.flagged:
            violated = [] if not answer.rules else None  # "safe" naming rules contradicts itself
        elif answer.rules:
            violated = sorted(set(answer.rules))
        else:
            violated = rules if len(rules) == 1 else None  # flagged, no rule named: no rule set
        status: Status = "clean" if violated is not None else "failed"
        return PolicyRecord(
            id=case.id,
            violated_rules=violated,
            parse_status=status,
            parse_failed=violated is None,
            analysis=answer.reason,
            reasoning=result.reasoning or "",
            usage=result.usage or Usage(),
            cache_hits=int(result.cached),
            batched=int(result.batched),
            protocol=self.protocol,
            predicted_safe=None if answer.flagged is None else not answer.flagged,
            answer=None if status == "clean" else result.text,
        )


class NativePerRule(RuleByRule):
    """A guard model asked once per target rule, in its own format; verdicts folded into a set."""

    protocol: ClassVar[Protocol] = "per-rule"

    def __init__(self, fmt: GuardFormat, max_concurrency: int = 8) -> None:
        check_protocol(fmt, self.protocol)
        self.format = fmt
        self.max_concurrency = max(1, max_concurrency)

    @property
    def name(self) -> str:
        return self.format.name

    def request_for(self, case: Case, target: RuleTarget, lm: Any = None) -> NativeRequest:
        return self.format.request(case, {target.rule: target.text}, lm)

    async def ajudge(self, case: Case, target: RuleTarget, lm: dspy.LM) -> JudgmentRecord:
        """One judgment (the runner's unit of work, so per-rule runs resume per judgment)."""
        sent = self.request_for(case, target, lm)
        try:
            result = await achat(lm, sent.messages, body=sent.body, **sent.settings)
        except lm_errors() as exc:
            return _error_judgment(case, target, exc)
        return self._judgment(case, target, result)

    def _judge(self, case: Case, target: RuleTarget, lm: dspy.LM) -> JudgmentRecord:
        sent = self.request_for(case, target, lm)
        try:
            result = chat(lm, sent.messages, body=sent.body, **sent.settings)
        except lm_errors() as exc:
            return _error_judgment(case, target, exc)
        return self._judgment(case, target, result)

    def _judgment(self, case: Case, target: RuleTarget, result: ChatResult) -> JudgmentRecord:
        answer = self.format.read(result, [target.rule])
        named_other = answer.flagged and answer.rules and set(answer.rules) != {target.rule}
        pred = None if answer.flagged is None or named_other else answer.flagged
        status: Status = "clean" if pred is not None else "failed"
        return JudgmentRecord(
            cid=case.id,
            rule=target.rule,
            rule_type=target.type,
            gt=target.gold,
            pred=pred,
            parse_failed=pred is None,
            parse_status=status,
            reason=answer.reason,
            yes_probability=answer.yes_probability,
            usage=result.usage or Usage(),
            cache_hits=int(result.cached),
            batched=int(result.batched),
            answer=None if status == "clean" else result.text,
        )

    def _output(self, case: Case, judgments: list[JudgmentRecord]) -> PolicyRecord:
        violated, status = aggregate_judgments(judgments)
        return PolicyRecord(
            id=case.id,
            violated_rules=violated,
            parse_status=status,
            usage=Usage.total(j.usage for j in judgments if j.usage is not None),
            cache_hits=sum(j.cache_hits for j in judgments),
            batched=sum(j.batched for j in judgments),
            judgments=judgments,
            protocol=self.protocol,
        )
