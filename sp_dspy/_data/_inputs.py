"""What an application passes to a guard (policy, conversation), checked and built into a ``Case``.

Inputs take the benchmark's shapes, what guards were measured on; errors name where (``Source``).
The case has no gold and no rubric, so rule interactions reach only per-policy programs.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from .._errors import DataError
from ._schema import Case, Rubric, RubricEntry

GUARD_DOMAIN = "application"
SPEAKERS: dict[str, str] = {"user": "User", "assistant": "Chatbot"}
_RULE = re.compile(r"^\s*(\d{1,9})\.\s+(\S.*?)\s*$")
_RULES_HEADER = re.compile(r"^\s*(?:#+\s*)?rules\s*:?\s*$", re.IGNORECASE)
_TURN = re.compile(r"^\s*Turn\s+(\d{1,9})\s*-\s*(User|Chatbot)\s*:", re.IGNORECASE)


@dataclass(frozen=True)
class Source:
    """An input's name (``policy``, ``conversation``) and, when read from one, its file."""

    name: str
    path: str | None = None

    def whole(self) -> str:
        """The input as a whole: ``policy`` or ``rules.txt``."""
        return self.path or self.name

    def line(self, number: int) -> str:
        """One line of a text input: ``conversation line 3`` or ``chat.txt:3``."""
        return f"{self.path}:{number}" if self.path else f"{self.name} line {number}"

    def item(self, index: int, field: str | None = None) -> str:
        """One element of a list input: ``conversation[2].role`` or ``chat.json: [2].role``."""
        where = f"[{index}]" + (f".{field}" if field else "")
        return f"{self.path}: {where}" if self.path else f"{self.name}{where}"


def policy_rules(policy: object, *, source: Source | None = None) -> dict[int, str]:
    """``{rule number: rule text}`` of the ``N. text`` lines, in the policy's order.

    Only lines after a ``Rules:`` header count when there is one (a numbered preamble is not
    rules); indented lines continue a rule; a number used twice is a ``DataError``.
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
    for index, line in enumerate(lines[start:], start=start):
        match = _RULE.match(line)
        if match:
            number = int(match.group(1))
            if number < 1:
                raise DataError(f"{source.line(index + 1)}: rule {number}: rules are numbered from 1")
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


def conversation_text(conversation: object, *, source: Source | None = None) -> str:
    """The benchmark's text form of ``conversation``; a ``DataError`` names the wrong message or line."""
    source = source or Source("conversation")
    if isinstance(conversation, str):
        return _check_turn_text(conversation, source)
    if isinstance(conversation, Sequence) and not isinstance(conversation, bytes | bytearray):
        return _messages_to_text(conversation, source)
    raise DataError(
        f"{source.whole()}: expected 'Turn N - User: ...' text or a list of chat messages, "
        f"got {type(conversation).__name__}"
    )


def _check_turn_text(text: str, source: Source) -> str:
    """``text`` with surrounding whitespace removed, once its turns are checked."""
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


def _messages_to_text(messages: Sequence[Any], source: Source) -> str:
    """Chat messages as ``Turn N - User/Chatbot: content`` lines (a reply shares its user turn's N).

    Leading ``system`` messages are dropped (benchmark conversations have none, and a system
    prompt is not what the chatbot said); a later one is rejected.
    """
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


def guard_case(
    policy: object,
    conversation: object,
    *,
    framework: object = "",
    policy_source: Source | None = None,
    conversation_source: Source | None = None,
) -> Case:
    """The ``Case`` a guard checks; a bad input is a one-line ``DataError`` naming where.

    Every rule becomes ``decisive`` with no pairings, so no per-rule judge sees the rules that
    modify its own: per-policy is the natural form to deploy.
    """
    rules = policy_rules(policy, source=policy_source)
    text = conversation_text(conversation, source=conversation_source)
    if not isinstance(framework, str):
        raise DataError(f"framework: expected a string, got {type(framework).__name__}")
    policy_text = cast(str, policy)  # policy_rules checked it
    entries = [RubricEntry(rule=number, text=rule, type="decisive") for number, rule in rules.items()]
    digest = hashlib.sha256("\0".join((policy_text, text, framework)).encode("utf-8")).hexdigest()[:12]
    return Case(
        id=f"guard-{digest}",
        domain=GUARD_DOMAIN,
        level="L2" if framework.strip() else "L0",
        conversation=text,
        policy=policy_text,
        framework=framework.strip(),
        ground_truth_violations=[],
        rubric=Rubric(non_violations=entries),
    )


#: What a guard judges: the whole conversation, or only its last message in the context of the earlier ones.
SCOPES = ("conversation", "last-turn")


def last_turn_case(case: Case) -> Case:
    """``case`` with its conversation followed by a line telling the judge to judge only the last
    message (the earlier ones are its context): the scope is said in the prompt the program sends."""
    turns = [line for line in case.conversation.splitlines() if _TURN.match(line)]
    last = turns[-1].split(":", 1)[0].strip() if turns else "the last message"
    note = (
        f"[Scope: judge only the last message ({last}); the earlier messages are its context. "
        "A rule is violated only if that last message breaks it.]"
    )
    conversation = f"{case.conversation}\n\n{note}"
    digest = hashlib.sha256(f"{case.id}\0last-turn".encode()).hexdigest()[:12]
    return case.model_copy(update={"conversation": conversation, "id": f"guard-{digest}"})
