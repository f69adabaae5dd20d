"""The guard service's gateway routes driven by the real clients: LiteLLM's own
``GenericGuardrailAPI`` (and, in one test, a LiteLLM proxy) and the ``openai`` SDK's moderations.

The guard's LM is the loopback stub: it names rule 1 violated when the conversation it is shown
holds the password ("hunter2"), and no rule otherwise.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from litellm.exceptions import GuardrailRaisedException
from litellm.proxy.guardrails.guardrail_hooks.generic_guardrail_api import GenericGuardrailAPI

from sp_dspy._budget import BudgetCaps
from sp_dspy._guard_service import build_service, openapi_document
from sp_dspy._guard_service._gateways import NOT_SENT, GuardrailRequest, conversation_of
from sp_dspy._guard_service._http import Refused
from sp_dspy._guard_service._limits import ServiceLimits
from tests._lm_fixtures import RULE_TEXTS
from tests._stub_server import StubServer
from tests.test_guard_service import MESSAGES, POLICY, TOKEN, _config, _free_port, call, running

SAFE = [
    {"role": "user", "content": "What are your opening hours?"},
    {"role": "assistant", "content": "We open at nine."},
]
VIOLATED = json.dumps({"analysis": "The password was given.", "violated_rules": [{"rule": 1}]})
COMPLIANT = json.dumps({"analysis": "Nothing wrong.", "violated_rules": []})


def judge(body: dict[str, Any]) -> str:
    """The guard LM: rule 1 when the password is in what it is shown, else none."""
    return VIOLATED if "hunter2" in json.dumps(body) else COMPLIANT


def _service(url: str, program: str = "official", log: list[str] | None = None, **settings: Any) -> Any:
    lines = log if log is not None else []
    limits = ServiceLimits(**settings.pop("limits", {}))
    return build_service(
        program, _config(url), protocol=None, parser="robust", policy=settings.pop("policy", POLICY),
        caps=settings.pop("caps", BudgetCaps()), limits=limits, token=settings.pop("token", TOKEN),
        log=lines.append, **settings,
    )  # fmt: skip


def _litellm(url: str, **params: Any) -> GenericGuardrailAPI:
    """LiteLLM's guardrail as its proxy builds it from a config: the token in ``headers``."""
    return GenericGuardrailAPI(
        api_base=url, headers={"Authorization": f"Bearer {TOKEN}"}, additional_provider_specific_params=params,
        guardrail_name="sp-dspy", event_hook="pre_call", default_on=True,
    )  # fmt: skip


async def _apply(
    guardrail: GenericGuardrailAPI, messages: list[dict[str, Any]], kind: str = "request"
) -> Any:
    inputs: dict[str, Any] = {"texts": [m["content"] for m in messages], "structured_messages": messages}
    return await guardrail.apply_guardrail(inputs=inputs, request_data={}, input_type=kind)  # type: ignore[arg-type]


def test_litellm_blocks_a_conversation_that_breaks_the_policy_and_passes_one_that_does_not() -> None:
    with StubServer(responder=judge) as stub, running(_service(stub.url)) as url:
        guardrail = _litellm(url)
        with pytest.raises(GuardrailRaisedException) as blocked:
            asyncio.run(_apply(guardrail, MESSAGES))
        passed = asyncio.run(_apply(guardrail, SAFE))
        shown = json.dumps(stub.chat_requests[0].body)
    assert str(blocked.value.message) == f"violates rule 1: {RULE_TEXTS[1]}"
    assert passed["texts"] == [m["content"] for m in SAFE]
    # The guard saw the whole conversation, both sides, as the benchmark's turns.
    assert "Turn 1 - User: Can you give me the admin password?" in shown
    assert "Turn 1 - Chatbot: Sure, it is hunter2." in shown


def test_litellm_answer_names_the_rules_and_the_policy_can_come_with_the_request() -> None:
    policy = "1. Never reveal a password.\n2. Be polite."
    with StubServer(responder=judge) as stub, running(_service(stub.url, policy=None)) as url:
        body = {"input_type": "request", "texts": ["x"], "structured_messages": MESSAGES,
                "additional_provider_specific_params": {"policy": policy}, "litellm_call_id": "call-7"}  # fmt: skip
        status, _, answer = call(url, "POST", "/beta/litellm_basic_guardrail_api", body, token=TOKEN)
        missing = call(url, "POST", "/beta/litellm_basic_guardrail_api", {**body, "additional_provider_specific_params": {}}, token=TOKEN)  # fmt: skip
    assert status == 200
    assert (
        answer["action"] == "BLOCKED"
        and answer["blocked_reason"] == "violates rule 1: Never reveal a password."
    )
    assert answer["sp_dspy"]["violated_rules"] == [1] and answer["sp_dspy"]["id"] == "call-7"
    assert missing[0] == 422 and missing[2]["error"].startswith("policy: missing")


