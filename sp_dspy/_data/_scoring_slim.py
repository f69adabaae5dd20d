"""Scoring views straight from a benchmark file's bytes, without building full cases.

``slim_views`` decodes the file with msgspec against structs that declare the *same*
fields and types the full ``Case`` schema requires (every required field, every typed
optional field, rubric entry texts included), extras ignored. msgspec checks the whole
document's JSON syntax and each declared field's type in one pass in C, and skips what
is not declared without building it; the conversation, the longest text and one
scoring never reads, is only checked to be a JSON string (``raw_opens_with``), not
decoded. The loader's consistency checks follow, case by case. This module imports
no pydantic: the worker process that runs it for ``sp-dspy score``
(``_scoring_worker``) starts before pydantic is imported.

It answers only when the full loader would accept every case unchanged. msgspec's
types are at least as strict as pydantic's lax mode (no ``"3"`` or ``3.0`` for an int,
no ``"yes"`` for a bool), so anything it accepts the full loader accepts with the same
values; on any doubt (a legacy spelling ``_legacy.normalise_case`` would rewrite, a
type or consistency error, invalid JSON) it returns None and the caller loads the file
with ``load_file``, so every error message and ``--lenient`` skip stays the full
loader's. Bytes that are not UTF-8 need no check of their own: the full loader reads
them with replacement characters, and msgspec rejects them in every field it decodes.
``tests/test_scoring_view.py`` checks both paths agree.
"""

from __future__ import annotations

import mmap
from pathlib import Path

import msgspec
from msgspec import UNSET, Raw, Struct, UnsetType, field

from ._scan import json_head, raw_opens_with, rule_numbers
from ._scoring import ScoringCase
from ._types import Level, RuleType


class _Entry(Struct, kw_only=True):
    """``RubricEntry``'s fields and types; ``paired_with`` must already be a list."""

    rule: int
    text: str
    type: RuleType
    paired_with: list[int] = []
    applies: bool | None = None
    violated: bool | None = None
    active: bool | None = None


class _LegacyFailureModeKeys(Struct, kw_only=True):
    """The failure-mode keys (``_legacy._FM_KEYS``) old files put outside ``failure_mode_metadata``.

    Declared only to be seen: their mere presence makes the full loader normalise
    the case, so the slim path steps aside.
    """

    distractor_rules: Raw | UnsetType = UNSET
    waived_rules: Raw | UnsetType = UNSET
    contradicted_rules: Raw | UnsetType = UNSET
    conditional_violations: Raw | UnsetType = UNSET
    decisive_rules: Raw | UnsetType = UNSET

    def has_legacy_keys(self) -> bool:
        return not (
            self.distractor_rules is UNSET
            and self.waived_rules is UNSET
            and self.contradicted_rules is UNSET
            and self.conditional_violations is UNSET
            and self.decisive_rules is UNSET
        )


class _Rubric(_LegacyFailureModeKeys, kw_only=True):
    """``Rubric`` plus the legacy keys that make the full loader normalise."""

    violations: list[_Entry] = []
    non_violations: list[_Entry] = []
    failure_mode_metadata: Raw | UnsetType = UNSET


class _FailureModes(Struct, kw_only=True):
    """``FailureModeMetadata`` plus its legacy ``conditional_violations`` key."""

    distractor_rules: list[int] = []
    waived_rules: list[int] = []
    contradicted_rules: list[int] = []
    decisive_rules: list[int] | None = None
    conditional_violations: Raw | UnsetType = UNSET


class _Case(_LegacyFailureModeKeys, kw_only=True):
    """``Case``'s fields and types, plus the legacy top-level failure-mode keys."""

    id: str
    domain: str
    level: Level
    conversation: Raw
    policy: str
    framework: str = ""
    ground_truth_violations: list[int]
    rubric: _Rubric = field(default_factory=_Rubric)
    failure_mode_metadata: _FailureModes = field(default_factory=_FailureModes)
    benchmark: str = "safepyramid"
    safe: bool | None = None
    severity: int | None = None
    group: str | None = None


class _Document(Struct):
    data: list[_Case]


_DOCUMENT = msgspec.json.Decoder(_Document)
_CASE_LIST = msgspec.json.Decoder(list[_Case])


def slim_views_of(path: Path) -> list[ScoringCase] | None:
    """``slim_views`` of a file, read through a memory map (no copy of its bytes).

    A file that cannot be mapped (unreadable, empty, not a regular file) gives None,
    as a declined one does: ``load_file`` then raises what it always raised. The map
    is not closed explicitly but unmapped when the last object that points into it
    (an undecoded conversation) is gone: closing it while an error's traceback still
    holds such objects would raise ``BufferError``.
    """
    try:
        with path.open("rb") as handle:
            mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None
    return slim_views(mapped)


def slim_views(raw_bytes: bytes | mmap.mmap) -> list[ScoringCase] | None:
    """Scoring views of a benchmark file's bytes in file order, or None when ``load_file`` must decide."""
    head = json_head(raw_bytes)
    try:
        if head == b"[":
            items = _CASE_LIST.decode(raw_bytes)
        elif head == b"{":
            items = _DOCUMENT.decode(raw_bytes).data
        else:
            return None
    except msgspec.DecodeError:  # a type error or invalid JSON
        return None
    views: list[ScoringCase] = []
    seen: set[str] = set()
    for item in items:
        view = _view(item)
        if view is None or view.id in seen:
            return None
        seen.add(view.id)
        views.append(view)
    return views


def _view(item: _Case) -> ScoringCase | None:
    """One case's ``ScoringCase``, or None if the full loader would normalise or reject it.

    Built without a second validation: msgspec has checked every field's type.
    """
    rubric, meta = item.rubric, item.failure_mode_metadata
    if (
        not item.id
        or item.has_legacy_keys()
        or rubric.has_legacy_keys()
        or rubric.failure_mode_metadata is not UNSET
        or meta.conditional_violations is not UNSET
        or not raw_opens_with(item.conversation, b'"')
    ):
        return None
    types = {entry.rule: entry.type for entry in (*rubric.violations, *rubric.non_violations)}
    gt = item.ground_truth_violations
    if types and (not set(gt) <= types.keys() or not types.keys() <= rule_numbers(item.policy)):
        return None
    return ScoringCase(
        id=item.id,
        domain=item.domain,
        level=item.level,
        ground_truth_violations=gt,
        rule_types=types,
        distractor_rules=meta.distractor_rules,
        waived_rules=meta.waived_rules,
        contradicted_rules=meta.contradicted_rules,
        decisive_rules=meta.decisive_rules,
    )
