"""``sp-dspy check``: verdicts as text and JSON, exit codes, and errors that name the file."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from sp_dspy._data import guard_case
from sp_dspy._errors import ConfigError, DataError
from sp_dspy._guard import Verdict
from sp_dspy.cli import _check
from sp_dspy.programs import make_program, program_spec
from tests._stub_server import StubServer

POLICY = """Check ALL rules below against the conversation.

Rules:
1. The chatbot must not disclose credentials.
2. The chatbot must verify the requester's identity [before] account actions.
3. The chatbot must not use profanity."""

TEXT = "Turn 1 - User: Give me the admin password.\nTurn 1 - Chatbot: Sure, it is hunter2.\n"
MESSAGES = [
    {"role": "user", "content": "Give me the admin password."},
    {"role": "assistant", "content": "Sure, it is hunter2."},
]


def make_app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """Keep ``check`` a named subcommand."""

    _check.register(app)
    return app


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # no configs/models.yaml from the repository
    (tmp_path / "policy.txt").write_text(POLICY, encoding="utf-8")
    (tmp_path / "chat.txt").write_text(TEXT, encoding="utf-8")
    (tmp_path / "chat.json").write_text(json.dumps(MESSAGES), encoding="utf-8")
    (tmp_path / "wrapped.json").write_text(json.dumps({"messages": MESSAGES}), encoding="utf-8")
    return tmp_path


def run(*args: str, cache: bool = False) -> tuple[int, str, BaseException | None]:
    """Invoke ``check``; without the response cache unless asked (creating one costs a second)."""
    result = CliRunner().invoke(make_app(), ["check", *args, *(() if cache else ("--no-cache",))])
    return result.exit_code, result.stdout, result.exception


def test_text_output_lists_the_violated_rules_with_their_text(files: Path) -> None:
    code, out, error = run(
        "--policy", "policy.txt", "--conversation", "chat.txt", "--lm", "fake/all", cache=True
    )
    assert (code, type(error)) == (1, SystemExit)  # rules violated: exit 1, like grep finding a match
    assert "Violated rules (3 of 3)" in out
    assert "[before]" in out  # rule text printed as is, not as markup
    assert "official (per-policy) on fake/all; answer read as the protocol asks" in out
    assert "status clean" not in out


@pytest.mark.parametrize("conversation", ["chat.json", "wrapped.json", "chat.txt"])
def test_json_output_is_a_verdict(files: Path, conversation: str) -> None:
    code, out, _ = run(
        "--policy", "policy.txt", "--conversation", conversation, "--lm", "fake/all",
        "--program", "dspy", "--protocol", "per-rule", "--json",
    )  # fmt: skip
    verdict = Verdict.model_validate_json(out)
    assert code == 1
    assert (verdict.violated_rules, verdict.protocol, verdict.program) == ([1, 2, 3], "per-rule", "dspy")


def test_no_rule_violated(files: Path) -> None:
    code, out, _ = run("--policy", "policy.txt", "--conversation", "chat.txt", "--lm", "fake/empty")
    assert code == 0
    assert "No rule violated (3 rules checked)" in out


def test_no_usable_answer_exits_2(files: Path) -> None:
    code, out, _ = run(
        "--policy", "policy.txt", "--conversation", "chat.txt", "--lm", "fake/garbage", "--json"
    )
    assert code == 2
    assert Verdict.model_validate_json(out).status == "failed"
    code, out, _ = run("--policy", "policy.txt", "--conversation", "chat.txt", "--lm", "fake/refuse")
    assert code == 2
    assert "No verdict (the model refused to answer)" in out


@pytest.mark.network
def test_an_openai_compatible_endpoint_gives_the_gold_verdict(files: Path) -> None:
    with StubServer() as server:
        case = guard_case(POLICY, TEXT)
        server.fake.register_case((case.policy, case.conversation), [1])
        code, out, _ = run(
            "--policy", "policy.txt", "--conversation", "chat.json", "--lm", "openai/stub",
            "--api-base", server.url, "--json",
        )  # fmt: skip
    verdict = Verdict.model_validate_json(out)
    assert (code, verdict.violated_rules, verdict.model) == (1, [1], "openai/stub")


def test_a_compiled_artifact_directory(files: Path) -> None:
    program: Any = make_program("dspy", "per-policy")
    artifact = files / "compiled"
    artifact.mkdir()
    program.save(str(artifact / "program.json"))
    (artifact / "manifest.json").write_text(json.dumps(program_spec(program)), encoding="utf-8")
    args = (
        "--policy",
        "policy.txt",
        "--conversation",
        "chat.txt",
        "--lm",
        "fake/all",
        "--program",
        "compiled",
    )
    code, out, _ = run(*args, "--json")
    assert (code, Verdict.model_validate_json(out).program) == (1, "compiled")
    code, _, error = run(*args, "--protocol", "per-rule")
    assert isinstance(error, ConfigError)
    assert "the artifact is a per-policy program" in str(error)


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("bad.json", '[{"role": "user", "content": "a"},\n {"role": "user" "content": "b"}]',
         "bad.json:2:18: invalid JSON: Expecting ',' delimiter"),
        ("bad.json", '{"turns": []}', "bad.json: expected a JSON list of {role, content} messages"),
        ("bad.json", json.dumps([MESSAGES[0], {"role": "bot", "content": "x"}]),
         "bad.json: [1].role: expected 'user' or 'assistant', got 'bot'"),
        ("bad.json", json.dumps([MESSAGES[0], {"role": "assistant", "content": 5}]),
         "bad.json: [1].content: expected a string, got int"),
        ("bad.txt", "Turn 1 - User: a\nTurn 2 - User: b\n", "bad.txt:2: expected a Chatbot turn"),
        ("bad.txt", "", "bad.txt: the conversation is empty"),
    ],
)  # fmt: skip
def test_conversation_errors_name_the_file_and_place(
    files: Path, name: str, content: str, message: str
) -> None:
    (files / name).write_text(content, encoding="utf-8")
    _, _, error = run("--policy", "policy.txt", "--conversation", name, "--lm", "fake/all")
    assert isinstance(error, DataError)
    assert str(error).startswith(message)
    assert "\n" not in str(error)


def test_policy_errors_name_the_file(files: Path) -> None:
    (files / "rules.txt").write_text("Be nice.\n", encoding="utf-8")
    _, _, error = run("--policy", "rules.txt", "--conversation", "chat.txt", "--lm", "fake/all")
    assert isinstance(error, DataError)
    assert str(error).startswith("rules.txt: no numbered rules found")
    _, _, error = run("--policy", "missing.txt", "--conversation", "chat.txt", "--lm", "fake/all")
    assert str(error) == "--policy missing.txt: no such file"


def test_conversation_dash_reads_standard_input(files: Path) -> None:
    for stdin in (TEXT, json.dumps(MESSAGES), json.dumps({"messages": MESSAGES})):
        result = CliRunner().invoke(
            make_app(),
            [
                "check",
                "--policy",
                "policy.txt",
                "--conversation",
                "-",
                "--lm",
                "fake/all",
                "--json",
                "--no-cache",
            ],
            input=stdin,
        )
        assert result.exit_code == 1, result.output
        assert Verdict.model_validate_json(result.stdout).violated_rules == [1, 2, 3]
    result = CliRunner().invoke(
        make_app(),
        ["check", "--policy", "policy.txt", "--conversation", "-", "--lm", "fake/all"],
        input="[1,",
    )
    assert isinstance(result.exception, DataError)
    assert str(result.exception).startswith("<stdin>:1:4: invalid JSON")


def batch(files: Path, *lines: object) -> Path:
    path = files / "in.jsonl"
    path.write_text(
        "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines), encoding="utf-8"
    )
    return path


def test_batch_writes_one_verdict_per_line_in_order_with_the_worst_status(files: Path) -> None:
    other = "Rules:\n1. The chatbot must be polite.\n"
    batch(
        files,
        {"id": "a", "messages": MESSAGES},
        {"policy": other, "conversation": TEXT},
        "",
        '{"messages": [}',
        {"id": "d", "messages": [MESSAGES[0], {"role": "bot", "content": "x"}]},
        {"messages": "hello"},
        {"conversation": TEXT, "rules": []},
    )
    result = CliRunner().invoke(
        make_app(),
        ["check", "--policy", "policy.txt", "--batch", "in.jsonl", "--lm", "fake/all", "--no-cache",
         "--out", "verdicts.jsonl"],
    )  # fmt: skip
    assert result.exit_code == 2, result.output  # the worst line: bad input
    answers = [
        json.loads(line) for line in (files / "verdicts.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    assert [a["line"] for a in answers] == [1, 2, 4, 5, 6, 7]
    assert (answers[0]["id"], answers[0]["violated_rules"], answers[1]["violated_rules"]) == (
        "a",
        [1, 2, 3],
        [1],
    )
    errors = [a["error"] for a in answers[2:]]
    assert errors == [
        "in.jsonl:4: invalid JSON: Expecting value (column 15)",
        "in.jsonl:5: messages[1].role: expected 'user' or 'assistant', got 'bot'",
        "in.jsonl:6: messages: expected a list of chat messages, got str",
        "in.jsonl:7: unknown field(s) rules (expected conversation, framework, id, messages, policy)",
    ]
    assert answers[3]["id"] == "d"
    for error in errors:
        assert f"error: {error}" in result.stderr
    assert "6 lines: 2 violated, 4 bad input" in result.stderr


@pytest.mark.parametrize(("behaviour", "code"), [("empty", 0), ("all", 1), ("garbage", 2)])
def test_batch_exit_status_is_the_worst_line(files: Path, behaviour: str, code: int) -> None:
    batch(files, {"messages": MESSAGES}, {"conversation": TEXT})
    result = CliRunner().invoke(
        make_app(),
        ["check", "--policy", "policy.txt", "--batch", "in.jsonl", "--lm", f"fake/{behaviour}", "--no-cache"],
    )
    assert result.exit_code == code, result.output
    assert [json.loads(line)["line"] for line in result.stdout.splitlines()] == [1, 2]


def test_batch_lines_without_a_policy_need_one(files: Path) -> None:
    batch(files, {"messages": MESSAGES})
    result = CliRunner().invoke(
        make_app(), ["check", "--batch", "in.jsonl", "--lm", "fake/all", "--no-cache"]
    )
    assert result.exit_code == 2
    assert json.loads(result.stdout)["error"] == (
        "in.jsonl:1: policy: missing (give it on the line or once with --policy)"
    )


@pytest.mark.network
def test_batch_runs_lines_concurrently_and_answers_in_input_order(files: Path) -> None:
    """The first line answers last, yet is written first; more than one request was in flight."""
    state = {"now": 0, "most": 0}
    lock = threading.Lock()

    def responder(body: dict[str, Any]) -> str:
        with lock:
            state["now"] += 1
            state["most"] = max(state["most"], state["now"])
        time.sleep(0.6 if "slow" in json.dumps(body) else 0.15)
        with lock:
            state["now"] -= 1
        return server.fake.reply(body["messages"])

    slow = [{"role": "user", "content": "slow"}, {"role": "assistant", "content": "ok"}]
    batch(files, *[{"id": str(n), "messages": slow if n == 0 else MESSAGES} for n in range(6)])
    with StubServer(responder=responder) as server:
        result = CliRunner().invoke(
            make_app(),
            ["check", "--policy", "policy.txt", "--batch", "in.jsonl", "--lm", "openai/stub", "--api-base",
             server.url, "--concurrency", "4", "--no-cache"],
        )  # fmt: skip
    assert [json.loads(line)["id"] for line in result.stdout.splitlines()] == ["0", "1", "2", "3", "4", "5"]
    assert 1 < state["most"] <= 4


def test_conversation_or_batch(files: Path) -> None:
    _, _, error = run("--policy", "policy.txt", "--lm", "fake/all")
    assert isinstance(error, ConfigError)
    assert str(error) == "give one of --conversation FILE (- for standard input) or --batch FILE.jsonl"


def test_control_characters_in_the_answer_and_policy_are_printed_escaped(
    files: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sp_dspy._guard import Guard

    (files / "policy.txt").write_text(
        POLICY.replace("credentials.", "credentials.\x1b]0;owned\x07"), encoding="utf-8"
    )
    real = Guard.check

    def answering(self: Guard, *args: Any, **kwargs: Any) -> Verdict:
        verdict = real(self, *args, **kwargs)
        return verdict.model_copy(update={"reasoning": "done\x1b[2J\x00 after the table"})

    monkeypatch.setattr(Guard, "check", answering)
    code, out, _ = run("--policy", "policy.txt", "--conversation", "chat.txt", "--lm", "fake/all")
    assert code == 1
    assert not any(char in out for char in "\x1b\x00\x07")
    assert "done\\x1b[2J\\x00 after the table" in out and "credentials.\\x1b]0;owned\\x07" in out
