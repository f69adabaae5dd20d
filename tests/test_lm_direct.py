"""The direct transport: what it sends, caches, retries and raises, over real loopback HTTP."""

from __future__ import annotations

import asyncio
import email.utils
import json
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest

from sp_dspy._errors import ConfigError
from sp_dspy._lm import (
    LMConfig,
    classify_error,
    closing_transports,
    configure_cache,
    import_dspy,
    make_lm,
)
from sp_dspy._lm._direct import DirectChat, client_of, env_proxy
from sp_dspy._lm._errors import retry_after_seconds
from sp_dspy.lm import achat, chat
from sp_dspy.protocol import policy_response_format
from tests._lm_fixtures import per_policy_messages
from tests._stub_server import StubServer

T = TypeVar("T")
pytestmark = [pytest.mark.network, pytest.mark.timeout(60)]


@pytest.fixture(autouse=True)
def no_cache(restore_dspy_cache: None) -> None:
    """Start each test with caching off; the cache DSPy had is restored after it."""
    configure_cache(enabled=False)


def lm_for(server: StubServer, **settings: object) -> Any:
    return make_lm(LMConfig.model_validate({"model": "openai/stub", "api_base": server.url, **settings}))


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(closing_transports(coroutine))


@pytest.mark.parametrize(
    ("settings", "direct"),
    [
        ({"model": "openai/stub", "api_base": "http://127.0.0.1:9/v1"}, True),
        ({"model": "hosted_vllm/Qwen/Qwen3-8B", "api_base": "http://127.0.0.1:9/v1"}, True),
        ({"model": "openai/stub", "api_base": "http://127.0.0.1:9/v1", "json_schema": True}, True),
        ({"model": "openai/stub", "api_base": "http://127.0.0.1:9/v1", "transport": "dspy"}, False),
        ({"model": "openai/gpt-4o-mini", "api_key_env": "STUB_API_KEY"}, True),  # OpenAI's own endpoint
        (
            {
                "model": "anthropic/claude-sonnet-4-5",
                "api_base": "http://127.0.0.1:9",
                "api_key_env": "STUB_API_KEY",
            },
            True,
        ),
        ({"model": "together_ai/some-model", "api_key_env": "STUB_API_KEY"}, False),  # no profile: DSPy
        ({"model": "openai/stub", "api_base": "http://127.0.0.1:9/v1,http://127.0.0.1:10/v1"}, False),
        ({"model": "fake/oracle"}, False),
    ],
)
def test_make_lm_picks_the_http_engine_only_where_it_applies(
    settings: dict[str, object], direct: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STUB_API_KEY", "sk-stub-key-0000")
    config = LMConfig.model_validate(settings)
    assert (client_of(make_lm(config)) is not None) is direct


def test_transport_direct_on_an_endpoint_it_cannot_reach_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"transport 'direct' .* speaks to anthropic, gemini"):
        make_lm(LMConfig(model="together_ai/some-model", transport="direct"))
    replicas = LMConfig(model="openai/stub", api_base="http://127.0.0.1:9/v1,http://127.0.0.1:10/v1")
    with pytest.raises(ConfigError, match=r"replicas .* go through LiteLLM.s router"):
        make_lm(replicas.model_copy(update={"transport": "direct"}))
    # One LM per replica talks to one endpoint each: those go direct.
    assert all(client_of(make_lm(replicas, endpoint=i)) is not None for i in range(2))


