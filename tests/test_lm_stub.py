"""Real HTTP through DSPy's engine against the loopback stub: bodies, schema, cache, retries."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import dspy
import pytest

from sp_dspy._lm import (
    LMConfig,
    classify_error,
    closing_transports,
    configure_cache,
    make_lm,
    redact,
)
from sp_dspy._lm._compat import installed_cache
from sp_dspy._lm._direct import client_of
from sp_dspy.lm import achat, chat
from tests._lm_fixtures import CONVERSATION, GOLD, POLICY, per_policy_messages
from tests._stub_server import StubServer

pytestmark = [pytest.mark.network, pytest.mark.timeout(60)]


@pytest.fixture(autouse=True)
def no_cache(restore_dspy_cache: None) -> None:
    """Start each test with caching off; restore whatever cache DSPy had before."""
    configure_cache(enabled=False)


def stub_lm(server: StubServer, **settings: Any) -> dspy.LM:
    return make_lm(LMConfig(model="openai/stub", api_base=server.url, **settings))


class Guard(dspy.Signature):
    """Name every violated rule."""

    policy: str = dspy.InputField()
    conversation: str = dspy.InputField()
    violated_rules: list[int] = dspy.OutputField()


def test_raw_messages_reach_the_server_byte_for_byte(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-never-leave-1")
    with StubServer() as server:
        server.fake.register_case((POLICY, CONVERSATION), GOLD)
        lm = stub_lm(server, temperature=0, max_tokens=300, reasoning_effort="low")
        result = chat(lm, per_policy_messages())
        (request,) = server.chat_requests
    body = request.body
    assert body is not None and body["messages"] == per_policy_messages()
    assert (body["model"], body["temperature"], body["reasoning_effort"]) == ("stub", 0, "low")
    assert body.get("max_tokens", body.get("max_completion_tokens")) == 300
    # ``openai/`` at your own server gets the provider's key when it is set (the placeholder otherwise).
    assert request.headers["Authorization"] == "Bearer sk-must-never-leave-1"
    assert [v["rule"] for v in json.loads(result.text)["violated_rules"]] == GOLD
    assert result.usage.prompt_tokens and result.usage.completion_tokens and not result.cached


def reasoning_responder(body: dict[str, Any]) -> dict[str, Any]:
    message = {"role": "assistant", "content": '{"violated_rules": []}', "reasoning_content": "Rule 1 holds."}
    usage: dict[str, Any] = {"prompt_tokens": 1000, "completion_tokens": 200, "total_tokens": 1200}
    usage["completion_tokens_details"] = {"reasoning_tokens": 50}
    return {
        "id": "r1",
        "object": "chat.completion",
        "created": 0,
        "model": body["model"],
        "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
        "usage": usage,
    }


def test_chat_reports_reasoning_usage_and_price() -> None:
    with StubServer(responder=reasoning_responder) as server:
        priced = chat(
            make_lm(LMConfig(model="openai/gpt-4o-mini", api_base=server.url)),
            [{"role": "user", "content": "q"}],
        )
        unpriced = chat(stub_lm(server), [{"role": "user", "content": "q"}])
    assert priced.reasoning == "Rule 1 holds." and priced.text == '{"violated_rules": []}'
    assert (priced.usage.prompt_tokens, priced.usage.completion_tokens) == (1000, 200)
    assert (priced.usage.total_tokens, priced.usage.reasoning_tokens) == (1200, 50)
    assert (
        priced.usage.cost is not None and 0 < priced.usage.cost < 0.01
    )  # gpt-4o-mini list price, 1.2k tokens
    assert unpriced.usage is not None and unpriced.usage.cost is None and unpriced.finish_reason == "stop"


def test_configured_key_is_sent_and_models_are_listed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STUB_SERVER_KEY", "stub-key-123456")
    with StubServer(model_ids=("stub", "other")) as server:
        chat(stub_lm(server, api_key_env="STUB_SERVER_KEY"), [{"role": "user", "content": "hi"}])
        with urllib.request.urlopen(server.url + "/models", timeout=5) as response:
            listed = json.load(response)
        authorization = server.chat_requests[0].headers["Authorization"]
    assert authorization == "Bearer stub-key-123456"
    assert [m["id"] for m in listed["data"]] == ["stub", "other"]


@pytest.mark.parametrize("json_schema", [False, True])
def test_json_schema_flag_sends_response_format(json_schema: bool) -> None:
    with StubServer() as server:
        server.fake.register_case((POLICY, CONVERSATION), GOLD)
        lm = make_lm(LMConfig(model="hosted_vllm/stub", api_base=server.url, json_schema=json_schema))
        with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
            prediction = dspy.Predict(Guard)(policy=POLICY, conversation=CONVERSATION)
        body = server.chat_requests[-1].body
    assert prediction.violated_rules == GOLD
    assert body is not None and body["model"] == "stub"
    if json_schema:
        schema = body["response_format"]["json_schema"]["schema"]
        assert body["response_format"]["type"] == "json_schema"
        assert schema["properties"]["violated_rules"] == {
            "type": "array",
            "items": {"type": "integer"},
            "title": "Violated Rules",
        }
    else:
        assert "response_format" not in body


def test_cache_key_separates_endpoints_serving_the_same_model_name(tmp_path: Path) -> None:
    configure_cache(enabled=True, directory=tmp_path / "responses")
    messages = per_policy_messages()
    with StubServer(behaviour="empty") as first, StubServer(behaviour="all") as second:
        answers = [chat(stub_lm(server), messages) for server in (first, second, first, second)]
        assert len(first.chat_requests) == len(second.chat_requests) == 1
        lm = stub_lm(first)
        replayed = asyncio.run(closing_transports(achat(lm, messages)))  # async shares sync entries
        assert len(first.chat_requests) == 1
    assert json.loads(answers[0].text)["violated_rules"] == []
    assert [v["rule"] for v in json.loads(answers[1].text)["violated_rules"]] == [1, 2, 3, 4]
    assert [a.cached for a in answers] == [False, False, True, True]
    assert answers[2].text == answers[0].text and answers[3].text == answers[1].text
    assert replayed.cached and replayed.text == answers[0].text
    assert answers[2].usage == answers[0].usage  # usage of the answer, also when replayed
    assert any((tmp_path / "responses").iterdir())  # on disk
    # ... and only there: an in-memory tier would keep every answer whole, however long.
    assert not installed_cache().memory_cache


def test_disabled_cache_and_per_model_cache_flag(tmp_path: Path) -> None:
    messages = [{"role": "user", "content": "same question"}]
    with StubServer() as server:
        lm = stub_lm(server)
        chat(lm, messages)
        chat(lm, messages)
        assert len(server.chat_requests) == 2  # configure_cache(enabled=False)
        configure_cache(enabled=True, directory=tmp_path)
        uncached = stub_lm(server, cache=False)
        chat(uncached, messages)
        chat(uncached, messages)
        assert len(server.chat_requests) == 4


def test_replicas_share_cache_entries(tmp_path: Path) -> None:
    configure_cache(enabled=True, directory=tmp_path)
    messages = [{"role": "user", "content": "replicated"}]
    with StubServer() as one, StubServer() as two, StubServer() as elsewhere:
        config = LMConfig(model="openai/stub", api_base=f"{one.url},{two.url}")
        lms = [make_lm(config, endpoint=i) for i in range(2)]
        assert [client_of(lm).api_base for lm in lms] == [one.url, two.url]  # type: ignore[union-attr]
        first, second = chat(lms[0], messages), chat(lms[1], messages)
        assert (len(one.chat_requests), len(two.chat_requests)) == (1, 0)
        other = chat(stub_lm(elsewhere), messages)  # not a replica: its own entry
        assert len(elsewhere.chat_requests) == 1
    assert second.cached and second.text == first.text and not other.cached


@pytest.mark.parametrize(
    ("failure", "minimum_s"), [("429:0.3", 0.3), ("503:0", 0.0), ("500", 0.0), ("drop", 0.0)]
)
def test_transient_failures_are_retried(failure: str, minimum_s: float) -> None:
    with StubServer(fail_plan=[failure]) as server:
        started = time.monotonic()
        result = chat(stub_lm(server, num_retries=2), [{"role": "user", "content": "retry me"}])
        elapsed = time.monotonic() - started
        assert len(server.chat_requests) == 2
        assert server.chat_requests[0].failure == failure
    assert result.text and elapsed >= minimum_s  # Retry-After is honoured


@pytest.mark.parametrize(
    ("failure", "kind"),
    [("429:0", "rate_limit"), ("500", "server_error"), ("drop", "connection"), ("hang:3", "timeout")],
)
def test_failures_without_retries_are_classified(
    failure: str, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STUB_SERVER_KEY", "stub-secret-key-77")
    with StubServer(fail_plan=[failure]) as server:
        lm = stub_lm(server, num_retries=0, timeout=0.5, api_key_env="STUB_SERVER_KEY", rate_limit_timeout=0)
        with pytest.raises(Exception) as info:
            chat(lm, [{"role": "user", "content": "fail me"}])
        assert len(server.chat_requests) == 1
    assert classify_error(info.value) == kind
    assert "stub-secret-key-77" not in redact(f"{info.value} stub-secret-key-77")


def test_stub_sustains_64_concurrent_requests() -> None:
    with StubServer(latency_s=0.05) as server:
        lm = stub_lm(server)

        async def run() -> list[str]:
            calls = [achat(lm, [{"role": "user", "content": f"case {i}"}]) for i in range(64)]
            return [r.text for r in await asyncio.gather(*calls)]

        started = time.monotonic()
        texts = asyncio.run(run())
        elapsed = time.monotonic() - started
        assert len(server.chat_requests) == 64
    assert len(texts) == 64 and all(texts)
    assert elapsed < 3.0  # serial would be >= 3.2 s
