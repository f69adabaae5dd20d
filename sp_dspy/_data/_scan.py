"""Scans of raw text that the benchmark loader uses before (or instead of) decoding it."""

from __future__ import annotations

import re

_LEADING_SPACE = re.compile(rb"\s*")
# A rule line ``N. text`` (leading whitespace allowed). The search is anchored on a
# literal "\n", which lets the regex engine skip to line starts: 3x faster than the
# equivalent ``^\s*(\d+)\.\s`` with MULTILINE. Rather than copying every policy to
# prepend a newline, the first line gets its own anchored match: a line match either
# starts at a newline of the policy or covers its leading whitespace, which
# ``_FIRST_RULE`` does (same set of numbers: ``test_rule_numbers_match_the_loader``).
_RULE_LINE = re.compile(r"\n\s*(\d+)\.(?=\s)")
_FIRST_RULE = re.compile(r"\s*(\d+)\.(?=\s)")


def rule_numbers(policy: str) -> set[int]:
    """The numbers of a policy's ``N.`` rule lines (what a rubric's rules must be among)."""
    found = set(map(int, _RULE_LINE.findall(policy)))
    first = _FIRST_RULE.match(policy)
    if first is not None:
        found.add(int(first.group(1)))
    return found


def json_head(raw_bytes: bytes) -> bytes:
    """The first non-space byte of a JSON document (``b"["``, ``b"{"``...), or ``b""``."""
    start = _LEADING_SPACE.match(raw_bytes)
    return raw_bytes[start.end() : start.end() + 1] if start else b""
