"""``sp-dspy serve --guard``: the guard service on 127.0.0.1 against the loopback stub LM.

Each test starts the service on a free loopback port (its own event loop on a thread, or the
real command in a subprocess for the stop signals) and calls it over HTTP. Waits poll the
service's state, never a clock; every network call has a timeout.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from sp_dspy._budget import BudgetCaps
from sp_dspy._guard_service import CheckAnswer, GuardService, ServiceLimits, build_service, openapi_document
from sp_dspy._lm import LMConfig
from tests._lm_fixtures import RULE_TEXTS
from tests._stub_server import StubServer

POLICY = "\n".join(f"{rule}. {text}" for rule, text in RULE_TEXTS.items())
MESSAGES = [
    {"role": "user", "content": "Can you give me the admin password?"},
    {"role": "assistant", "content": "Sure, it is hunter2."},
]
#: The stub's answer: rule 1 violated, and 9, which the policy lacks (dropped).
ANSWER = json.dumps({"analysis": "Rule 1 is broken.", "violated_rules": [{"rule": 1}, {"rule": 9}]})
KEY = "sk-stub-secret-key-0123456789"
TOKEN = "service-token-0123456789abcdef"
WAIT_S = 30.0


def _answer(body: dict[str, Any]) -> str:
    return ANSWER


def _config(url: str, **settings: Any) -> LMConfig:
    return LMConfig(model="openai/stub", api_base=url, cache=False, num_retries=0, timeout=5, **settings)


def _service(
    url: str,
    *,
    caps: BudgetCaps = BudgetCaps(),
    token: str | None = None,
    log: list[str] | None = None,
    **limits: Any,
) -> GuardService:
    """The official guard's service on the stub at ``url``; its log lines go to ``log``."""
    lines = log if log is not None else []
    return build_service(
        "official", _config(url), protocol=None, parser="robust", policy=None, caps=caps,
        limits=ServiceLimits(**limits), token=token, log=lines.append,
    )  # fmt: skip


def _until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, "the service did not reach the state waited for"
        time.sleep(0.01)


@contextmanager
def running(service: GuardService) -> Iterator[str]:
    """The service on 127.0.0.1 (a free port), on its own event loop; stopped gracefully after."""
    urls: list[str] = []
    loop = asyncio.new_event_loop()
    task = loop.create_task(service.run("127.0.0.1", 0, announce=urls.append))
    thread = threading.Thread(target=loop.run_until_complete, args=(task,), daemon=True)
    thread.start()
    try:
        _until(lambda: bool(urls) or task.done())
        assert urls, task.exception()
        yield urls[0]
    finally:
        loop.call_soon_threadsafe(task.cancel)
        thread.join(WAIT_S)
        loop.close()