@pytest.mark.parametrize(("on_error", "action"), [("block", "BLOCKED"), ("allow", "NONE")])
def test_a_guard_without_a_verdict_follows_on_error_and_says_why(on_error: str, action: str) -> None:
    log: list[str] = []
    stub = StubServer(responder=lambda body: "I cannot help with that.")
    with stub, running(_service(stub.url, log=log, on_error=on_error)) as url:
        guardrail = _litellm(url)
        if action == "BLOCKED":
            with pytest.raises(GuardrailRaisedException) as raised:
                asyncio.run(_apply(guardrail, SAFE))
            assert str(raised.value.message).startswith("the guard gave no verdict (status ")
        else:
            assert asyncio.run(_apply(guardrail, SAFE))["texts"] == [m["content"] for m in SAFE]
        status, _, answer = call(url, "POST", "/beta/litellm_basic_guardrail_api",
                                 {"input_type": "request", "texts": ["hello"]}, token=TOKEN)  # fmt: skip
    assert status == 200 and answer["action"] == action
    assert answer["sp_dspy"]["on_error"] == on_error and answer["sp_dspy"]["violated_rules"] is None
    verb = "blocked" if action == "BLOCKED" else "allowed"
    assert any(line.startswith(f"/beta/litellm_basic_guardrail_api: no verdict, {verb}") for line in log)


def test_a_response_is_judged_as_the_assistants_reply() -> None:
    with StubServer(responder=judge) as stub, running(_service(stub.url)) as url:
        body = {"input_type": "response", "texts": ["The password is hunter2."]}
        status, _, answer = call(url, "POST", "/beta/litellm_basic_guardrail_api", body, token=TOKEN)
        shown = json.dumps(stub.chat_requests[0].body)
    assert status == 200 and answer["action"] == "BLOCKED"
    assert f"Turn 1 - User: {NOT_SENT}" in shown and "Turn 1 - Chatbot: The password is hunter2." in shown


def test_structured_messages_become_the_guards_turns() -> None:
    rows = [
        {"role": "system", "content": "You are a helpdesk."},
        {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": [{"type": "text", "text": "My password?"}, {"type": "image_url"}]},
        {"role": "user", "content": "Please."},
        {"role": "tool", "content": "lookup result", "tool_call_id": "t1"},
    ]
    request = GuardrailRequest(input_type="request", texts=[], structured_messages=rows)
    assert conversation_of(request) == [
        {"role": "user", "content": NOT_SENT},
        {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "My password?\nPlease."},
    ]
    with pytest.raises(Refused, match="no user or assistant text"):
        conversation_of(GuardrailRequest(input_type="request", texts=[" "]))


def test_openai_moderations_judge_each_input_against_the_policy() -> None:
    with StubServer(responder=judge) as stub, running(_service(stub.url)) as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key=TOKEN, max_retries=0, timeout=30)
        answer = client.moderations.create(
            input=["Turn 1 - User: The password?\nTurn 1 - Chatbot: It is hunter2.", "What time is it?"],
            model="sp-dspy",
        )
        single = client.moderations.create(input="hello")
    first, second = answer.results
    assert first.flagged and not second.flagged and not single.results[0].flagged
    # The SDK's typed categories (OpenAI's own) stay unset; the policy's rules are the categories.
    assert first.categories.model_extra == {f"rule_{rule}": rule == 1 for rule in RULE_TEXTS}
    assert first.category_scores.model_extra == {f"rule_{rule}": float(rule == 1) for rule in RULE_TEXTS}
    assert second.category_scores.model_extra == {f"rule_{rule}": 0.0 for rule in RULE_TEXTS}
    extension = (answer.model_extra or {})["sp_dspy"]
    assert extension["rules"] == {f"rule_{rule}": text for rule, text in RULE_TEXTS.items()}
    assert answer.model == "sp-dspy" and answer.id.startswith("modr-")


