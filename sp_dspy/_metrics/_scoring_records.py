"""Result lines as the scorer reads them, decoded by msgspec: ``ScoringRecord`` and judgment rows.

A result line of the reference harness carries the model's whole analysis (twice:
``analysis`` and the raw ``final`` output), about 2.5 kB; the scorer reads its id,
its rule set, three failure flags, the harness's nested scores and one token count.
Building a ``PolicyRecord`` decodes every string of the line into Python objects:
reading the 3,000 lines of a full run took 0.05-0.075 s, the largest step of
``sp-dspy score`` after its imports. ``scoring_record`` decodes the line with msgspec
against a struct that declares every field ``PolicyRecord`` declares, with its type,
and skips the rest in C without building it; the analysis is only checked to be a
string or null. The file then reads in 0.03 s.

As with the dataset's slim views (``sp_dspy._data._scoring_slim``), it answers only
when ``PolicyRecord`` would accept the line with the same values: msgspec's types
are at least as strict as pydantic's lax mode (no ``"3"`` or ``3.0`` for an int, no
``1`` for a bool, no ``NaN``). On any doubt (an error object, rule objects instead
of numbers, another ``kind``, a type pydantic would coerce or reject) it returns
None and the reader builds the ``PolicyRecord`` as before, so every value, skip and
error message stays the full reader's. Judgment lines get the same treatment
(``scoring_judgment_row``): the fields ``JudgmentRecord`` declares, typed as
``judgment_row`` requires, as the row the judgment pass reads, extras skipped.
``tests/test_scoring_records.py`` checks both agree with the full reader line by line.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

import msgspec
from msgspec import UNSET, Raw, Struct, UnsetType

from .._data._scan import raw_opens_with
from ._records import POLICY_KINDS, PolicyRecord, excluded_by


class ScoringRecord(Struct, frozen=True, kw_only=True):
    """What the scorer reads of a per-policy record (see ``PolicyRecord`` for the meaning)."""

    id: str
    violated_rules: list[int] | None = None
    refused: bool = False
    parse_failed: bool = False
    error: str | None = None
    structured_scores: Any = None
    completion_tokens: int = 0

    def excluded(self, *, cap_aware: bool = False) -> bool:
        """``PolicyRecord.excluded`` of the line this record came from."""
        return excluded_by(
            refused=self.refused,
            parse_failed=self.parse_failed,
            error=self.error,
            violated_rules=self.violated_rules,
            structured_scores=self.structured_scores,
            completion_tokens=self.completion_tokens,
            cap_aware=cap_aware,
        )


#: Anything the scorer accepts as a per-policy record.
AnyRecord: TypeAlias = PolicyRecord | ScoringRecord


class _Usage(Struct):
    """``Usage``'s declared fields and types (``null`` counts are 0 there); extras skipped."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    reasoning_tokens: int | None = None


class _Line(Struct):
    """Every field ``PolicyRecord`` declares, with its type, plus the two extras read."""

    id: str
    index: int | None = None
    violated_rules: list[int] | None = None
    refused: bool | None = None
    parse_failed: bool | None = None
    error: str | None = None
    error_class: str | None = None
    analysis: Raw | UnsetType = UNSET
    predicted_label: str | None = None
    model_name: str | None = None
    timestamp: str | None = None
    usage: _Usage | None = None
    parse_status: str | None = None
    structured_scores: Any = None
    kind: Any = None


_DECODER = msgspec.json.Decoder(_Line)


def scoring_record(line: str) -> ScoringRecord | None:
    """``line`` as a ``ScoringRecord``, or None when ``PolicyRecord`` must decide."""
    try:
        item = _DECODER.decode(line)
    except msgspec.DecodeError:  # invalid JSON, not an object, or a field of another type
        return None
    if item.kind not in POLICY_KINDS:
        return None
    if item.analysis is not UNSET and not raw_opens_with(item.analysis, b'"n'):
        return None  # a string or null
    usage = item.usage
    return ScoringRecord(
        id=item.id,
        violated_rules=item.violated_rules,
        refused=bool(item.refused),
        parse_failed=bool(item.parse_failed),
        error=item.error,
        structured_scores=item.structured_scores,
        completion_tokens=(usage.completion_tokens or 0) if usage is not None else 0,
    )


class _JudgmentLine(Struct):
    """Every field ``JudgmentRecord`` declares, with the type ``judgment_row`` requires of it."""

    kind: Literal["judgment"]
    cid: str
    rule: int
    level: str | None = None
    rule_type: str | None = None
    gt: bool | None = None
    pred: bool | None = None
    refused: bool | None = None
    parse_failed: bool | None = None
    error: str | None = None
    error_class: str | None = None
    usage: _Usage | None = None


_JUDGMENT_DECODER = msgspec.json.Decoder(_JudgmentLine)
_asdict = msgspec.structs.asdict


def scoring_judgment_row(line: str) -> dict[str, Any] | None:
    """``judgment_row(line)`` without the line's extra fields, decoded by msgspec; None when in doubt.

    It accepts only what ``judgment_row`` accepts (a judgment whose declared fields
    have exactly their types) and gives the same values for every declared field;
    absent ones are None, and the usage holds only its token counts. A per-rule file's
    68k lines, whose extras (the raw label, its source) the scorer never reads, then
    read in 0.17 s instead of 0.26 s.
    """
    try:
        item = _JUDGMENT_DECODER.decode(line)
    except msgspec.DecodeError:
        return None
    row = _asdict(item)
    if item.usage is not None:
        row["usage"] = _asdict(item.usage)
    return row
