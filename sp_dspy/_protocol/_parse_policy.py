"""Parsing per-policy answers: the official parser and a robust one on top of it.

Strict mode follows contract section 3 step by step, including the reference's
incidental checks (a ``confidence`` that ``float()`` rejects, an unreadable
``applicable_exceptions``, fail there too), so its exclusions match the leaderboard's;
where the reference crashes (a top-level list, ``Infinity``) it reports ``failed``.
Robust mode also recovers JSON in prose or fences, a top-level list, ``"Rule 3"`` strings
(which strict mode drops), a ``violations`` key and truncated output.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from sp_dspy._data import rule_line_numbers
from sp_dspy._protocol._parse_models import ParseMode, PolicyParse, check_parse_mode
from sp_dspy._protocol._text import (
    balanced_segment,
    has_policy_marker,
    has_refusal_phrase,
    json_candidates,
    loads,
    official_split_think,
    official_strip_fence,
    robust_split_think,
    to_text,
)

if TYPE_CHECKING:
    from sp_dspy._data import Case

_LABELS: dict[str, Literal["safe", "unsafe"]] = {"safe": "safe", "unsafe": "unsafe"}
_STRICT_ERRORS = (TypeError, ValueError, OverflowError)
_RULES_KEYS = ("violated_rules", "violations")
_ITEM_KEYS = ("rule", "rule_number", "rule_id", "number")
_RULE_STRING = re.compile(r"\s*(?:rule|r)?\s*#?\s*(\d{1,9})(?!\d)", re.IGNORECASE)
_ANY_NUMBER = re.compile(r"(?<!\d)\d{1,9}(?!\d)")
_LIST_OPENING = re.compile(r'"(?:violated_rules|violations)"\s*:\s*\[')
# A number counts only when a delimiter follows it ("[3, 1" cut off from "[3, 12]" drops the 1).
_RULE_KEY_NUMBER = re.compile(r'"rule"\s*:\s*"?\s*(?:rule\s*#?\s*|r)?(\d{1,9})(?=["\s]*[,}\]])', re.I)
_BARE_ITEM = re.compile(r'(?:^\[|,)\s*"?\s*(?:rule\s*#?\s*|r)?(\d{1,9})\s*"?(?=\s*[,\]])', re.I)


def _dedupe(rules: list[int]) -> list[int]:
    return list(dict.fromkeys(rules))


def _official_rules(value: Any) -> list[int]:
    """Read a rule list the way the reference does; raises on what it rejects."""
    rules: list[int] = []
    for item in value:
        if isinstance(item, dict):
            number = item.get("rule")
            if number is not None:
                rules.append(int(number))
        elif isinstance(item, int | float):
            rules.append(int(item))
    return rules


def _label(data: dict[str, Any]) -> Literal["safe", "unsafe"] | None:
    """The model's own ``label`` field when it says ``safe`` or ``unsafe``."""
    if "label" not in data:
        return None
    return _LABELS.get(str(data["label"]).lower().strip())


def _strict(text: str | None) -> tuple[PolicyParse, dict[str, Any] | None]:
    """The official parse (contract section 3, steps 1-5) and, when clean, the JSON object it read."""
    if not isinstance(text, str) or not text.strip():
        return PolicyParse.refusal(), None
    reasoning, rest = official_split_think(text)
    checked = rest or text
    if has_refusal_phrase(checked) and not has_policy_marker(checked):
        return PolicyParse.refusal(reasoning), None
    ok, data = loads(official_strip_fence(rest))
    if not ok or not isinstance(data, dict):
        return PolicyParse.failure(reasoning), None
    try:
        float(data.get("confidence", 0.5))
        rules = _official_rules(data.get("violated_rules", []))
        _official_rules(data.get("applicable_exceptions", []))
    except _STRICT_ERRORS:
        return PolicyParse.failure(reasoning), None
    parsed = PolicyParse(
        violated_rules=_dedupe(rules),
        status="clean",
        analysis=to_text(data.get("analysis")),
        reasoning=reasoning,
        predicted_label=_label(data),
    )
    return parsed, data


def _has_boolean(value: Any) -> bool:
    """Whether a rule list holds ``true``/``false``, which only the reference's ``int()`` reads as rules."""
    return isinstance(value, list) and any(isinstance(item, bool) for item in value)


def lenient_rule(item: Any) -> int | None:
    """One rule number from ``5``, ``5.0``, ``"5"``, ``"Rule 5"``, ``"R5"``, ``{"rule": 5}``."""
    if isinstance(item, bool):
        return None
    if isinstance(item, int):
        return item
    if isinstance(item, float):
        return int(item) if item.is_integer() else None
    if isinstance(item, str):
        match = _RULE_STRING.match(item)
        return int(match.group(1)) if match else None
    if isinstance(item, dict):
        for key in _ITEM_KEYS:
            if key in item and not isinstance(item[key], dict | list):
                return lenient_rule(item[key])
    return None


def lenient_rules(value: Any, *, all_or_nothing: bool = False) -> list[int] | None:
    """A rule list from a list, a ``"3, 5"`` string, a number or ``null`` (none).

    Unreadable items are dropped (as the official parser drops bare strings); a non-empty
    list with no readable item is no answer (``None``), never "none".
    """
    if value is None:
        return []
    if isinstance(value, str):
        return _dedupe([int(n) for n in _ANY_NUMBER.findall(value)])
    if isinstance(value, list):
        rules = [lenient_rule(item) for item in value]
        readable = [rule for rule in rules if rule is not None]
        if (all_or_nothing and len(readable) < len(rules)) or (rules and not readable):
            return None
        return _dedupe(readable)
    rule = lenient_rule(value)
    return None if rule is None else [rule]


