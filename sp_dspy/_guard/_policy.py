"""The numbered rules of a policy text, read the way the benchmark writes them (``N. text`` lines).

After a ``Rules:`` header line if there is one (so a numbered preamble is not mistaken
for rules); indented lines continue a rule; a number used twice is an error, since a
verdict could not say which rule it means.
"""

from __future__ import annotations

import re

from .._errors import DataError
from ._source import Source

_RULE = re.compile(r"^\s*(\d{1,9})\.\s+(\S.*?)\s*$")
_RULES_HEADER = re.compile(r"^\s*(?:#+\s*)?rules\s*:?\s*$", re.IGNORECASE)


def policy_rules(policy: object, *, source: Source | None = None) -> dict[int, str]:
    """``{rule number: rule text}`` in the policy's order; a ``DataError`` names a bad line."""
    source = source or Source("policy")
    if not isinstance(policy, str):
        raise DataError(f"{source.whole()}: expected the policy as a string, got {type(policy).__name__}")
    if not policy.strip():
        raise DataError(f"{source.whole()}: the policy is empty")
    lines = policy.splitlines()
    start = next((i + 1 for i, line in enumerate(lines) if _RULES_HEADER.match(line)), 0)
    rules: dict[int, str] = {}
    first_line: dict[int, int] = {}
    current: int | None = None
    for index in range(start, len(lines)):
        line = lines[index]
        match = _RULE.match(line)
        if match:
            number = int(match.group(1))
            if number in rules:
                raise DataError(
                    f"{source.line(index + 1)}: rule {number} is numbered twice "
                    f"(first on line {first_line[number]})"
                )
            rules[number] = match.group(2)
            first_line[number] = index + 1
            current = number
        elif current is not None and line.strip() and line[:1].isspace():
            rules[current] = f"{rules[current]} {line.strip()}"
        else:
            current = None
    if not rules:
        raise DataError(
            f"{source.whole()}: no numbered rules found (expected one rule per line, like '1. The chatbot must ...')"
        )
    return rules
