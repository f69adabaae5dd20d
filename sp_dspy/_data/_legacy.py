"""Normalise the legacy spellings of published SafePyramid files (contract section 1).

``user_prompt``, ``conditional_violations``, and failure modes inside ``rubric`` or over the case.
"""

from __future__ import annotations

from typing import Any

_FM_KEYS = (
    "distractor_rules",
    "waived_rules",
    "contradicted_rules",
    "conditional_violations",
    "decisive_rules",
)


def normalise_case(raw: dict[str, Any], position: int) -> dict[str, Any]:
    """Return a new dict in the current schema; ``position`` names id-less cases."""
    case = dict(raw)
    if "id" not in case or case["id"] in (None, ""):
        case["id"] = f"case-{position}"
    if "conversation" not in case and "user_prompt" in case:
        case["conversation"] = case.pop("user_prompt")
    if case.get("framework") is None:
        case["framework"] = ""
    case["failure_mode_metadata"] = _failure_modes(case)
    return case


def _failure_modes(case: dict[str, Any]) -> Any:
    found: dict[str, Any] = {}
    rubric = case.get("rubric")
    if isinstance(rubric, dict):
        rubric = dict(rubric)
        nested = rubric.pop("failure_mode_metadata", None)
        if isinstance(nested, dict):
            found.update(nested)
        for key in _FM_KEYS:
            if key in rubric:
                found.setdefault(key, rubric.pop(key))
        case["rubric"] = rubric
    for key in _FM_KEYS:
        if key in case:
            found.setdefault(key, case.pop(key))
    block = case.get("failure_mode_metadata")
    if isinstance(block, dict):
        found = {**found, **block}
    elif block is not None:
        return block  # not a mapping: validation names the wrong type
    if "conditional_violations" in found:
        legacy = found.pop("conditional_violations")
        if not found.get("contradicted_rules"):
            found["contradicted_rules"] = legacy
    return found
