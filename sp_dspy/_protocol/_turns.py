"""A benchmark conversation (``Turn N - User: ...`` lines) read back into its speakers' messages.

Guard models take the conversation with its roles (a chat's user and assistant messages, or
their own speaker tags); the benchmark stores it as text, so this is the one reading of it.
"""

from __future__ import annotations

import re
from typing import Literal

Speaker = Literal["user", "assistant"]
_TURN = re.compile(r"^\s*Turn\s+\d{1,9}\s*-\s*(User|Chatbot)\s*:\s?", re.IGNORECASE)


def conversation_turns(conversation: str) -> list[tuple[Speaker, str]]:
    """``[(speaker, text), ...]`` in order; a line that starts no turn continues the one before it.

    Text before the first turn (a conversation that is not in turn form) is one user message.
    """
    turns: list[tuple[Speaker, list[str]]] = []
    for line in conversation.splitlines():
        match = _TURN.match(line)
        if match:
            speaker: Speaker = "user" if match.group(1).lower() == "user" else "assistant"
            turns.append((speaker, [line[match.end() :]]))
        elif turns:
            turns[-1][1].append(line)
        elif line.strip():
            turns.append(("user", [line]))
    return [(speaker, "\n".join(lines).strip()) for speaker, lines in turns]


def speaker_lines(conversation: str, user: str, assistant: str, separator: str = "\n") -> str:
    """The conversation as ``{user} text`` / ``{assistant} text`` lines (a guard's own speaker tags)."""
    names = {"user": user, "assistant": assistant}
    return separator.join(f"{names[speaker]} {text}" for speaker, text in conversation_turns(conversation))
