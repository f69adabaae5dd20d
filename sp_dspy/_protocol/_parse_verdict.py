"""Parsing per-rule verdicts: the official parser and a robust one on top of it.

Strict mode follows contract section 5: think/refusal handling with ``"verdict"`` as the
marker, then JSON, then (only when the text is not a JSON object) the official pattern.
Robust mode recovers JSON in prose or fences, loose spellings (``"Not Violated"``) and
prose such as ``Verdict: violated`` or ``**not violated**``.
"""

from __future__ import annotations

import re
from typing import Any

from sp_dspy._protocol._parse_models import ParseMode, Verdict, VerdictParse, check_parse_mode
from sp_dspy._protocol._text import (
    has_refusal_phrase,
    has_verdict_marker,
    json_candidates,
    loads,
    official_split_think,
    official_strip_fence,
    robust_split_think,
)

_OFFICIAL_VALUES: dict[str, Verdict] = {"violated": "violated", "not_violated": "not_violated"}
_OFFICIAL_PATTERN = re.compile(r'"verdict"\s*:\s*"(violated|not_violated)"', re.IGNORECASE)
_VALUE = r"(not[\s_-]*violated|no[\s_-]*violation|violated)"
# Each is tried on the whole answer; the last match wins (models conclude at the end).
_PROSE_PATTERNS = (
    re.compile(r'"?verdict"?[\s*_:="\'`-]*(?:is\b[\s*_:"\'`-]*)?' + _VALUE + r"\b", re.IGNORECASE),
    re.compile(r"\*\*\s*" + _VALUE + r"\s*\.?\s*\*\*", re.IGNORECASE),
    re.compile(r"^\W*" + _VALUE + r"\W*$", re.IGNORECASE),
)


def _normalise(value: Any) -> Verdict | None:
    """``violated``/``not_violated`` from loose spellings; anything else is ``None``."""
    if not isinstance(value, str):
        return None
    key = re.sub(r"[\s_-]+", "_", value.strip().strip(".*\"'`").lower())
    if key == "violated":
        return "violated"
    if key in ("not_violated", "notviolated", "no_violation"):
        return "not_violated"
    return None


def _reason(data: dict[str, Any]) -> str | None:
    value = data.get("reason")
    return None if value is None else str(value)


def parse_verdict_strict(text: str | None) -> VerdictParse:
    """The official per-rule verdict parser (contract section 5)."""
    if not isinstance(text, str) or not text.strip():
        return VerdictParse.refusal()
    reasoning, rest = official_split_think(text)
    checked = rest or text
    if has_refusal_phrase(checked) and not has_verdict_marker(checked):
        return VerdictParse.refusal(reasoning)
    cleaned = official_strip_fence(checked)
    ok, data = loads(cleaned)
    if ok and isinstance(data, dict):
        verdict = _OFFICIAL_VALUES.get(str(data.get("verdict", "")).lower().strip())
        if verdict is None:
            return VerdictParse.failure(reasoning)
        return VerdictParse(verdict=verdict, status="clean", reason=_reason(data), reasoning=reasoning)
    match = _OFFICIAL_PATTERN.search(cleaned)
    if match is None:
        return VerdictParse.failure(reasoning)
    return VerdictParse(verdict=_OFFICIAL_VALUES[match.group(1).lower()], status="clean", reasoning=reasoning)


def _from_object(data: Any) -> VerdictParse | None:
    if not isinstance(data, dict):
        return None
    lowered = {str(k).lower(): v for k, v in data.items()}
    verdict = _normalise(lowered.get("verdict"))
    if verdict is None and isinstance(lowered.get("violated"), bool):
        verdict = "violated" if lowered["violated"] else "not_violated"
    if verdict is None:
        return None
    return VerdictParse(verdict=verdict, status="recovered", reason=_reason(lowered))


def _from_prose(answer: str) -> VerdictParse | None:
    for pattern in _PROSE_PATTERNS:
        matches = pattern.findall(answer)
        verdict = _normalise(matches[-1]) if matches else None
        if verdict is not None:
            return VerdictParse(verdict=verdict, status="recovered")
    return None


def _recover(answer: str) -> VerdictParse | None:
    for data in json_candidates(answer, ("verdict", "Verdict")):
        parsed = _from_object(data)
        if parsed is not None:
            return parsed
    return _from_prose(answer)


def parse_verdict_robust(text: str | None) -> VerdictParse:
    """Strict first; recover the verdict only when the official parser cannot."""
    strict = parse_verdict_strict(text)
    if strict.status == "clean" or not isinstance(text, str) or not text.strip():
        return strict
    reasoning, answer = robust_split_think(text)
    recovered = _recover(answer) if answer else None
    if recovered is not None:
        return recovered.model_copy(update={"reasoning": reasoning})
    checked = answer or text
    if has_refusal_phrase(checked) and not has_verdict_marker(checked):
        return VerdictParse.refusal(reasoning)
    return VerdictParse.failure(reasoning)


def parse_verdict_output(text: str | None, mode: ParseMode) -> VerdictParse:
    """Parse a per-rule verdict (violated / not_violated) from raw model text."""
    check_parse_mode(mode)
    return parse_verdict_strict(text) if mode == "strict" else parse_verdict_robust(text)
