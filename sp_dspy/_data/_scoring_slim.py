"""Scoring views straight from a benchmark file's bytes, without building full cases.

``slim_views`` validates the file against the *same* types the full ``Case`` schema
requires (every required field, every typed optional field, rubric entry texts
included) but with extras ignored and as plain dicts, so pydantic skips building the
75 MB of model objects that scoring never reads. It then runs the loader's
consistency checks. It answers only when the full loader would accept every case
unchanged; on any doubt (a legacy spelling ``_legacy.normalise_case`` would rewrite,
a validation or consistency error, invalid JSON) it returns None and the caller loads
the file with ``load_file``, so every error message and ``--lenient`` skip stays the
full loader's. ``tests/test_scoring_view.py`` checks both paths agree.
"""

from __future__ import annotations

from typing import Any, NotRequired

from pydantic import ConfigDict, TypeAdapter, ValidationError, with_config
from typing_extensions import TypedDict  # pydantic needs it for TypedDicts before 3.12

from ._legacy import _FM_KEYS
from ._scan import json_head, rule_numbers
from ._scoring import ScoringCase
from ._types import Level, RuleType

_IGNORE_EXTRA = ConfigDict(extra="ignore")
_LEGACY_KEYS = frozenset(_FM_KEYS)


@with_config(_IGNORE_EXTRA)
class _Entry(TypedDict):
    """``RubricEntry``'s fields and types; ``paired_with`` must already be a list."""

    rule: int
    text: str
    type: RuleType
    paired_with: NotRequired[list[int]]
    applies: NotRequired[bool | None]
    violated: NotRequired[bool | None]
    active: NotRequired[bool | None]


class _LegacyFailureModeKeys(TypedDict):
    """The failure-mode keys (``_legacy._FM_KEYS``) old files put outside ``failure_mode_metadata``.

    Declared (as ``Any``) only so extras-ignoring validation keeps them: their mere
    presence makes the full loader normalise the case, so the slim path steps aside.
    """

    distractor_rules: NotRequired[Any]
    waived_rules: NotRequired[Any]
    contradicted_rules: NotRequired[Any]
    conditional_violations: NotRequired[Any]
    decisive_rules: NotRequired[Any]


@with_config(_IGNORE_EXTRA)
class _Rubric(_LegacyFailureModeKeys):
    """``Rubric`` plus the legacy keys that make the full loader normalise."""

    violations: NotRequired[list[_Entry]]
    non_violations: NotRequired[list[_Entry]]
    failure_mode_metadata: NotRequired[Any]


@with_config(_IGNORE_EXTRA)
class _FailureModes(TypedDict):
    """``FailureModeMetadata`` plus its legacy ``conditional_violations`` key."""

    distractor_rules: NotRequired[list[int]]
    waived_rules: NotRequired[list[int]]
    contradicted_rules: NotRequired[list[int]]
    decisive_rules: NotRequired[list[int] | None]
    conditional_violations: NotRequired[Any]


@with_config(_IGNORE_EXTRA)
class _Case(_LegacyFailureModeKeys):
    """``Case``'s fields and types, plus the legacy top-level failure-mode keys."""

    id: str
    domain: str
    level: Level
    conversation: str
    policy: str
    framework: NotRequired[str]
    ground_truth_violations: list[int]
    rubric: NotRequired[_Rubric]
    failure_mode_metadata: NotRequired[_FailureModes]
    benchmark: NotRequired[str]
    safe: NotRequired[bool | None]
    severity: NotRequired[int | None]
    group: NotRequired[str | None]


@with_config(_IGNORE_EXTRA)
class _Document(TypedDict):
    data: list[_Case]


_DOCUMENT: TypeAdapter[_Document] = TypeAdapter(_Document)
_CASE_LIST: TypeAdapter[list[_Case]] = TypeAdapter(list[_Case])
_VIEWS: TypeAdapter[list[ScoringCase]] = TypeAdapter(list[ScoringCase])


def slim_views(raw_bytes: bytes) -> list[ScoringCase] | None:
    """Scoring views of a benchmark file, or None when ``load_file`` must decide."""
    head = json_head(raw_bytes)
    try:
        if head == b"[":
            items = _CASE_LIST.validate_json(raw_bytes)
        elif head == b"{":
            items = _DOCUMENT.validate_json(raw_bytes)["data"]
        else:
            return None
    except ValidationError:  # invalid JSON included
        return None
    views: list[dict[str, Any]] = []
    seen: set[str] = set()
    for item in items:
        view = _view(item)
        if view is None or view["id"] in seen:
            return None
        seen.add(view["id"])
        views.append(view)
    # One validation call for the whole list: a third of the cost of one
    # ``ScoringCase(...)`` (or ``model_construct``) per case.
    return _VIEWS.validate_python(views)


def _view(item: _Case) -> dict[str, Any] | None:
    """One case's ``ScoringCase`` fields, or None if the full loader would normalise or reject it."""
    if not item["id"] or not _LEGACY_KEYS.isdisjoint(item):
        return None
    rubric = item.get("rubric", {})
    if "failure_mode_metadata" in rubric or not _LEGACY_KEYS.isdisjoint(rubric):
        return None
    meta = item.get("failure_mode_metadata", {})
    if "conditional_violations" in meta:
        return None
    types = {
        entry["rule"]: entry["type"]
        for entry in (*rubric.get("violations", ()), *rubric.get("non_violations", ()))
    }
    gt = item["ground_truth_violations"]
    if types and (not set(gt) <= types.keys() or not types.keys() <= rule_numbers(item["policy"])):
        return None
    return {
        "id": item["id"],
        "domain": item["domain"],
        "level": item["level"],
        "ground_truth_violations": gt,
        "rule_types": types,
        "distractor_rules": meta.get("distractor_rules", []),
        "waived_rules": meta.get("waived_rules", []),
        "contradicted_rules": meta.get("contradicted_rules", []),
        "decisive_rules": meta.get("decisive_rules"),
    }
