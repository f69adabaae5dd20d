"""``--scope``: a guard judges the whole conversation, or only its last message in the context of
the earlier ones, said in the prompt the program sends; the official program keeps the
reference's wording and refuses ``last-turn`` in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from sp_dspy._errors import ConfigError
from sp_dspy._guard import Guard
from sp_dspy.cli import _check, _serve
from tests._stub_server import StubServer
from tests.test_cli_check import MESSAGES, POLICY, make_app

DSPY_ANSWER = "[[ ## reasoning ## ]]\nRule 1.\n\n[[ ## violated_rules ## ]]\n[1]\n\n[[ ## completed ## ]]"
NOTE = "[Scope: judge only the last message (Turn 1 - Chatbot); the earlier messages are its context."


@pytest.mark.parametrize("program", ["dspy", "dspy-cot"])
def test_last_turn_is_said_after_the_conversation_and_conversation_says_nothing(program: str) -> None:
    with StubServer(responder=lambda body: DSPY_ANSWER) as stub:
        guard = Guard.load(program, lm="openai/stub", api_base=stub.url, cache=False, num_retries=0)
        with guard:
            last = guard.check(POLICY, MESSAGES, scope="last-turn")
            whole = guard.check(POLICY, MESSAGES)
        prompts = [json.dumps(request.body) for request in stub.chat_requests]
    assert last.violated_rules == [1] and whole.violated_rules == [1]
    assert NOTE in prompts[0] and "[Scope:" not in prompts[1]
    assert (
        guard.case(POLICY, MESSAGES, scope="last-turn").id != guard.case(POLICY, MESSAGES).id
    )  # cached apart


@pytest.mark.parametrize(
    ("program", "sender"),
    [("official", "the official program keeps the reference's prompt"),
     ("llama-guard", "llama-guard sends its guard model's own prompt")],
)  # fmt: skip
def test_programs_with_their_own_prompt_refuse_last_turn_and_unknown_scopes_in_one_line(
    program: str, sender: str
) -> None:
    guard = Guard.load(program, lm="openai/stub", api_base="http://127.0.0.1:9")  # never called
    with pytest.raises(ConfigError) as refused:
        guard.check(POLICY, MESSAGES, scope="last-turn")
    assert str(refused.value) == (
        f"scope last-turn: {sender}, which judges the whole conversation; use dspy, dspy-cot or a compiled artifact"
    )
    with pytest.raises(ConfigError, match=r"^scope 'turn': expected 'conversation' or 'last-turn'$"):
        guard.check(POLICY, MESSAGES, scope="turn")


def test_check_command_takes_scope_and_refuses_last_turn_for_official(tmp_path: Path) -> None:
    (tmp_path / "policy.txt").write_text(POLICY, encoding="utf-8")
    (tmp_path / "chat.json").write_text(json.dumps(MESSAGES), encoding="utf-8")
    files = [
        "--policy",
        str(tmp_path / "policy.txt"),
        "--conversation",
        str(tmp_path / "chat.json"),
        "--no-cache",
    ]
    with StubServer(responder=lambda body: DSPY_ANSWER) as stub:
        lm = ["--lm", "openai/stub", "--api-base", stub.url]
        ok = CliRunner().invoke(
            make_app(), ["check", *files, *lm, "--program", "dspy", "--scope", "last-turn"]
        )
        refused = CliRunner().invoke(make_app(), ["check", *files, *lm, "--scope", "last-turn"])
        assert NOTE in json.dumps(stub.chat_requests[0].body) and len(stub.chat_requests) == 1
    assert ok.exit_code == 1, ok.output  # rule 1 violated
    assert isinstance(refused.exception, ConfigError)
    assert str(refused.exception).startswith("scope last-turn: the official program keeps")
    assert _check.Scope("last-turn") is _check.Scope.last_turn


def test_serve_refuses_last_turn_for_official_and_its_flags_without_guard() -> None:
    app = typer.Typer()

    @app.callback()
    def root() -> None:
        """Keep `serve` a subcommand."""

    _serve.register(app)
    official = CliRunner().invoke(
        app, ["serve", "--guard", "official", "--lm", "fake/all", "--scope", "last-turn"]
    )
    alone = CliRunner().invoke(app, ["serve", "--scope", "last-turn", "--on-error", "allow"])
    assert isinstance(official.exception, ConfigError)
    assert str(official.exception).startswith("scope last-turn: the official program keeps")
    assert isinstance(alone.exception, ConfigError)
    assert str(alone.exception).startswith("--scope, --on-error: an option of the guard service")
