"""Conversations in the benchmark's ``Turn N - User/Chatbot: ...`` text form, what guards were measured on.

Accepted: that text (checked: a user turn first, speakers alternating, turns counting
up from 1; other lines continue the previous message), or chat messages
``{"role": "user" | "assistant", "content": str}`` (each user message opens turn N, the
reply shares N). Leading ``system`` messages are dropped (benchmark conversations have
none, and a system prompt is not what the chatbot said); a later one is rejected.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from .._errors import DataError
from ._source import Source

SPEAKERS: dict[str, str] = {"user": "User", "assistant": "Chatbot"}
_TURN = re.compile(r"^\s*Turn\s+(\d{1,9})\s*-\s*(User|Chatbot)\s*:", re.IGNORECASE)


def conversation_text(conversation: object, *, source: Source | None = None) -> str:
    """The benchmark's text form of ``conversation``; a ``DataError`` names the wrong message or line."""
    source = source or Source("conversation")
    if isinstance(conversation, str):
        return check_turn_text(conversation, source=source)
    if isinstance(conversation, Sequence) and not isinstance(conversation, bytes | bytearray):
        return messages_to_text(conversation, source=source)
    raise DataError(
        f"{source.whole()}: expected 'Turn N - User: ...' text or a list of chat messages, "
        f"got {type(conversation).__name__}"
    )


def check_turn_text(text: str, *, source: Source | None = None) -> str:
    """``text`` with surrounding whitespace removed, once its turns are checked."""
    source = source or Source("conversation")
    if not text.strip():
        raise DataError(f"{source.whole()}: the conversation is empty")
    expected_speaker, turn = "User", 0
    for number, line in enumerate(text.splitlines(), start=1):
        match = _TURN.match(line)
        if match is None:
            if turn == 0 and line.strip():
                raise DataError(
                    f"{source.line(number)}: expected a line 'Turn 1 - User: ...', got {line[:60]!r}"
                )
            continue  # a message that spans several lines
        number_seen, speaker = int(match.group(1)), match.group(2).capitalize()
        if speaker != expected_speaker:
            raise DataError(
                f"{source.line(number)}: expected a {expected_speaker} turn, got two {speaker} turns in a row"
            )
        wanted = turn + 1 if speaker == "User" else turn
        if number_seen != wanted:
            raise DataError(
                f"{source.line(number)}: expected 'Turn {wanted} - {speaker}', got turn {number_seen}"
            )
        turn = wanted
        expected_speaker = "Chatbot" if speaker == "User" else "User"
    return text.strip()


def messages_to_text(messages: Sequence[Any], *, source: Source | None = None) -> str:
    """Chat messages as ``Turn N - User/Chatbot: content`` lines (see the module docstring)."""
    source = source or Source("conversation")
    lines: list[str] = []
    turn, previous = 0, None
    for index, message in enumerate(messages):
        role, content = _role_and_content(message, index, source)
        if role == "system":
            if previous is not None:
                raise DataError(
                    f"{source.item(index, 'role')}: a 'system' message is accepted only before the "
                    "dialogue (where it is dropped)"
                )
            continue
        if previous is None and role != "user":
            raise DataError(f"{source.item(index, 'role')}: the dialogue must start with a 'user' message")
        if role == previous:
            raise DataError(
                f"{source.item(index, 'role')}: two '{role}' messages in a row "
                "(user and assistant messages must alternate)"
            )
        if role == "user":
            turn += 1
        lines.append(f"Turn {turn} - {SPEAKERS[role]}: {content}")
        previous = role
    if not lines:
        raise DataError(f"{source.whole()}: no user or assistant messages")
    return "\n".join(lines)


def _role_and_content(message: Any, index: int, source: Source) -> tuple[str, str]:
    if not isinstance(message, Mapping):
        raise DataError(
            f"{source.item(index)}: expected an object with 'role' and 'content', got {type(message).__name__}"
        )
    if "role" not in message:
        raise DataError(f"{source.item(index, 'role')}: missing")
    role = message["role"]
    if role not in ("user", "assistant", "system"):
        raise DataError(f"{source.item(index, 'role')}: expected 'user' or 'assistant', got {role!r}")
    if role == "system":
        return role, ""
    if "content" not in message:
        raise DataError(f"{source.item(index, 'content')}: missing")
    content = message["content"]
    if not isinstance(content, str):
        raise DataError(f"{source.item(index, 'content')}: expected a string, got {type(content).__name__}")
    if not content.strip():
        raise DataError(f"{source.item(index, 'content')}: empty message")
    return role, content.strip()