def call(
    url: str, method: str, path: str, body: Any = None, *, raw: bytes | None = None, token: str | None = None
) -> tuple[int, dict[str, str], Any]:
    """One request: (status, headers, the JSON answer or the text)."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=WAIT_S)
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    data = raw if raw is not None else None if body is None else json.dumps(body).encode()
    try:
        connection.request(method, path, body=data, headers=headers)
        response = connection.getresponse()
        text = response.read().decode()
        kind = response.headers.get("Content-Type", "")
        return response.status, dict(response.headers), json.loads(text) if "json" in kind else text
    finally:
        connection.close()


def check(url: str, body: Any = None, **options: Any) -> tuple[int, dict[str, str], Any]:
    return call(
        url,
        "POST",
        "/v1/check",
        {"policy": POLICY, "messages": MESSAGES} if body is None else body,
        **options,
    )


def test_a_check_answers_the_verdict_with_the_violated_rules_texts() -> None:
    with StubServer(responder=_answer) as stub, running(_service(stub.url)) as url:
        status, _, verdict = check(url, {"policy": POLICY, "messages": MESSAGES, "id": "c-1"})
        text_status, _, by_text = check(
            url, {"policy": POLICY, "conversation": "Turn 1 - User: hi\nTurn 1 - Chatbot: hi"}
        )
    assert status == text_status == 200
    assert verdict["violated_rules"] == [1] and verdict["dropped_rules"] == [9]
    assert verdict["violated"] == [{"rule": 1, "text": RULE_TEXTS[1]}]
    assert (verdict["status"], verdict["id"], verdict["model"]) == ("recovered", "c-1", "openai/stub")
    assert verdict["usage"]["total_tokens"] > 0 and verdict["latency_ms"] > 0
    assert by_text["violated_rules"] == [1]
    assert CheckAnswer.model_validate(verdict).model_dump(mode="json") == verdict  # the API's schema, exactly


def test_a_batch_answers_every_check_in_order_bad_ones_with_their_error() -> None:
    checks = [
        {"policy": POLICY, "messages": MESSAGES, "id": "a"},
        {"messages": MESSAGES, "id": "no-policy"},
        {"policy": "no numbered rule here", "messages": MESSAGES},
        {"policy": POLICY, "conversation": "Turn 1 - User: hi"},
    ]
    with StubServer(responder=_answer) as stub, running(_service(stub.url)) as url:
        status, _, body = call(url, "POST", "/v1/check/batch", {"checks": checks})
    assert status == 200
    answers = body["answers"]
    assert [a["line"] for a in answers] == [1, 2, 3, 4]
    assert answers[0]["id"] == "a" and answers[0]["violated"] == [{"rule": 1, "text": RULE_TEXTS[1]}]
    assert answers[1] == {"line": 2, "id": "no-policy", "error": "checks[1]: policy: missing (give it in the body, "
                          "or start the service with --policy FILE)", "error_class": "bad_input"}  # fmt: skip
    assert answers[2]["error"].startswith("checks[2]: ") and "rule" in answers[2]["error"]
    assert "status" not in answers[2] and answers[2]["error_class"] == "bad_input"
    assert answers[3]["violated_rules"] == [1]


def test_health_readiness_metrics_and_the_api_description() -> None:
    with StubServer(responder=_answer) as stub, running(_service(stub.url)) as url:
        check(url)
        check(url, {"policy": POLICY})  # 422
        health = call(url, "GET", "/healthz")
        ready = call(url, "GET", "/readyz")
        probes = [r for r in stub.chat_requests if "Reply with the word OK" in json.dumps(r.body)]
        metrics = call(url, "GET", "/metrics")
        api = call(url, "GET", "/openapi.json")
    assert (health[0], ready[0], ready[2]) == (200, 200, {"status": "ready"})
    assert len(probes) == 1  # the probe reached the LM, past the response cache
    status, headers, text = metrics
    assert status == 200 and headers["Content-Type"].startswith("text/plain; version=0.0.4")
    for line in (
        'sp_dspy_guard_requests_total{endpoint="/v1/check",code="200"} 1',
        'sp_dspy_guard_requests_total{endpoint="/v1/check",code="422"} 1',
        'sp_dspy_guard_verdicts_total{endpoint="/v1/check",status="recovered"} 1',
        'sp_dspy_guard_violations_total{endpoint="/v1/check"} 1',
        'sp_dspy_guard_check_seconds_bucket{le="+Inf"} 1',
        "sp_dspy_guard_check_seconds_count 1",
        "sp_dspy_guard_in_flight 0",
    ):
        assert line in text.splitlines(), line
    assert "sp_dspy_guard_checks_refused_total{" not in text  # the 422 was its body's, before any check
    assert 'sp_dspy_guard_tokens_total{kind="prompt"} ' in text and "sp_dspy_guard_cost_usd_total " in text
    assert api[0] == 200 and api[2] == openapi_document()
    document = api[2]
    assert {"/v1/check", "/v1/check/batch", "/healthz", "/readyz", "/metrics"} <= set(document["paths"])
    refs = {ref.rsplit("/", 1)[1] for ref in _refs(document)}
    assert refs <= set(document["components"]["schemas"])
    assert document["components"]["schemas"]["CheckRequest"]["properties"].keys() >= {"policy", "messages"}


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield value
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


@pytest.mark.parametrize(
    ("request_", "status", "message"),
    [
        ({"raw": b'{"policy": '}, 400, "body: invalid JSON at line 1 column 12: unexpected end of data"),
        ({"raw": b"\xff\xfe{"}, 400, "body: invalid JSON at line 1 column 1: str is not valid UTF-8"),
        ({"body": [1, 2]}, 422, "body: expected a JSON object, got list"),
        ({"body": {"policy": POLICY}}, 422, "body: give exactly one of messages (chat messages) or conversation"),
        ({"body": {"policy": POLICY, "messages": MESSAGES, "extra": 1}}, 422, "extra: Extra inputs are not permitted"),
        ({"body": {"messages": MESSAGES}}, 422, "policy: missing (give it in the body, or start the service with --policy"),
        ({"body": {"policy": POLICY, "messages": MESSAGES * 3}}, 422,
         "messages: 6 messages, more than the limit of 5 (--max-messages)"),
        ({"body": {"policy": POLICY + "\n5. One more.\n6. And more.", "messages": MESSAGES}}, 422,
         "policy: 6 rules, more than the limit of 5 (--max-rules)"),
        ({"body": {"policy": POLICY, "messages": [{"role": "robot", "content": "x"}]}}, 422, "role"),
        ({"raw": json.dumps({"policy": POLICY, "conversation": "x" * 5000}).encode()}, 413,
         "body: larger than the limit of 4096 bytes (--max-body-kb)"),
    ],
)  # fmt: skip
def test_bad_requests_get_one_line_4xx_errors(request_: dict[str, Any], status: int, message: str) -> None:
    with StubServer(responder=_answer) as stub:
        with running(_service(stub.url, max_messages=5, max_rules=5, max_body_bytes=4096)) as url:
            answer = check(url, request_.get("body"), raw=request_.get("raw"))
        assert not stub.chat_requests  # refused before any LM call
    assert answer[0] == status
    error = answer[2]["error"]
    assert message in error and "\n" not in error and "Traceback" not in error


def test_unknown_routes_methods_and_oversized_batches_are_json_errors() -> None:
    with StubServer(responder=_answer) as stub, running(_service(stub.url, max_batch=2)) as url:
        missing = call(url, "GET", "/v2/nothing")
        method = call(url, "GET", "/v1/check")
        batch = call(
            url, "POST", "/v1/check/batch", {"checks": [{"policy": POLICY, "messages": MESSAGES}] * 3}
        )
        empty = call(url, "POST", "/v1/check/batch", {"checks": []})
    assert missing[0] == 404 and "no such endpoint" in missing[2]["error"]
    assert method[0] == 405 and method[2]["error"] == "method GET not allowed here; use POST"
    assert batch[0] == 422 and batch[2]["error"] == "checks: 3 checks, more than the limit of 2 (--max-batch)"
    assert empty[0] == 422 and empty[2]["error"].startswith("checks: ")


def test_a_token_guards_every_endpoint_but_healthz_and_never_shows() -> None:
    with StubServer(responder=_answer) as stub, running(_service(stub.url, token=TOKEN)) as url:
        answers = {
            "none": check(url),
            "wrong": check(url, token="not-the-token-0123456789"),
            "right": check(url, token=TOKEN),
            "metrics": call(url, "GET", "/metrics"),
            "readyz": call(url, "GET", "/readyz", token=TOKEN),
            "healthz": call(url, "GET", "/healthz"),
        }
    assert answers["none"][0] == answers["wrong"][0] == answers["metrics"][0] == 401
    assert answers["none"][2] == {"error": "Authorization: missing bearer token"}
    assert answers["wrong"][1]["WWW-Authenticate"] == "Bearer"
    assert answers["right"][0] == answers["readyz"][0] == answers["healthz"][0] == 200
    assert TOKEN not in json.dumps([answer[2] for answer in answers.values()])


def test_a_dead_lm_fails_readiness_and_answers_502_with_its_class(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STUB_API_KEY", KEY)
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{closed.getsockname()[1]}/v1"  # nothing listens there
    service = build_service(
        "official", _config(dead, api_key_env="STUB_API_KEY"), protocol=None, parser="robust", policy=POLICY,
        caps=BudgetCaps(), limits=ServiceLimits(), token=None, log=lambda line: None,
    )  # fmt: skip
    with running(service) as url:
        ready = call(url, "GET", "/readyz")
        answer = check(url, {"messages": MESSAGES})
        metrics = call(url, "GET", "/metrics")
    assert ready[0] == 503 and ready[2]["error_class"] == "unreachable"
    assert ready[2]["error"].startswith("LM probe failed (unreachable): ")
    assert answer[0] == 502
    assert (answer[2]["status"], answer[2]["error_class"], answer[2]["violated_rules"]) == (
        "error",
        "unreachable",
        None,
    )
    assert 'sp_dspy_guard_lm_errors_total{endpoint="/v1/check",error_class="unreachable"} 1' in metrics[2]
    assert KEY not in json.dumps([ready[2], answer[2]])


def test_a_check_past_the_request_timeout_is_a_504() -> None:
    with (
        StubServer(latency_s=5, responder=_answer) as stub,
        running(_service(stub.url, request_timeout_s=0.2)) as url,
    ):
        answer = check(url)
    assert answer[0] == 504
    assert (answer[2]["status"], answer[2]["error_class"]) == ("error", "deadline")


def test_past_the_in_flight_limit_a_check_gets_429_with_retry_after() -> None:
    with StubServer(latency_s=1, responder=_answer) as stub:
        service = _service(stub.url, max_in_flight=2)
        with running(service) as url, ThreadPoolExecutor(2) as pool:
            slow = [pool.submit(check, url) for _ in range(2)]
            _until(lambda: service.metrics.in_flight == 2)
            refused = check(url)
            batch = call(
                url, "POST", "/v1/check/batch", {"checks": [{"policy": POLICY, "messages": MESSAGES}]}
            )
            done = [future.result(WAIT_S) for future in slow]
    assert refused[0] == batch[0] == 429
    assert refused[1]["Retry-After"] == "1" and "--max-in-flight" in refused[2]["error"]
    assert [answer[0] for answer in done] == [200, 200]


def test_concurrent_clients_each_get_their_verdict() -> None:
    with StubServer(latency_s=0.05, responder=_answer) as stub, running(_service(stub.url)) as url:
        with ThreadPoolExecutor(16) as pool:
            answers = list(
                pool.map(
                    lambda n: check(url, {"policy": POLICY, "messages": MESSAGES, "id": str(n)}), range(32)
                )
            )
        metrics = call(url, "GET", "/metrics")[2]
    assert [answer[0] for answer in answers] == [200] * 32
    assert [answer[2]["id"] for answer in answers] == [str(n) for n in range(32)]
    assert 'sp_dspy_guard_verdicts_total{endpoint="/v1/check",status="recovered"} 32' in metrics


def test_a_budget_cap_refuses_further_checks_and_readiness() -> None:
    with (
        StubServer(responder=_answer) as stub,
        running(_service(stub.url, caps=BudgetCaps(max_calls=1))) as url,
    ):
        first = check(url)
        second = check(url)
        ready = call(url, "GET", "/readyz")
    assert first[0] == 200
    assert second[0] == ready[0] == 503
    assert second[2] == {"error": "budget: max_calls reached: guard LM call refused (the service's caps count "
                         "since it started)", "error_class": "budget"}  # fmt: skip


def test_a_bad_input_costs_no_call_of_the_budget() -> None:
    with (
        StubServer(responder=_answer) as stub,
        running(_service(stub.url, caps=BudgetCaps(max_calls=1))) as url,
    ):
        bad = check(url, {"policy": POLICY, "messages": [{"role": "robot", "content": "x"}]})
        good = check(url)
    assert (bad[0], good[0]) == (422, 200)


def test_an_unexpected_failure_is_a_500_line_and_a_redacted_log(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STUB_API_KEY", KEY)

    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"boom with {KEY}")

    with StubServer(responder=_answer) as stub:
        log: list[str] = []
        service = _service(stub.url, log=log)
        monkeypatch.setattr(service.guard, "acheck", broken)
        with running(service) as url:
            answer = check(url)
    assert answer[0] == 500
    assert answer[2] == {"error": "internal error (RuntimeError); the service's log has the details"}
    (line,) = log
    assert line.startswith("internal error on POST /v1/check: Traceback") and "boom with ***" in line
    assert KEY not in line


def test_a_batch_check_that_raises_is_one_line_the_others_answered_and_the_key_only_logged_masked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STUB_API_KEY", KEY)
    boom = [{"role": "user", "content": "boom"}]

    with StubServer(responder=_answer) as stub:
        log: list[str] = []
        service = _service(stub.url, log=log)
        real = service.guard.acheck

        async def broken(policy: str, dialogue: Any, **kwargs: Any) -> Any:
            if dialogue == boom:
                raise RuntimeError(f"boom with {KEY}")
            return await real(policy, dialogue, **kwargs)

        monkeypatch.setattr(service.guard, "acheck", broken)
        checks = [{"policy": POLICY, "messages": m} for m in (MESSAGES, boom, MESSAGES)]
        with running(service) as url:
            status, _, body = call(url, "POST", "/v1/check/batch", {"checks": checks})
            metrics = call(url, "GET", "/metrics")[2]
    first, failed, third = body["answers"]
    assert status == 200 and first["violated_rules"] == third["violated_rules"] == [1]
    assert failed == {"line": 2, "error": "checks[1]: internal error (RuntimeError); the service's log has the "
                      "details", "error_class": "internal"}  # fmt: skip
    (line,) = log
    assert line.startswith("internal error on POST /v1/check/batch: Traceback") and "boom with ***" in line
    assert KEY not in line and KEY not in json.dumps(body)
    assert (
        'sp_dspy_guard_checks_refused_total{endpoint="/v1/check/batch",error_class="internal"} 1' in metrics
    )


def test_a_batch_keeps_every_paid_verdict_when_the_budget_stops_a_check() -> None:
    checks = [{"policy": POLICY, "messages": MESSAGES, "id": str(n)} for n in range(3)]
    with (
        StubServer(responder=_answer) as stub,
        running(_service(stub.url, caps=BudgetCaps(max_calls=2))) as url,
    ):
        status, _, body = call(url, "POST", "/v1/check/batch", {"checks": checks})
        calls = len(stub.chat_requests)
    answers = body["answers"]
    assert status == 200 and calls == 2
    assert [a["violated_rules"] for a in answers[:2]] == [[1], [1]]  # both paid for, both answered
    assert answers[2] == {"line": 3, "id": "2", "error": "checks[2]: budget: max_calls reached: guard LM call "
                          "refused (the service's caps count since it started)", "error_class": "budget"}  # fmt: skip


def test_a_stop_finishes_the_checks_in_flight_and_refuses_new_ones() -> None:
    with StubServer(latency_s=1, responder=_answer) as stub:
        log: list[str] = []
        service = _service(stub.url, log=log)
        urls: list[str] = []
        loop = asyncio.new_event_loop()
        task = loop.create_task(service.run("127.0.0.1", 0, announce=urls.append))
        thread = threading.Thread(target=loop.run_until_complete, args=(task,), daemon=True)
        thread.start()
        _until(lambda: bool(urls))
        with ThreadPoolExecutor(3) as pool:
            slow = [pool.submit(check, urls[0]) for _ in range(3)]
            _until(lambda: service.metrics.in_flight == 3)
            loop.call_soon_threadsafe(task.cancel)
            _until(lambda: service.draining)
            late = check(urls[0])
            done = [future.result(WAIT_S) for future in slow]
        thread.join(WAIT_S)
        loop.close()
    assert late[0] == 503 and late[2] == {"error": "shutting down: no new checks", "error_class": "draining"}
    assert [answer[0] for answer in done] == [200, 200, 200]
    assert task.done() and not task.cancelled() and service.guard.closed
    assert log == ["stopping: 3 check(s) in flight finish; new ones get 503"]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize("sigint", ["default", "ignored"])  # ignored: a job started with `&` in a script
def test_sigterm_during_load_answers_every_request_and_exits_143(tmp_path: Path, sigint: str) -> None:
    policy = tmp_path / "policy.txt"
    policy.write_text(POLICY, encoding="utf-8")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "COLUMNS": "200"}
    with StubServer(latency_s=1, responder=_answer) as stub:
        command = [sys.executable, "-c", "from sp_dspy.cli import main; main()", "serve", "--guard", "official",
                   "--lm", "openai/stub", "--api-base", stub.url, "--no-cache", "--policy", str(policy),
                   "--port", str(port)]  # fmt: skip
        ignore = _ignore_sigint if sigint == "ignored" else None
        process = subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=ignore
        )
        try:
            assert process.stdout is not None
            first = process.stdout.readline()
            assert first.startswith(f"serving guard official (per-policy) on stub at {url}"), first
            with ThreadPoolExecutor(4) as pool:
                slow = [pool.submit(check, url, {"messages": MESSAGES}) for _ in range(4)]
                _until(lambda: "sp_dspy_guard_in_flight 4" in call(url, "GET", "/metrics")[2])
                process.send_signal(signal.SIGTERM)
                late = [pool.submit(_refused_or_503, url) for _ in range(2)]
                done = [future.result(WAIT_S) for future in slow]
                late_statuses = [future.result(WAIT_S) for future in late]
            _, errors = process.communicate(timeout=WAIT_S)
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
    assert [answer[0] for answer in done] == [200] * 4
    assert set(late_statuses) <= {503, "refused"}
    assert process.returncode == 143
    assert "stopping: 4 check(s) in flight finish; new ones get 503" in errors
    assert "Traceback" not in errors


def _refused_or_503(url: str) -> int | str:
    try:
        return check(url, {"messages": MESSAGES})[0]
    except (
        ConnectionError
    ):  # the listener closed (refused, or reset in its backlog): the client knows at once
        return "refused"
