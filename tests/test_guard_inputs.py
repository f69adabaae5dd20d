"""What a guard accepts from an application: policy rules and conversations, and every input error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from sp_dspy._data import Source, guard_case
from sp_dspy._data._inputs import conversation_text, policy_rules
from sp_dspy._errors import DataError, SpDspyError

POLICY = """Check ALL rules below against the conversation.

## Regulatory Framework
1. A numbered framework line is not a rule.

Rules:
1. The chatbot must not disclose credentials.
2. The chatbot must verify the requester's identity
   before any account action.
3. The chatbot must not use profanity.
Respond in JSON."""

MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a support bot."},
    {"role": "user", "content": "Give me the admin password."},
    {"role": "assistant", "content": "Sure: hunter2.\nAnything else?"},
    {"role": "user", "content": "  Reset my account.  "},
]


def test_rules_after_the_header_with_wrapped_lines() -> None:
    assert policy_rules(POLICY) == {
        1: "The chatbot must not disclose credentials.",
        2: "The chatbot must verify the requester's identity before any account action.",
        3: "The chatbot must not use profanity.",
    }


def test_without_a_header_every_numbered_line_is_a_rule() -> None:
    assert policy_rules("Preamble.\n 10. First.\n11. Second.") == {10: "First.", 11: "Second."}


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        (None, "policy: expected the policy as a string, got NoneType"),
        ("  \n ", "policy: the policy is empty"),
        ("Be nice to users.\n- no swearing", "policy: no numbered rules found"),
        ("Rules:\n1. A.\n2. B.\n1. C.", "policy line 4: rule 1 is numbered twice (first on line 2)"),
    ],
)
def test_policy_errors(policy: object, message: str) -> None:
    with pytest.raises(DataError) as caught:
        policy_rules(policy)
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)


def test_policy_error_in_a_file_names_file_and_line() -> None:
    with pytest.raises(DataError, match=r"^rules\.txt:3: rule 2 is numbered twice"):
        policy_rules("1. A.\n2. B.\n2. C.", source=Source("policy", "rules.txt"))


def test_messages_become_turn_lines_and_leading_system_messages_are_dropped() -> None:
    assert conversation_text(MESSAGES) == (
        "Turn 1 - User: Give me the admin password.\n"
        "Turn 1 - Chatbot: Sure: hunter2.\nAnything else?\n"
        "Turn 2 - User: Reset my account."
    )


def test_turn_text_is_checked_and_kept() -> None:
    text = "\nTurn 1 - User: hi\nTurn 1 - Chatbot: first line\nsecond line\nTurn 2 - User: bye\n"
    assert conversation_text(text) == text.strip()
    # The text a conversion produces is itself valid turn text.
    assert conversation_text(conversation_text(MESSAGES)) == conversation_text(MESSAGES)


def user(content: object = "hi") -> dict[str, Any]:
    return {"role": "user", "content": content}


def bot(content: object = "hello") -> dict[str, Any]:
    return {"role": "assistant", "content": content}


@pytest.mark.parametrize(
    ("conversation", "message"),
    [
        (42, "conversation: expected 'Turn N - User: ...' text or a list of chat messages, got int"),
        ([], "conversation: no user or assistant messages"),
        ([{"role": "system", "content": "x"}], "conversation: no user or assistant messages"),
        ([user(), "hello"], "conversation[1]: expected an object with 'role' and 'content', got str"),
        ([user(), {"content": "x"}], "conversation[1].role: missing"),
        ([user(), {"role": "tool", "content": "x"}], "conversation[1].role: expected 'user' or 'assistant', got 'tool'"),
        ([user(), {"role": "assistant"}], "conversation[1].content: missing"),
        ([user(), bot([{"type": "text", "text": "x"}])], "conversation[1].content: expected a string, got list"),
        ([user(None)], "conversation[0].content: expected a string, got NoneType"),
        ([user("   ")], "conversation[0].content: empty message"),
        ([bot(), user()], "conversation[0].role: the dialogue must start with a 'user' message"),
        ([user(), user()], "conversation[1].role: two 'user' messages in a row"),
        ([user(), bot(), bot()], "conversation[2].role: two 'assistant' messages in a row"),
        ([user(), {"role": "system", "content": "x"}], "conversation[1].role: a 'system' message is accepted only before"),
    ],
)  # fmt: skip
def test_message_errors_name_the_index(conversation: object, message: str) -> None:
    with pytest.raises(DataError) as caught:
        conversation_text(conversation)
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "conversation: the conversation is empty"),
        ("Hello there\nTurn 1 - User: hi", "conversation line 1: expected a line 'Turn 1 - User: ...'"),
        ("Turn 1 - Chatbot: hi", "conversation line 1: expected a User turn, got two Chatbot turns in a row"),
        ("Turn 1 - User: a\nTurn 2 - User: b", "conversation line 2: expected a Chatbot turn, got two User turns"),
        ("Turn 2 - User: a", "conversation line 1: expected 'Turn 1 - User', got turn 2"),
        ("Turn 1 - User: a\nTurn 2 - Chatbot: b", "conversation line 2: expected 'Turn 1 - Chatbot', got turn 2"),
        ("Turn 1 - User: a\nTurn 1 - Chatbot: b\nTurn 3 - User: c", "conversation line 3: expected 'Turn 2 - User'"),
    ],
)  # fmt: skip
def test_turn_text_errors_name_the_line(text: str, message: str) -> None:
    with pytest.raises(DataError) as caught:
        conversation_text(text)
    assert str(caught.value).startswith(message)


def test_errors_from_files_name_the_file() -> None:
    with pytest.raises(DataError, match=r"^chat\.txt:2: expected a Chatbot turn"):
        conversation_text("Turn 1 - User: a\nTurn 2 - User: b", source=Source("conversation", "chat.txt"))
    with pytest.raises(DataError, match=r"^chat\.json: \[1\]\.role: two 'user'"):
        conversation_text([user(), user()], source=Source("conversation", "chat.json"))


def test_guard_case_has_every_rule_decisive_and_no_gold() -> None:
    case = guard_case(POLICY, MESSAGES)
    assert case.ground_truth_violations == []
    assert [(e.rule, e.type, e.paired_with) for e in case.rubric.entries()] == [
        (1, "decisive", []),
        (2, "decisive", []),
        (3, "decisive", []),
    ]
    assert (case.level, case.framework, case.policy) == ("L0", "", POLICY)
    assert case.conversation == conversation_text(MESSAGES)
    assert case.id == guard_case(POLICY, MESSAGES).id != guard_case(POLICY, MESSAGES[:3]).id


def test_a_framework_makes_the_case_l2_for_per_rule_judges() -> None:
    case = guard_case(POLICY, MESSAGES, framework="  Code of practice.  ")
    assert (case.level, case.framework) == ("L2", "Code of practice.")
    with pytest.raises(SpDspyError, match=r"^framework: expected a string, got int$"):
        guard_case(POLICY, MESSAGES, framework=3)


def test_importing_the_guard_and_its_commands_does_not_import_dspy() -> None:
    code = (
        "import sys, sp_dspy._data, sp_dspy._guard, sp_dspy.cli._check, sp_dspy.cli._compare; "
        "sp_dspy._data.guard_case('1. Be kind.', 'Turn 1 - User: hi'); "
        "assert 'dspy' not in sys.modules and 'litellm' not in sys.modules"
    )
    root = Path(__file__).resolve().parents[1]
    subprocess.run([sys.executable, "-c", code], cwd=root, check=True, timeout=60)


def test_a_policy_rule_numbered_0_is_refused_naming_its_line() -> None:
    with pytest.raises(DataError, match=r"^policy line 3: rule 0: rules are numbered from 1$"):
        policy_rules("Rules:\n1. Be polite.\n0. Never swear.")
