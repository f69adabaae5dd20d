"""Prompt caching: Anthropic requests of DSPy programs, compiled artifacts and the ``prefix`` per-rule
layout mark their stable prefix with ``cache_control``; the official baselines' bytes carry no
mark; OpenAI requests keep the prefix byte-stable (their cache needs nothing else)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

from sp_dspy import load_benchmark
from sp_dspy._lm import import_dspy
from sp_dspy._lm._config import LMConfig
from sp_dspy._lm._direct import DirectChat
from sp_dspy._lm._prompt_cache import MARK, cache_marked, marking_prefix, minimum_tokens
from sp_dspy._protocol import per_policy_messages
from sp_dspy._protocol._targets import CONVERSATION_HEADER, PREFIX_PRIORITY, PREFIX_VERDICT_LOGIC
from sp_dspy._report import build_summary
from sp_dspy._runner import EvalConfig, plan_run
from sp_dspy._usage import Usage
from sp_dspy.cli import app
from sp_dspy.programs import case_to_example, make_program, program_spec
from tests._lm_fixtures import oracle_stub
from tests._results import iter_records
from tests._stub_server import StubServer, chat_completion

pytestmark = [pytest.mark.usefixtures("isolated_run"), pytest.mark.network, pytest.mark.timeout(180)]

SAMPLE = load_benchmark().cases


def bodies(lm: str, tmp_path: Path, *args: str) -> list[dict[str, Any]]:
    """The request bodies a 3-case run sends to a recording stub."""
    with oracle_stub() as stub:
        command = ["eval", "--lm", lm, "--api-base", stub.url, "--output-dir", str(tmp_path / "o"), "-q"]
        result = CliRunner().invoke(app, [*command, "--limit", "3", *args])
        assert result.exit_code == 0, (result.output, result.exception)
        return [request.body for request in stub.chat_requests if request.body is not None]


def marks(body: dict[str, Any]) -> list[str]:
    """Where ``body`` carries a cache_control mark: ``system`` or ``messages[i]``."""
    found = []
    if isinstance(body.get("system"), list) and any("cache_control" in b for b in body["system"]):
        found.append("system")
    for index, message in enumerate(body["messages"]):
        content = message["content"]
        if isinstance(content, list) and any("cache_control" in block for block in content):
            found.append(f"messages[{index}]")
    return found


def plain_text(content: Any) -> str:
    return content if isinstance(content, str) else "".join(block["text"] for block in content)


def artifact_with_demos(root: Path) -> Path:
    """A compiled per-policy artifact with two demonstrations (a prefix well over Anthropic's minimum)."""
    dspy = import_dspy()
    program: Any = make_program("dspy", "per-policy")
    demos = []
    for case in SAMPLE[3:5]:
        example = case_to_example(case, "per-policy")
        demos.append(
            dspy.Example(
                policy=example.policy, conversation=example.conversation,
                violated_rules=list(case.ground_truth_violations),
            ).with_inputs("policy", "conversation")
        )  # fmt: skip
    program.named_predictors()[0][1].demos = demos
    out = root / "artifact"
    out.mkdir()
    program.save(str(out / "program.json"))
    (out / "manifest.json").write_text(json.dumps(program_spec(program)), encoding="utf-8")
    return out


@pytest.fixture(autouse=True)
def anthropic_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")


def test_official_per_policy_bytes_carry_no_mark(tmp_path: Path) -> None:
    sent = bodies("anthropic/stub", tmp_path)
    assert sent and not any(marks(body) for body in sent)
    expected = {per_policy_messages(case)[0]["content"] for case in SAMPLE[:3]}
    assert {body["system"] for body in sent} == expected  # the system prompt as a plain string


def test_artifact_marks_the_end_of_its_demonstrations(tmp_path: Path) -> None:
    sent = bodies("anthropic/stub", tmp_path, "--program", str(artifact_with_demos(tmp_path)))
    assert sent
    for body in sent:
        # system, then the two demos as user/assistant pairs, then the case: the last demo's answer
        assert marks(body) == [f"messages[{len(body['messages']) - 2}]"]
        assert body["messages"][-1]["content"] == plain_text(body["messages"][-1]["content"])
    prefixes = {json.dumps(body["messages"][:-1]) for body in sent}
    assert len(prefixes) == 1  # the same bytes on every call: what the provider's cache reuses


def test_prefix_layout_marks_the_conversation_and_keeps_the_text(tmp_path: Path) -> None:
    sent = bodies("anthropic/stub", tmp_path, "--protocol", "per-rule", "--per-rule-layout", "prefix")
    official = bodies("anthropic/stub", tmp_path / "official", "--protocol", "per-rule")
    assert not any(marks(body) for body in official)
    assert sent and all(marks(body) == ["messages[0]"] for body in sent)
    for body in sent:
        head, tail = body["messages"][0]["content"]
        assert head["cache_control"] == MARK and "cache_control" not in tail
        assert CONVERSATION_HEADER in head["text"]  # the per-case prefix: framework and conversation
        assert tail["text"].startswith((PREFIX_PRIORITY, PREFIX_VERDICT_LOGIC))  # then the rule judged


def test_openai_requests_of_a_dspy_program_share_a_byte_stable_prefix(tmp_path: Path) -> None:
    sent = bodies("openai/stub", tmp_path, "--program", str(artifact_with_demos(tmp_path)))
    assert len(sent) == 3
    assert len({json.dumps(body["messages"][:-1]) for body in sent}) == 1
    assert "cache_control" not in json.dumps(sent)


def test_a_prefix_below_the_cacheable_minimum_is_not_marked() -> None:
    messages = [{"role": "system", "content": "short"}, {"role": "user", "content": "question"}]
    body = {"model": "claude-sonnet-4-5", "system": "short", "messages": messages[1:]}
    with marking_prefix(lambda m: (0, None)):
        assert cache_marked(body, messages, "claude-sonnet-4-5") is body
    long = "x" * (minimum_tokens("claude-sonnet-4-5") * 4)
    messages[0]["content"] = long
    with marking_prefix(lambda m: (0, None)):
        marked = cache_marked({**body, "system": long}, messages, "claude-sonnet-4-5")
    assert marked["system"] == [{"type": "text", "text": long, "cache_control": MARK}]
    assert minimum_tokens("claude-haiku-4-5") == 4096 and minimum_tokens("claude-3-5-haiku") == 2048


def test_cache_reads_and_writes_are_priced_at_their_own_rates_and_batch_rates() -> None:
    client = DirectChat(LMConfig(model="anthropic/claude-sonnet-4-5"), "https://api.anthropic.com")
    usage = Usage(
        prompt_tokens=10_000, completion_tokens=100, cache_read_tokens=6_000, cache_write_tokens=3_000
    )
    listed = 1_000 * 3e-6 + 6_000 * 3e-7 + 3_000 * 3.75e-6 + 100 * 1.5e-5
    assert client.price(usage) == pytest.approx(listed)
    client.preset = SimpleNamespace(answer=lambda request: {})  # batch answers: the batch rates
    assert client.price(usage) == pytest.approx(listed / 2)


def test_openai_cached_tokens_are_recorded_per_unit_and_priced_lower(tmp_path: Path) -> None:
    def cached_answer(body: dict[str, Any]) -> dict[str, Any]:
        answer = chat_completion("[]", model="gpt-5-mini", prompt_tokens=2_000, completion_tokens=10)
        answer["usage"]["prompt_tokens_details"] = {"cached_tokens": 1_536}
        return answer

    with StubServer(responder=cached_answer) as stub:
        command = ["eval", "--lm", "openai/gpt-5-mini", "--api-base", stub.url, "--output-dir", str(tmp_path)]
        result = CliRunner().invoke(app, [*command, "-q", "--limit", "1"])
        assert result.exit_code == 0, (result.output, result.exception)
    (line,) = iter_records(next(tmp_path.glob("results_*.jsonl")))
    assert line["usage"]["cache_read_tokens"] == 1_536
    assert line["cost"] == pytest.approx(464 * 2.5e-7 + 1_536 * 2.5e-8 + 10 * 2e-6)
    assert "prompt cache: 1,536 of 2,000 prompt tokens read from the provider's cache" in result.output
    results = next(tmp_path.glob("results_*.jsonl"))
    summary = build_summary(SAMPLE, [(None, [results])], n_boot=0)
    assert summary.variants[0].cells["ALL"].cache_read_tokens == 1_536
    assert any("1,536 prompt tokens were read from the provider's prompt cache" in n for n in summary.notes)


def test_dry_run_estimates_what_the_prompt_cache_serves_and_saves(tmp_path: Path) -> None:
    def plan(model: str, **settings: Any) -> Any:
        return plan_run(EvalConfig(**settings), LMConfig(model=model))

    prefix = plan("anthropic/claude-sonnet-4-5", protocol="per-rule", per_rule_layout="prefix")
    assert 0 < prefix.cache_read_tokens < prefix.estimate.usage.prompt_tokens
    assert prefix.cache_saved_usd is not None and 0 < prefix.cache_saved_usd < prefix.estimate.usd
    assert plan("anthropic/claude-sonnet-4-5", protocol="per-rule").cache_read_tokens == 0  # official bytes
    demos = plan("openai/gpt-5-mini", program=str(artifact_with_demos(tmp_path)))
    assert demos.cache_read_tokens > 0
    assert plan("openai/gpt-5-mini", program="dspy").cache_read_tokens == 0  # no demos: prefix too short
    output = CliRunner().invoke(
        app, ["eval", "--dry-run", "--lm", "anthropic/claude-sonnet-4-5", "--protocol", "per-rule",
              "--per-rule-layout", "prefix"], env={"COLUMNS": "300"},
    ).output  # fmt: skip
    assert "prompt cache: ~" in output and "the provider's cache can serve" in output
