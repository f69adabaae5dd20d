"""Result records (contract section 4), per-rule judgments, and what reading files gives.

Two kinds of line share one file format: a per-policy *record* (one case, its predicted
rule set; the reference harness's lines, our runner's, or the minimal
``{"id": ..., "violated_rules": [...]}``) and a per-rule *judgment* (one case x one rule,
``"kind": "judgment"``). Merging follows retry semantics: a later file or line replaces
an earlier record with the same id, and a judgment the earlier one for the same (case,
rule); the reference double-counts merged judgments, so only this makes re-runs safe.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_serializer,
    field_validator,
    model_serializer,
    model_validator,
)

from .._data import RuleNumber
from .._protocol import Protocol, Status
from .._usage import Usage

#: Completions at or over this many tokens hit a provider's output cap (cap-aware mode).
CAP_THRESHOLD = 65_000

#: The most characters a record keeps of each text of the model's answer (:data:`ANSWER_FIELDS`):
#: a longer one keeps this prefix, and ``clipped`` its full length and SHA-256, so neither memory
#: nor result files grow with what a model returns (a 10 MB reason stays 64 KiB).
MAX_ANSWER_CHARS = 64 * 1024
#: The fields that hold the model's own text, however long it made it.
ANSWER_FIELDS = ("answer", "reason", "analysis", "reasoning")

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


def _verdict(value: object) -> object:
    """A judgment's ``gt`` and ``pred`` are a verdict: ``true``, ``false`` or ``null`` (none), never
    ``"yes"``, ``1`` or ``"violated"``, which pydantic's lax mode would read as a verdict."""
    if value is None or isinstance(value, bool):
        return value
    raise ValueError(f"expected true (violated), false (not violated) or null, got {value!r:.40}")


VerdictFlag = Annotated[bool | None, BeforeValidator(_verdict)]


def _usd(value: object) -> float | None:
    """A line's ``cost`` as USD; anything but a finite number (another harness's text) is unknown."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


class ClippedText(BaseModel):
    """What a record keeps of a text it stores only a prefix of: the whole text's length and hash."""

    chars: int = Field(description="Characters of the whole text.")
    sha256: str = Field(description="SHA-256 of the whole text in UTF-8.")

    @classmethod
    def of(cls, text: str) -> ClippedText:
        whole = text.encode("utf-8", "surrogatepass")  # a JSON string may hold a lone surrogate
        return cls(chars=len(text), sha256=hashlib.sha256(whole).hexdigest())


def _is_none(value: object) -> bool:
    return value is None


def _optional(description: str) -> Any:
    """A field a line carries only when it has a value (``null`` is never written)."""
    return Field(default=None, exclude_if=_is_none, description=description)


