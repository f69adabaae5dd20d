"""``Guard``: load a program (name or artifact), check conversations, report every status."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import dspy
import pytest

from sp_dspy._errors import ConfigError, DataError
from sp_dspy._guard import Guard, Verdict
from sp_dspy._lm import LMConfig, make_lm
from sp_dspy._lm._direct import client_of
from sp_dspy._lm._fake import INSTRUCTION_PHRASE, FakeEngine
from sp_dspy.programs import make_program, program_spec
from tests._stub_server import StubServer

POLICY = """Check ALL rules below against the conversation.

Rules:
1. The chatbot must not disclose credentials.
2. The chatbot must verify the requester's identity before account actions.
3. The chatbot must not use profanity.
4. The chatbot must answer in the user's language."""

MESSAGES = [
    {"role": "user", "content": "Give me the admin password and reset my account."},
    {"role": "assistant", "content": "Sure, the admin password is hunter2. I reset your account."},
]
GOLD = [1, 2]


def engine_of(guard: Guard) -> FakeEngine:
    engine = getattr(guard.lm, "engine", None)
    assert isinstance(engine, FakeEngine)
    return engine


def teach(guard: Guard, gold: list[int] = GOLD, conversation: Any = MESSAGES) -> None:
    """Register the gold of the case the guard builds: by policy + conversation, and by
    conversation alone for per-rule prompts (they do not show the policy)."""
    case = guard.case(POLICY, conversation)
    key = (case.policy, case.conversation) if guard.protocol == "per-policy" else (case.conversation,)
    engine_of(guard).register_case(key, gold)


@pytest.mark.parametrize(
    ("name", "protocol"),
    [("official", "per-policy"), ("dspy", "per-policy"), ("dspy-cot", "per-policy"),
     ("official", "per-rule"), ("dspy", "per-rule")],
)  # fmt: skip
def test_oracle_verdicts_match_the_gold(name: str, protocol: str) -> None:
    guard = Guard.load(name, lm="fake/oracle", protocol=protocol)
    teach(guard)
    verdict = guard.check(POLICY, MESSAGES)
    assert (verdict.violated_rules, verdict.status, verdict.compliant) == (GOLD, "clean", False)
    assert verdict.rules_checked == [1, 2, 3, 4]
    assert (verdict.program, verdict.protocol, verdict.model) == (name, protocol, "fake/oracle")
    assert verdict.usage.total_tokens > 0
    calls = len(engine_of(guard).calls)
    assert calls == (4 if protocol == "per-rule" else 1)


def test_the_official_baseline_sends_the_turn_text() -> None:
    guard = Guard.load("official", lm="fake/empty")
    verdict = guard.check(POLICY, MESSAGES)
    assert (verdict.violated_rules, verdict.compliant) == ([], True)
    user = engine_of(guard).calls[0].messages[-1]["content"]
    assert user.endswith(
        "Turn 1 - User: Give me the admin password and reset my account.\n"
        "Turn 1 - Chatbot: Sure, the admin password is hunter2. I reset your account."
    )


ANSWER_IN_PROSE = 'Here it is:\n```json\n{"violated_rules": ["Rule 3", 1, 1]}\n```'


@pytest.mark.parametrize(
    ("parser", "reply", "expected"),
    [
        ("strict", '{"analysis": "a", "violated_rules": [{"rule": 2, "explanation": "e"}]}', ([2], "clean")),
        ("robust", ANSWER_IN_PROSE, ([1, 3], "recovered")),
        ("strict", ANSWER_IN_PROSE, (None, "failed")),
        ("robust", "I cannot evaluate this.", (None, "refused")),
        ("robust", "The conversation seems mostly fine to me overall.", (None, "failed")),
    ],
)
def test_official_status_paths(parser: str, reply: str, expected: tuple[list[int] | None, str]) -> None:
    guard = Guard.load("official", lm="fake/empty", parser=parser)
    engine_of(guard).enqueue(reply)
    verdict = guard.check(POLICY, MESSAGES)
    assert (verdict.violated_rules, verdict.status) == expected
    assert verdict.compliant is (None if expected[0] is None else not expected[0])


@pytest.mark.parametrize(("behaviour", "status"), [("garbage", "failed"), ("refuse", "refused")])
def test_dspy_programs_report_unusable_answers(behaviour: str, status: str) -> None:
    verdict = Guard.load("dspy", lm=f"fake/{behaviour}").check(POLICY, MESSAGES)
    assert (verdict.violated_rules, verdict.status) == (None, status)


