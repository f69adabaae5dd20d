"""Guard inputs one per line (``sp-dspy check --batch``): a policy and a conversation per line.

The custom benchmark's line format less its gold answer (``id``, ``policy``, ``messages`` or
``conversation``, and ``framework``); the policy may instead come once for every line. A bad
line is one ``FILE:LINE: field: why`` error standing for that line alone: the others still run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from .._errors import DataError
from ._inputs import Source, guard_case
from ._scan import MAX_DATASET_BYTES, decode_utf8, json_object_line, read_regular

_FIELDS: Final = frozenset({"id", "policy", "messages", "conversation", "framework"})


@dataclass(frozen=True)
class GuardLine:
    """One line's inputs, checked as ``Guard.check`` takes them (``id`` is echoed with its verdict)."""

    number: int
    id: str | None
    policy: str
    conversation: str | list[Any]
    framework: str


@dataclass(frozen=True)
class BadLine:
    """A line that is not a guard's inputs: ``message`` is its one ``FILE:LINE: field: why`` error."""

    number: int
    id: str | None
    message: str


def read_guard_lines(path: Path, *, policy: str | None = None) -> list[GuardLine | BadLine]:
    """Each non-blank line of ``path`` in order: its inputs, or why it is none.

    ``policy`` serves the lines without one of their own. A file that cannot be read, or has
    no line, is a ``DataError`` raised.
    """
    if not path.exists():
        raise DataError(f"--batch {path}: no such file")
    text = decode_utf8(read_regular(path, "--batch file", max_bytes=MAX_DATASET_BYTES), path)
    lines: list[GuardLine | BadLine] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        row: dict[str, Any] = {}
        try:
            row = json_object_line(line, f"{path}:{number}")
            lines.append(_guard_line(row, number, path, policy))
        except DataError as error:
            line_id = row.get("id")
            lines.append(BadLine(number, line_id if isinstance(line_id, str) else None, str(error)))
    if not lines:
        raise DataError(f"{path}: no lines (expected one JSON object per line: policy and messages)")
    return lines


def _guard_line(row: dict[str, Any], number: int, path: Path, policy: str | None) -> GuardLine:
    at = f"{path}:{number}"
    unknown = sorted(set(row) - _FIELDS)
    if unknown:
        raise DataError(
            f"{at}: unknown field(s) {', '.join(unknown)} (expected {', '.join(sorted(_FIELDS))})"
        )
    line_id = row.get("id")
    if line_id is not None and (not isinstance(line_id, str) or not line_id.strip()):
        raise DataError(f"{at}: id: expected a non-empty string, got {line_id!r:.40}")
    if ("messages" in row) == ("conversation" in row):
        raise DataError(f"{at}: give exactly one of messages (chat messages) or conversation (Turn N text)")
    field = "messages" if "messages" in row else "conversation"
    conversation = row[field]
    if field == "messages" and not isinstance(conversation, list):
        raise DataError(
            f"{at}: messages: expected a list of chat messages, got {type(conversation).__name__}"
        )
    line_policy = row.get("policy", policy)
    if line_policy is None:
        raise DataError(f"{at}: policy: missing (give it on the line or once with --policy)")
    framework = row.get("framework", "")
    if not isinstance(framework, str):
        raise DataError(f"{at}: framework: expected a string, got {type(framework).__name__}")
    guard_case(
        line_policy,
        conversation,
        framework=framework,
        policy_source=Source(f"{at}: policy"),
        conversation_source=Source(f"{at}: {field}"),
    )
    return GuardLine(number, line_id, line_policy, conversation, framework)