class _Line(BaseModel):
    """What both kinds of result line carry besides their verdict: how the answer read,
    where it came from, what it used and why it failed.

    One model per kind is the shape a program builds, the runner writes and every reader
    reads back. A line holds the fields its builder set (``model_dump(exclude_unset=True)``
    writes them), so an answered line states its usage and a failed call's line does not;
    unknown keys (another harness's) are kept. Lines start with their kind's own fields.
    """

    model_config = ConfigDict(extra="allow")

    _own: ClassVar[tuple[str, ...]] = ()  # this kind's fields, written first

    level: str | None = None
    domain: str | None = None
    refused: bool = False
    parse_failed: bool = False
    parse_status: Status | None = None
    model_name: str | None = None
    timestamp: str | None = None
    usage: Usage | None = Field(
        default=None, description="Tokens and USD of the answers; replayed ones count as produced."
    )
    cache_hits: int = Field(default=0, description="Answers replayed from the response cache.")
    batched: int = Field(
        default=0,
        exclude_if=lambda count: not count,
        description="Answers from the run's provider batches (--batch), at the batch rate; not cache hits.",
    )
    latency_s: float | None = None
    run_id: str | None = None
    program: str | None = None
    protocol: Protocol | None = None
    parser: str | None = None
    layout: str | None = _optional("The per-rule message layout (official or prefix).")
    official_protocol: bool | None = _optional("Whether the per-rule layout is the official one.")
    answer: str | None = _optional("The model's text when it did not parse cleanly.")
    error: str | None = _optional("``Type: first message line`` of a failed call, redacted.")
    error_class: str | None = _optional("The failure's class (auth, not_found, unreachable, ...).")
    requests: list[dict[str, Any]] | None = _optional(
        "The requests sent for this answer as --show-request prints them, redacted (--log-requests)."
    )
    clipped: dict[str, ClippedText] | None = _optional(
        "The answer texts stored as their first MAX_ANSWER_CHARS characters, by field: whole length and hash."
    )

    null_flags_are_false = field_validator("refused", "parse_failed", mode="before")(_flag)
    error_as_text = field_validator("error", mode="before")(_error_text)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls._own = tuple(name for name in cls.model_fields if name not in _Line.model_fields)

    @model_validator(mode="after")
    def _cost_into_usage(self) -> Self:
        """A line states its answers' USD beside the token counts (``cost``); a record keeps it in ``usage``."""
        extra = self.__pydantic_extra__
        if extra and "cost" in extra:
            cost = _usd(extra.pop("cost"))
            if self.usage is None:
                self.usage = Usage(cost=cost)
            elif cost is not None:
                self.usage.cost = cost
        return self

    @model_validator(mode="after")
    def _clip_answer_texts(self) -> Self:
        """Keep at most ``MAX_ANSWER_CHARS`` of each answer text (built or read back), saying what was cut."""
        for name in ANSWER_FIELDS:
            text = getattr(self, name, None)
            if isinstance(text, str) and len(text) > MAX_ANSWER_CHARS:
                self.clipped = {**(self.clipped or {}), name: ClippedText.of(text)}
                setattr(self, name, text[:MAX_ANSWER_CHARS])
        return self

    @field_serializer("usage")
    def _reported_counts(self, usage: Usage | None) -> dict[str, Any] | None:
        return None if usage is None else usage.tokens()

    @model_serializer(mode="wrap")
    def _as_line(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """This kind's own fields first; the usage's USD right after its token counts, as ``cost``."""
        data: dict[str, Any] = handler(self)
        line = {name: data.pop(name) for name in self._own if name in data}
        for name, value in data.items():
            line[name] = value
            if name == "usage":
                line["cost"] = None if self.usage is None else self.usage.cost
        return line

    def line(self) -> dict[str, Any]:
        """The result line: the fields set, in the line's order."""
        return self.model_dump(exclude_unset=True)


class JudgmentRecord(_Line):
    """One per-rule verdict (contract section 5); ``pred=None`` means no verdict."""

    kind: Literal["judgment"] = "judgment"
    cid: str
    rule: RuleNumber
    rule_type: str | None = None
    gt: VerdictFlag = None
    pred: VerdictFlag = None
    reason: str | None = None
    yes_probability: float | None = _optional(
        "P(Yes) of the verdict's first token, when the server returned logprobs (ShieldGemma)."
    )

    @property
    def has_verdict(self) -> bool:
        """A usable verdict: not refused, parsed, no error, and a boolean prediction (the
        reference folds unparseable outputs into "refused", for exclusion and refusal rate)."""
        return not (self.refused or self.parse_failed or self.error) and self.pred is not None


class PolicyRecord(_Line):
    """One case's prediction: the reference harness's result line, the minimal form, or ours.

    ``violated_rules`` is ``None`` when there is no usable answer; a per-rule program's
    answer for a whole case carries its ``judgments`` (result files store them as lines).
    """

    id: str
    index: int | None = None
    violated_rules: list[RuleNumber] | None = None
    analysis: str | None = None
    reasoning: str | None = None
    predicted_label: str | None = None
    scores: dict[str, Any] | None = None
    dropped_rules: list[int] | None = _optional("Rule numbers outside the policy, left out of the set.")
    out_of_policy_rules: list[int] | None = _optional("Rule numbers outside the policy, kept (strict).")
    predicted_safe: bool | None = _optional("The model's explicit safe/unsafe flag.")
    predicted_severity: int | None = _optional("The model's severity (PKU-SafeRLHF programs).")
    judgments: list[JudgmentRecord] | None = Field(default=None, exclude=True)

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
        return self.exclusion(cap_aware=cap_aware) is not None

    def exclusion(self, *, cap_aware: bool = False) -> str | None:
        """Why the record is excluded (``refused``, ``error: CLASS``, ``unparseable``, ``no
        prediction``, ``output cap``), or None when it is scored: the one test ``excluded`` asks."""
        if self.refused:
            return "refused"
        if self.error:
            return f"error: {self.error_class}" if self.error_class else "error"
        if self.parse_failed:
            return "unparseable"
        if self.violated_rules is None:
            return "no prediction"
        nested = (self.model_extra or {}).get("structured_scores")  # the harness's nested scores
        if isinstance(nested, dict) and (nested.get("refused") or nested.get("parse_failed")):
            return "refused" if nested.get("refused") else "unparseable"
        completion_tokens = 0 if self.usage is None else self.usage.completion_tokens
        return "output cap" if cap_aware and completion_tokens >= CAP_THRESHOLD else None


@dataclass
class ResultSet:
    """Everything read from result files: the latest record per case id and the latest
    judgment per (case, rule), in file order; ``lines``: every record and judgment read,
    replaced ones too (what a run used in all); the first ``bad_line_messages`` are kept."""

    records: dict[str, PolicyRecord] = field(default_factory=dict)
    judgments: list[JudgmentRecord] = field(default_factory=list)
    lines: list[PolicyRecord | JudgmentRecord] = field(default_factory=list)
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