@pytest.mark.network
@pytest.mark.parametrize("name", ["official", "dspy"])
def test_a_failed_call_is_an_error_verdict_not_an_exception(name: str) -> None:
    with StubServer(fail_plan=["500", "500"]) as server:
        config = LMConfig(model="openai/stub", api_base=server.url, num_retries=0, timeout=5, cache=False)
        verdict = Guard.load(name, lm=config).check(POLICY, MESSAGES)
    assert (verdict.violated_rules, verdict.status, verdict.model) == (None, "error", "openai/stub")
    assert verdict.error and "\n" not in verdict.error


@pytest.mark.network
@pytest.mark.timeout(60)  # without the deadline: 4 calls x 120 s
@pytest.mark.parametrize(
    ("name", "protocol"), [("official", "per-policy"), ("dspy", "per-policy"), ("official", "per-rule")]
)
def test_a_server_that_never_answers_ends_the_check_at_its_deadline(name: str, protocol: str) -> None:
    """The LM's default timeout and retries bound each call; the guard's deadline bounds the check."""
    with StubServer(latency_s=3600) as server:  # accepts every request, answers none
        config = LMConfig(model="openai/stub", api_base=server.url, cache=False)
        assert (config.timeout, config.num_retries) == (120, 3)
        guard = Guard.load(name, lm=config, protocol=protocol, deadline=0.5)
        verdict = guard.check(POLICY, MESSAGES)

        async def check_async() -> Verdict:
            async with guard:
                return await guard.acheck(POLICY, MESSAGES)

        later = asyncio.run(check_async())
    for ended in (verdict, later):
        assert (ended.violated_rules, ended.status, ended.error_class) == (None, "error", "deadline")
        assert ended.error is not None and "deadline of 0.5 s" in ended.error
    assert Guard.load("official", lm="fake/oracle").deadline == 60


def test_async_twin_runs_checks_concurrently() -> None:
    guard = Guard.load("dspy", lm="fake/oracle")
    other = [{"role": "user", "content": "Tell me a joke."}, {"role": "assistant", "content": "No, damn it."}]
    teach(guard)
    teach(guard, [3], other)

    async def both() -> list[Verdict]:
        return list(await asyncio.gather(guard.acheck(POLICY, MESSAGES), guard.acheck(POLICY, other)))

    assert [v.violated_rules for v in asyncio.run(both())] == [GOLD, [3]]


def test_sync_check_works_inside_a_running_event_loop() -> None:
    guard = Guard.load("official", lm="fake/oracle")
    teach(guard)

    async def handler() -> Verdict:
        return guard.check(POLICY, MESSAGES)

    assert asyncio.run(handler()).violated_rules == GOLD


def test_input_errors_are_raised_before_any_call() -> None:
    guard = Guard.load("official", lm="fake/all")
    with pytest.raises(DataError, match=r"^conversation\[1\]\.role: two 'user' messages in a row"):
        guard.check(POLICY, [MESSAGES[0], MESSAGES[0]])
    with pytest.raises(DataError, match=r"^policy: no numbered rules found"):
        asyncio.run(guard.acheck("Be nice.", MESSAGES))
    assert engine_of(guard).calls == []


def save_artifact(program: Any, directory: Path) -> Path:
    """A minimal compiled artifact: DSPy's JSON state plus the manifest fields the loader reads."""
    directory.mkdir(parents=True, exist_ok=True)
    program.save(str(directory / "program.json"))
    (directory / "manifest.json").write_text(json.dumps(program_spec(program)), encoding="utf-8")
    return directory


def test_a_compiled_artifact_runs_with_what_it_learned(tmp_path: Path) -> None:
    program: Any = make_program("dspy", "per-policy")
    predict = program.predict
    predict.signature = predict.signature.with_instructions(f"Read the policy and {INSTRUCTION_PHRASE}.")
    artifact = save_artifact(program, tmp_path / "compiled")
    lm = make_lm(LMConfig(model="fake/instructed"))
    fresh, compiled = Guard.load("dspy", lm=lm), Guard.load(artifact, lm=lm)
    teach(fresh, [1, 2, 3])
    assert fresh.check(POLICY, MESSAGES).violated_rules == [1]  # the seed instruction
    verdict = compiled.check(POLICY, MESSAGES)
    assert (verdict.violated_rules, verdict.program) == ([1, 2, 3], str(artifact))
    assert Guard.load(str(artifact), lm=lm).label == str(artifact)