def test_the_request_carries_the_messages_settings_and_key_and_nothing_else(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STUB_API_KEY", "sk-direct-secret-123")
    messages = per_policy_messages()
    with StubServer() as server:
        lm = lm_for(server, temperature=0.0, max_tokens=64, api_key_env="STUB_API_KEY")
        result = run(achat(lm, messages))
        (request,) = server.chat_requests
    assert request.body == {"model": "stub", "messages": messages, "temperature": 0.0, "max_tokens": 64}
    assert request.headers["Authorization"] == "Bearer sk-direct-secret-123"
    assert result.text and not result.cached
    assert result.usage.prompt_tokens and result.usage.total_tokens
    assert result.finish_reason == "stop"


def test_a_response_format_is_sent_as_the_baseline_writes_it_field_order_included() -> None:
    form = policy_response_format()
    with StubServer() as server:
        run(achat(lm_for(server), per_policy_messages(), response_format=form))
        (request,) = server.chat_requests
    assert request.body is not None
    assert json.dumps(request.body["response_format"]) == json.dumps(form)  # the same bytes


def test_sync_and_async_share_cache_entries_keyed_by_endpoint(tmp_path: Path) -> None:
    configure_cache(enabled=True, directory=tmp_path / "responses")
    messages = per_policy_messages()
    with StubServer(behaviour="empty") as first, StubServer(behaviour="all") as second:
        answers = [run(achat(lm_for(s), messages)) for s in (first, second)]
        replayed = chat(lm_for(first), messages)
        fresh = chat(lm_for(first), messages, cache=False)
        assert len(first.chat_requests) == 2 and len(second.chat_requests) == 1
    assert replayed.cached and replayed.text == answers[0].text
    assert replayed.usage == answers[0].usage
    assert answers[0].text != answers[1].text
    assert not fresh.cached


def test_a_dspy_transport_lm_and_a_direct_one_get_the_same_answer() -> None:
    messages = per_policy_messages()
    with StubServer() as server:
        direct = run(achat(lm_for(server), messages))
        through_dspy = run(achat(lm_for(server, transport="dspy"), messages))
        bodies = [r.body for r in server.chat_requests]
    assert direct.text == through_dspy.text
    assert all(body is not None and body["messages"] == messages for body in bodies)


@pytest.mark.parametrize(
    ("failure", "kind"),
    [("400", "context_length"), ("401", "auth"), ("500", "server_error"), ("429", "rate_limit")],
)
def test_failures_raise_dspy_errors_with_the_engine_kinds(failure: str, kind: str) -> None:
    """A 429 is waited out (``_rate_wait``): with no rate-limit time left it ends as ``rate_limit``."""
    dspy = import_dspy()
    with StubServer(fail_plan=[failure]) as server, pytest.raises(dspy.LMError) as caught:
        run(achat(lm_for(server, num_retries=0, rate_limit_timeout=0), per_policy_messages()))
    assert classify_error(caught.value) == kind


def test_a_dropped_connection_and_a_timeout_are_classified() -> None:
    dspy = import_dspy()
    with StubServer(fail_plan=["drop", "hang:2"]) as server:
        lm = lm_for(server, num_retries=0, timeout=0.5)
        with pytest.raises(dspy.LMError) as dropped:
            run(achat(lm, per_policy_messages()))
        with pytest.raises(dspy.LMError) as late:
            run(achat(lm, per_policy_messages()))
    assert classify_error(dropped.value) == "connection"
    assert classify_error(late.value) == "timeout"


def test_client_errors_are_not_retried_and_transient_ones_are() -> None:
    with StubServer(fail_plan=["401"]) as server:
        with pytest.raises(Exception, match="HTTP 401"):
            run(achat(lm_for(server, num_retries=3), per_policy_messages()))
        assert len(server.chat_requests) == 1
    # DSPy's backoff: 1 s after the drop, then the servers' Retry-After.
    with StubServer(fail_plan=["drop", "503:0.01", "502:0.01"]) as server:
        result = run(achat(lm_for(server, num_retries=3), per_policy_messages()))
        assert [r.failure for r in server.chat_requests] == ["drop", "503:0.01", "502:0.01", None]
    assert result.text


def test_retry_after_is_read_in_seconds_milliseconds_and_http_dates() -> None:
    assert retry_after_seconds({"retry-after": "2.5"}) == 2.5
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    date = email.utils.formatdate(time.time() + 30, usegmt=True)
    waited = retry_after_seconds({"retry-after": date})
    assert waited is not None and 25 <= waited <= 31
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None


def test_a_priced_model_gets_its_cost_from_the_price_snapshot() -> None:
    from dspy.clients.model_metadata import model_info, rate

    info = model_info("openai", "gpt-4o-mini")
    with StubServer(model_ids=("gpt-4o-mini",)) as server:
        lm = make_lm(LMConfig(model="openai/gpt-4o-mini", api_base=server.url))
        result = run(achat(lm, per_policy_messages()))
        unpriced = run(achat(lm_for(server), per_policy_messages()))
    usage = result.usage
    expected = usage.prompt_tokens * rate(info, "input_cost_per_token") + usage.completion_tokens * rate(
        info, "output_cost_per_token"
    )
    assert result.usage.cost == pytest.approx(expected) and expected > 0
    assert unpriced.usage is not None and unpriced.usage.cost is None


def test_prompt_cache_reads_are_priced_at_their_rate_fresh_and_replayed(tmp_path: Path) -> None:
    from dspy.clients.model_metadata import model_info, rate

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        usage = {"prompt_tokens": 1000, "completion_tokens": 20, "total_tokens": 1020}
        message = {"role": "assistant", "content": '{"violated_rules": []}'}
        return {
            "id": "c1",
            "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
            "usage": {**usage, "prompt_tokens_details": {"cached_tokens": 600}},
        }

    configure_cache(enabled=True, directory=tmp_path / "responses")
    info = model_info("openai", "gpt-4o-mini")
    with StubServer(model_ids=("gpt-4o-mini",), responder=answer) as server:
        lm = make_lm(LMConfig(model="openai/gpt-4o-mini", api_base=server.url))
        fresh, replayed = run(achat(lm, per_policy_messages())), chat(lm, per_policy_messages())
        assert len(server.chat_requests) == 1
    expected = (
        400 * rate(info, "input_cost_per_token")
        + 600 * rate(info, "cache_read_input_token_cost")
        + 20 * rate(info, "output_cost_per_token")
    )
    assert fresh.usage is not None and (fresh.usage.cache_read_tokens, fresh.cached) == (600, False)
    assert fresh.usage.cost == pytest.approx(expected) and expected > 0
    assert replayed.cached and replayed.usage == fresh.usage


def test_closing_transports_closes_the_pool_of_the_loop() -> None:
    with StubServer() as server:
        lm = lm_for(server)
        transport = client_of(lm)
        assert isinstance(transport, DirectChat)

        async def call_and_peek() -> int:
            await achat(lm, per_policy_messages())
            return len(transport._sessions)

        assert run(call_and_peek()) == 1
    assert len(transport._sessions) == 0


def test_an_answer_without_usage_has_none_and_a_body_without_choices_is_a_server_error() -> None:
    empty = {"choices": [{"index": 0, "message": {"role": "assistant", "content": ""}}]}
    with StubServer(responder=lambda body: empty) as server:
        result = run(achat(lm_for(server), per_policy_messages()))
    assert result.text == "" and result.usage is None  # none reported: none made up
    no_choices = pytest.raises(import_dspy().LMServerError, match=r"malformed response: no choices$")
    with StubServer(responder=lambda body: {"not": "a completion"}) as server, no_choices:
        run(achat(lm_for(server, num_retries=0), per_policy_messages()))


def test_the_proxy_comes_from_the_environment_and_no_proxy_is_honoured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    assert env_proxy("https://gateway.example/v1/chat/completions") is None
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1,.corp")
    assert env_proxy("https://gateway.example/v1/chat/completions") == "http://proxy.internal:3128"
    assert env_proxy("http://gateway.example/v1/chat/completions") is None  # no HTTP_PROXY set
    assert env_proxy("https://vllm.corp/v1/chat/completions") is None
    assert env_proxy("http://127.0.0.1:8000/v1/chat/completions") is None