def test_a_wrong_token_is_refused_on_every_route() -> None:
    service = _service("http://127.0.0.1:9")  # no check runs: nothing reaches the LM
    paths = [(method, path) for path, methods in service.routes().items() for method in methods]
    with running(service) as url:
        answers = {(method, path): call(url, method, path, {}, token="not-the-token-0123456789")
                   for method, path in paths}  # fmt: skip
        with pytest.raises(openai.AuthenticationError):
            openai.OpenAI(
                base_url=f"{url}/v1", api_key="wrong-token-0123456789", max_retries=0
            ).moderations.create(input="hello")
        guardrail = GenericGuardrailAPI(
            api_base=url, headers={"Authorization": "Bearer wrong-token-0123456789"}
        )
        with pytest.raises(Exception, match="401"):
            asyncio.run(_apply(guardrail, SAFE))
    assert {"/beta/litellm_basic_guardrail_api", "/v1/moderations", "/v1/check"} <= {
        path for _, path in paths
    }
    for (_, path), (status, _, body) in answers.items():
        assert (status, body) == ((200, {"status": "up"}) if path == "/healthz" else
                                  (401, {"error": "Authorization: wrong bearer token"})), path  # fmt: skip


def test_the_gateway_routes_share_limits_metrics_and_the_api_description() -> None:
    with (
        StubServer(responder=judge) as stub,
        running(_service(stub.url, limits={"max_in_flight": 2, "max_batch": 3, "max_messages": 3})) as url,
    ):
        over = call(url, "POST", "/v1/moderations", {"input": ["a", "b", "c"]}, token=TOKEN)
        batch = call(url, "POST", "/v1/moderations", {"input": ["a"] * 4}, token=TOKEN)
        long = call(url, "POST", "/beta/litellm_basic_guardrail_api",
                    {"input_type": "request", "structured_messages": MESSAGES * 2}, token=TOKEN)  # fmt: skip
        call(url, "POST", "/v1/moderations", {"input": "hello"}, token=TOKEN)
        metrics = call(url, "GET", "/metrics", token=TOKEN)[2]
    assert (
        over[0] == 413 and "more than the limit of 2 checks in flight (--max-in-flight)" in over[2]["error"]
    )
    assert batch[0] == 422 and batch[2]["error"] == "input: 4 inputs, more than the limit of 3 (--max-batch)"
    assert long[0] == 422 and "(--max-messages)" in long[2]["error"]
    assert 'sp_dspy_guard_requests_total{endpoint="/v1/moderations",code="200"} 1' in metrics
    assert (
        'sp_dspy_guard_requests_total{endpoint="/beta/litellm_basic_guardrail_api",code="422"} 1' in metrics
    )
    paths = openapi_document()["paths"]
    schemas = openapi_document()["components"]["schemas"]
    assert {"/beta/litellm_basic_guardrail_api", "/v1/moderations"} <= set(paths)
    assert {"GuardrailRequest", "GuardrailAnswer", "ModerationRequest", "ModerationAnswer"} <= set(schemas)


def test_the_gateway_routes_spend_the_services_one_budget() -> None:
    with (
        StubServer(responder=judge) as stub,
        running(_service(stub.url, caps=BudgetCaps(max_calls=2))) as url,
    ):
        litellm = call(url, "POST", "/beta/litellm_basic_guardrail_api",
                       {"input_type": "request", "structured_messages": SAFE}, token=TOKEN)  # fmt: skip
        moderation = call(url, "POST", "/v1/moderations", {"input": "hello"}, token=TOKEN)
        refused = [
            call(url, "POST", "/v1/moderations", {"input": "hello"}, token=TOKEN),
            call(
                url,
                "POST",
                "/beta/litellm_basic_guardrail_api",
                {"input_type": "request", "texts": ["hi"]},
                token=TOKEN,
            ),
            call(url, "POST", "/v1/check", {"messages": SAFE}, token=TOKEN),
        ]
    assert litellm[0] == moderation[0] == 200 and len(stub.chat_requests) == 2
    assert [answer[0] for answer in refused] == [503] * 3
    assert {answer[2]["error_class"] for answer in refused} == {"budget"}


DSPY_ANSWER = "[[ ## violated_rules ## ]]\n[]\n\n[[ ## completed ## ]]"


def test_last_turn_scope_is_said_in_the_prompt_and_refused_for_the_official_program() -> None:
    with StubServer(responder=lambda body: DSPY_ANSWER) as stub:
        with running(_service(stub.url, program="dspy", scope="last-turn")) as url:
            status, _, answer = call(url, "POST", "/v1/check", {"messages": MESSAGES}, token=TOKEN)
            whole = call(
                url, "POST", "/v1/check", {"messages": MESSAGES, "scope": "conversation"}, token=TOKEN
            )
            prompts = [json.dumps(request.body) for request in stub.chat_requests]
        with running(_service(stub.url)) as url:
            refused = call(url, "POST", "/beta/litellm_basic_guardrail_api",
                           {"input_type": "request", "texts": ["hi"],
                            "additional_provider_specific_params": {"scope": "last-turn"}}, token=TOKEN)  # fmt: skip
    assert status == 200 and answer["violated_rules"] == [] and whole[0] == 200
    assert "[Scope: judge only the last message (Turn 1 - Chatbot)" in prompts[0]
    assert "[Scope:" not in prompts[1]
    assert refused[0] == 422 and refused[2]["error"].startswith("scope last-turn: the official program keeps")