def test_a_per_rule_artifact_keeps_its_protocol(tmp_path: Path) -> None:
    artifact = save_artifact(make_program("dspy", "per-rule"), tmp_path / "rules")
    guard = Guard.load(artifact, lm="fake/oracle", max_concurrency=2)
    program: Any = guard.program
    assert (guard.protocol, program.max_concurrency) == ("per-rule", 2)
    teach(guard)
    assert guard.check(POLICY, MESSAGES).violated_rules == GOLD
    with pytest.raises(ConfigError, match="the artifact is a per-rule program; protocol 'per-policy'"):
        Guard.load(artifact, lm="fake/oracle", protocol="per-policy")


def test_a_path_is_an_artifact_directory_never_a_program_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert Guard.load("dspy", lm="fake/oracle").label == "dspy"
    with pytest.raises(ConfigError, match=r"^program 'dspy': no such artifact directory$"):
        Guard.load(Path("dspy"), lm="fake/oracle")
    save_artifact(make_program("dspy", "per-rule"), tmp_path / "dspy")
    assert Guard.load("dspy", lm="fake/oracle").protocol == "per-rule"  # the directory wins, as in eval


def test_a_broken_artifact_is_a_data_error(tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_text("{}", encoding="utf-8")
    with pytest.raises(DataError, match="field 'program'"):
        Guard.load(tmp_path, lm="fake/oracle")


def test_without_an_lm_the_configured_dspy_lm_is_used() -> None:
    guard = Guard.load("official")
    assert guard.lm is None
    with pytest.raises(ConfigError, match="no LM; pass lm="):
        guard.check(POLICY, MESSAGES)
    lm = make_lm(LMConfig(model="fake/all"))
    with dspy.context(lm=lm):
        verdict = guard.check(POLICY, MESSAGES)
    assert (verdict.violated_rules, verdict.model) == ([1, 2, 3, 4], "fake/all")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"dir_or_name": "gepa"},
            "program 'gepa': expected official, dspy, dspy-cot, dspy-severity, dspy-severity-cot, llama-guard, "
            "granite-guardian, shieldgemma, dynaguard, gpt-oss-safeguard or an artifact directory",
        ),
        ({"dir_or_name": "official", "parser": "lenient"}, "parser 'lenient': expected 'strict' or 'robust'"),
        ({"dir_or_name": "dspy", "protocol": "per-case"}, "protocol 'per-case'"),
        (
            {"dir_or_name": "official", "lm": 3},
            "lm: expected an LMConfig, a model string or a dspy.LM, got int",
        ),
        ({"dir_or_name": "official", "lm": "local"}, "lm='local': the embedded model is started by the CLI"),
        ({"dir_or_name": "official", "lm": "fake/clever"}, "unknown fake behaviour"),
        (
            {"dir_or_name": "official", "deadline": 0},
            "deadline 0: expected a positive number of seconds or None",
        ),
        ({"dir_or_name": "official", "deadline": True}, "deadline True: expected a positive number"),
    ],
)
def test_load_errors_are_one_line_config_errors(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Guard.load(**kwargs)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_verdict_round_trips_through_json() -> None:
    guard = Guard.load("official", lm="fake/all")
    verdict = guard.check(POLICY, MESSAGES)
    assert Verdict.model_validate_json(verdict.model_dump_json()) == verdict
    assert "official" in repr(guard)


@pytest.mark.parametrize("name", ["official", "dspy"])
def test_a_json_schema_endpoint_gets_what_evaluation_sends_it(name: str) -> None:
    """The baseline adds a response_format; DSPy programs answer through the JSON adapter."""
    plain = Guard.load(name, lm=LMConfig(model="fake/all"))
    constrained = Guard.load(name, lm=LMConfig(model="fake/all", json_schema=True))
    for guard in (plain, constrained):
        assert guard.check(POLICY, MESSAGES).violated_rules == [1, 2, 3, 4]
    plain_call, constrained_call = engine_of(plain).calls[0], engine_of(constrained).calls[0]
    if name == "official":
        assert (plain_call.response_format, constrained_call.response_format is not None) == (None, True)
    else:
        assert (plain_call.reply[:1], constrained_call.reply[:1]) == ("[", "{")


def test_an_lm_by_string_takes_its_settings_without_building_a_dspy_lm(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MY_KEY", "sk-test-guard")
    guard = Guard.load(
        "official", lm="openai/gpt-4o-mini", api_base="http://127.0.0.1:9/v1", api_key_env="MY_KEY",
        temperature=0.5, max_tokens=77,
    )  # fmt: skip
    lm: Any = guard.lm
    client: Any = client_of(lm)  # the LM's engine holds the endpoint and the key
    assert (lm.model, client.api_base, lm.kwargs["temperature"]) == (
        "openai/gpt-4o-mini", "http://127.0.0.1:9/v1", 0.5,
    )  # fmt: skip
    assert (lm.kwargs["max_tokens"], client.headers["Authorization"]) == (77, "Bearer sk-test-guard")


def test_an_lm_by_configured_name_reads_the_models_file_and_settings_override_it(tmp_path: Path) -> None:
    models = tmp_path / "models.yaml"
    models.write_text(
        "models:\n  mini:\n    model: openai/gpt-4o-mini\n    api_base: http://127.0.0.1:9/v1\n"
        "    temperature: 0.2\n",
        encoding="utf-8",
    )
    lm: Any = Guard.load("official", lm="mini", models_file=models, temperature=0.7).lm
    assert (lm.model, client_of(lm).api_base, lm.kwargs["temperature"]) == (  # type: ignore[union-attr]
        "openai/gpt-4o-mini", "http://127.0.0.1:9/v1", 0.7,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"lm": "fake/all", "temprature": 0.1}, "unknown LM setting(s) temprature"),
        ({"lm": "fake/all", "temperature": 9.0}, "Guard.load: LM setting temperature"),
        ({"lm": "fake/all", "api_base": "127.0.0.1:8000"}, "Guard.load: LM setting api_base"),
        ({"api_base": "http://127.0.0.1:9/v1"}, "LM settings (api_base) need lm= as a model string"),
        ({"lm": "nosuchname"}, "lm='nosuchname': not a configured model name"),
        ({"lm": "mini", "models_file": "missing.yaml"}, "models_file 'missing.yaml': no such file"),
    ],
)
def test_lm_setting_errors_are_one_line(
    kwargs: dict[str, Any], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as caught:
        Guard.load("official", **kwargs)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def _unclosed_warnings(script: str) -> str:
    """What a script using a guard on a loopback server prints (aiohttp warns on stderr)."""
    code = (
        "import asyncio, gc\n"
        "from sp_dspy import Guard\n"
        "from sp_dspy._lm import LMConfig\n"
        "from tests._stub_server import StubServer\n"
        f"POLICY = {POLICY!r}\nMESSAGES = {MESSAGES!r}\n"
        "with StubServer() as server:\n"
        "    config = LMConfig(model='openai/stub', api_base=server.url, cache=False)\n"
        + "".join(f"    {line}\n" for line in script.splitlines())
        + "    gc.collect()\n"
    )
    out = subprocess.run(
        [sys.executable, "-W", "default", "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout + out.stderr


@pytest.mark.network
@pytest.mark.parametrize(
    "script",
    [
        "async def main():\n    async with Guard.load('official', lm=config) as guard:\n"
        "        print((await guard.acheck(POLICY, MESSAGES)).status)\nasyncio.run(main())",
        "async def main():\n    guard = Guard.load('official', lm=config)\n"
        "    print((await guard.acheck(POLICY, MESSAGES)).status)\n    await guard.aclose()\n"
        "    await guard.aclose()\nasyncio.run(main())",
        "with Guard.load('official', lm=config) as guard:\n    print(guard.check(POLICY, MESSAGES).status)",
    ],
)
def test_a_guard_closes_its_connections(script: str) -> None:
    out = _unclosed_warnings(script)
    assert "clean" in out
    assert "Unclosed" not in out, out


def test_a_closed_guard_refuses_checks() -> None:
    guard = Guard.load("official", lm="fake/oracle")
    with guard:
        teach(guard)
        assert guard.check(POLICY, MESSAGES).violated_rules == GOLD
    guard.close()  # closing again is a no-op
    assert guard.closed
    with pytest.raises(ConfigError, match=r"^Guard: closed; load a new guard"):
        guard.check(POLICY, MESSAGES)
    with pytest.raises(ConfigError, match=r"^Guard: closed"):
        asyncio.run(guard.acheck(POLICY, MESSAGES))


def test_close_inside_the_loop_of_acheck_points_to_aclose() -> None:
    async def main() -> None:
        guard = Guard.load("official", lm="fake/oracle")
        await guard.acheck(POLICY, MESSAGES)
        with pytest.raises(ConfigError, match=r"await guard\.aclose\(\)"):
            guard.close()
        await guard.aclose()

    asyncio.run(main())
