"""The numbered rules of a policy text, read the way the benchmark writes them.

A SafePyramid policy is a preamble, at L2 a framework section, then one rule per
line as ``N. text``. An application's policy is expected in the same shape: the
guard programs were evaluated (and compiled) on it, and the rule numbers they
answer with are these numbers.

Reading rules:

- When a ``Rules:`` header line is present, only lines after it are read, so a
  numbered list in a preamble or framework is not mistaken for rules.
- A rule is a line ``N. text``. Indented lines right after it continue its text
  (a wrapped rule); a blank or unindented line ends it.
- A rule number used twice is an error: the verdict could not say which one it means.
"""

from __future__ import annotations

import re

from .._errors import DataError
from ._source import Source

_RULE = re.compile(r"^\s*(\d{1,9})\.\s+(\S.*?)\s*$")
_RULES_HEADER = re.compile(r"^\s*(?:#+\s*)?rules\s*:?\s*$", re.IGNORECASE)


def policy_rules(policy: object, *, source: Source | None = None) -> dict[int, str]:
    """``{rule number: rule text}`` in the order the policy lists them.

    Raises:
        DataError: the policy is not a string, is empty, has no ``N. text`` line, or
            numbers a rule twice (one line naming where).
    """
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