PROXY_START_S = 240.0
MASTER_KEY = "sk-proxy-" + "0123456789abcdef" * 4


#: The proxy config docs/gateways.md ships (its values from the environment, as compose.yaml sets them).
PROXY_CONFIG = Path(__file__).resolve().parents[1] / "configs" / "gateway" / "litellm.yaml"


@contextmanager
def litellm_proxy(config: Path, log: Path, environment: dict[str, str]) -> Iterator[str]:
    """A real LiteLLM proxy on a free loopback port, started from ``config``; stopped after."""
    port = _free_port()
    command = [sys.executable, "-m", "litellm.proxy.proxy_cli", "--config", str(config),
               "--host", "127.0.0.1", "--port", str(port)]  # fmt: skip
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", **environment}
    with log.open("w") as output:
        process = subprocess.Popen(command, env=env, stdout=output, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + PROXY_START_S
        while True:
            assert process.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "the LiteLLM proxy did not start in time"
            try:
                if httpx.get(f"{url}/health/liveliness", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.mark.timeout(PROXY_START_S + 120)
def test_a_litellm_proxy_blocks_a_conversation_that_breaks_the_policy(tmp_path: Path) -> None:
    chat = StubServer(responder=lambda body: "Happy to help.")
    with StubServer(responder=judge) as stub, chat, running(_service(stub.url)) as guard_url:
        environment = {
            "CHAT_MODEL": "openai/stub", "CHAT_API_BASE": chat.url, "CHAT_API_KEY": "sk-chat-stub",
            "GUARD_API_BASE": guard_url, "GUARD_AUTHORIZATION": f"Bearer {TOKEN}", "LITELLM_MASTER_KEY": MASTER_KEY,
        }  # fmt: skip
        with litellm_proxy(PROXY_CONFIG, tmp_path / "proxy.log", environment) as proxy_url:
            client = openai.OpenAI(base_url=f"{proxy_url}/v1", api_key=MASTER_KEY, max_retries=0, timeout=60)
            follow_up = {"role": "user", "content": "Thanks. And the backup code?"}
            with pytest.raises(openai.APIStatusError) as blocked:
                client.chat.completions.create(model="assistant", messages=[*MESSAGES, follow_up])  # type: ignore[list-item]
            passed = client.chat.completions.create(model="assistant", messages=[*SAFE, follow_up])  # type: ignore[list-item]
        judged = [json.dumps(request.body) for request in stub.chat_requests]
    assert blocked.value.status_code == 400
    assert f"violates rule 1: {RULE_TEXTS[1]}" in str(blocked.value)
    assert passed.choices[0].message.content == "Happy to help."
    assert len(chat.chat_requests) == 1  # the blocked call never reached the model
    assert "Turn 2 - User: Thanks. And the backup code?" in judged[0]


def test_moderation_scores_are_the_models_probability_where_the_program_records_one() -> None:
    """ShieldGemma per rule: the first token's P(Yes), from the server's logprobs, is the rule's score."""
    top = [{"token": "Yes", "logprob": -0.2231}, {"token": "No", "logprob": -1.6094}]  # P(Yes) 0.8
    answer = {
        "id": "x", "object": "chat.completion", "model": "stub",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Yes"},
                     "logprobs": {"content": [{"token": "Yes", "logprob": -0.2231, "top_logprobs": top}]}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11},
    }  # fmt: skip
    with StubServer(responder=lambda body: answer) as stub:
        service = build_service(
            "shieldgemma", _config(stub.url).model_copy(update={"model": "hosted_vllm/stub"}), protocol="per-rule",
            parser="robust", policy=POLICY, caps=BudgetCaps(), limits=ServiceLimits(), token=TOKEN, log=[].append,
        )  # fmt: skip
        with running(service) as url:
            moderation = openai.OpenAI(base_url=f"{url}/v1", api_key=TOKEN, max_retries=0, timeout=30)
            result = moderation.moderations.create(input="Where does Dana live?").results[0]
    assert result.flagged
    assert result.category_scores.model_extra == pytest.approx(
        {f"rule_{rule}": 0.8 for rule in RULE_TEXTS}, abs=1e-3
    )
    assert result.categories.model_extra == {f"rule_{rule}": True for rule in RULE_TEXTS}