def _interpret(data: Any) -> PolicyParse | None:
    """A recovered answer from a decoded JSON value, or ``None`` if it is not one."""
    if isinstance(data, list):
        # Only when every item reads as a rule number: a list of prose findings is not "none".
        rules = lenient_rules(data, all_or_nothing=True)
        return None if rules is None else PolicyParse(violated_rules=rules, status="recovered")
    if not isinstance(data, dict):
        return None
    key = next((k for k in _RULES_KEYS if k in data), None)
    rules = lenient_rules(data[key]) if key else None
    if rules is None:
        return None
    return PolicyParse(
        violated_rules=rules,
        status="recovered",
        analysis=to_text(data.get("analysis")),
        predicted_label=_label(data),
    )


def _regex_fallback(answer: str) -> PolicyParse | None:
    """Rule numbers after the last ``"violated_rules": [`` of a cut-off or broken answer.

    An empty result counts only for a closed, blank ``[]``.
    """
    openings = list(_LIST_OPENING.finditer(answer))
    if not openings:
        return None
    segment, closed = balanced_segment(answer, openings[-1].end() - 1)
    # Bare numbers count only in a flat list: in ``[[1, 2], [3]]`` they are not rule items.
    numbers = _RULE_KEY_NUMBER.findall(segment) or ([] if "[" in segment[1:] else _BARE_ITEM.findall(segment))
    if not numbers and not (closed and not segment[1:-1].strip()):
        return None
    return PolicyParse(violated_rules=_dedupe([int(n) for n in numbers]), status="recovered")


def _recover(answer: str) -> PolicyParse | None:
    for data in json_candidates(answer, _RULES_KEYS):
        parsed = _interpret(data)
        if parsed is not None:
            return parsed
    return _regex_fallback(answer)


def parse_policy_robust(text: str | None) -> PolicyParse:
    """Strict first; recover the answer when the official parser fails or loses rules.

    A clean strict parse is kept unless the lenient reading of the same JSON differs
    (``"Rule 3"`` strings, booleans read as rule 1): then the lenient rules win,
    ``recovered``. A rule list the lenient reading cannot use at all makes it ``failed``,
    ``[true, false]`` too, which the strict parser reads as the reference does: rules 1 and 0.
    """
    strict, data = _strict(text)
    if strict.status == "clean" and data is not None:
        lenient = _interpret(data)
        key = next((k for k in _RULES_KEYS if k in data), None)
        unusable = not strict.violated_rules or _has_boolean(data[key] if key else None)
        if lenient is None and key is not None and data[key] and unusable:
            # A rule list with nothing readable (``[[1, 2]]``, ``{"1": ...}``, ``[true]``) is no answer, not "none".
            return PolicyParse.failure(strict.reasoning)
        if lenient is None or lenient.violated_rules == strict.violated_rules:
            return strict
        return strict.model_copy(update={"violated_rules": lenient.violated_rules, "status": "recovered"})
    if not isinstance(text, str) or not text.strip():
        return strict
    reasoning, answer = robust_split_think(text)
    recovered = _recover(answer) if answer else None
    if recovered is not None:
        return recovered.model_copy(update={"reasoning": reasoning})
    checked = answer or text
    if has_refusal_phrase(checked) and not has_policy_marker(checked):
        return PolicyParse.refusal(reasoning)
    return PolicyParse.failure(reasoning)


def parse_policy_output(text: str | None, mode: ParseMode) -> PolicyParse:
    """Parse a per-policy answer (the violated rules) from raw model text."""
    check_parse_mode(mode)
    return _strict(text)[0] if mode == "strict" else parse_policy_robust(text)


# --- rules of the policy --------------------------------------------------------------


def case_rule_numbers(case: Case) -> set[int]:
    """The rule numbers of a case's policy: its rubric's, else the policy's ``N.`` lines."""
    return {entry.rule for entry in case.rubric.entries()} or set(rule_line_numbers(case.policy))


@dataclass(frozen=True)
class PolicyRules:
    """An answer's rule numbers split into the policy's (``rules``; ``None`` when it had none or
    named only numbers the policy lacks: no answer, not "no rule violated") and ``dropped``."""

    rules: list[int] | None
    dropped: list[int]

    @property
    def status(self) -> Literal["recovered", "failed"] | None:
        """The answer's status after the drop; ``None`` when nothing was dropped (it keeps its own)."""
        if not self.dropped:
            return None
        return "failed" if self.rules is None else "recovered"


def keep_policy_rules(rules: Sequence[int] | None, policy_rules: Collection[int]) -> PolicyRules:
    """Drop the rule numbers not in ``policy_rules``, keeping order (none when it is empty: unknown)."""
    if rules is None or not policy_rules:
        return PolicyRules(None if rules is None else list(rules), [])
    kept = [rule for rule in rules if rule in policy_rules]
    dropped = [rule for rule in rules if rule not in policy_rules]
    return PolicyRules(None if dropped and not kept else kept, dropped)
