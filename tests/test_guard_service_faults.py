"""Fault injection against the guard service: bytes no client library would send, bodies a web
page could send, batches that can never fit, and stop signals that come twice.

Every malformed request gets a JSON 4xx and exactly one log line, never a traceback.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests._stub_server import StubServer
from tests.test_guard_service import (
    MESSAGES,
    POLICY,
    TOKEN,
    WAIT_S,
    _answer,
    _free_port,
    _service,
    _until,
    call,
    check,
    running,
)

BODY = json.dumps({"policy": POLICY, "messages": MESSAGES}).encode()


def _raw(url: str, data: bytes) -> tuple[int, str, dict[str, object]]:
    """Send ``data`` as it is; (status, Content-Type, JSON body) of the answer."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=WAIT_S) as connection:
        connection.sendall(data)
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers["Content-Type"], json.loads(body)


def _post(headers: bytes, body: bytes = BODY) -> bytes:
    return (
        b"POST /v1/check HTTP/1.1\r\nHost: guard\r\nConnection: close\r\n" + headers
        + b"Content-Length: %d\r\n\r\n" % len(body) + body
    )  # fmt: skip


MALFORMED = {
    "non-ASCII Authorization": (
        _post(b"Authorization: Bearer \xff\xfe\xe9t\xe9\r\nContent-Type: application/json\r\n"),
        401, "Authorization: wrong bearer token",
    ),
    "over-long header": (
        b"GET /healthz HTTP/1.1\r\nHost: guard\r\nX-Filler: " + b"a" * 20_000 + b"\r\n\r\n",
        431, "headers: a request line or header is longer than the service accepts",
    ),
    "Content-Length and Transfer-Encoding": (
        b"POST /v1/check HTTP/1.1\r\nHost: guard\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        400, "request: not valid HTTP/1.1 (BadHttpMessage: Transfer-Encoding can't be present with Content-Length)",
    ),
    "a broken chunk": (
        b"POST /v1/check HTTP/1.1\r\nHost: guard\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n3\r\n{}\n\r\nzz\r\n",
        400, "request: not valid HTTP/1.1 (BadHttpMessage: Invalid character in chunk size)",
    ),
    "a NUL in a header name": (
        b"GET /healthz HTTP/1.1\r\nHost: guard\r\nBad\x00Header: 1\r\n\r\n",
        400, "request: not valid HTTP/1.1 (BadHttpMessage: Invalid header token)",
    ),
    "TLS on the plain port": (
        bytes.fromhex("1603010200010001fc0303") + bytes(range(32)) + b"\x00" * 64,
        400, "request: not valid HTTP/1.1 (BadHttpMethod: Received HTTPS traffic on an HTTP port)",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_malformed_request_is_a_json_4xx_with_one_log_line(case: str) -> None:
    data, status, message = MALFORMED[case]
    log: list[str] = []
    with StubServer(responder=_answer) as stub, running(_service(stub.url, token=TOKEN, log=log)) as url:
        answer = _raw(url, data)
        after = check(url, token=TOKEN)  # the service goes on answering
    assert answer[0] == status and answer[1].startswith("application/json")
    assert answer[2]["error"] == message
    assert after[0] == 200 and not any("Traceback" in line for line in log)
    if status == 401:  # a request that parsed: refused by the service, nothing to log
        assert log == []
    else:
        assert log == [f"refused a malformed request from 127.0.0.1: {status} {message}"]


def test_a_body_cut_short_by_its_client_is_one_log_line() -> None:
    log: list[str] = []
    with StubServer(responder=_answer) as stub, running(_service(stub.url, log=log)) as url:
        host, port = url.removeprefix("http://").rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=WAIT_S) as connection:
            connection.sendall(_post(b"Content-Type: application/json\r\n")[:-40])  # 40 bytes never come
            connection.shutdown(socket.SHUT_WR)
            connection.recv(65536)
        _until(lambda: bool(log))
        after = check(url)
    assert after[0] == 200 and not stub.chat_requests[1:]
    assert log == ["refused a malformed request from 127.0.0.1: 400 body: could not be read "
                   "(ConnectionResetError: Connection lost)"]  # fmt: skip


@pytest.mark.parametrize(
    "content_type",
    [b"text/plain", b"application/x-www-form-urlencoded", b"multipart/form-data; boundary=x", None],
)
def test_only_json_bodies_are_accepted(content_type: bytes | None) -> None:
    header = b"" if content_type is None else b"Content-Type: " + content_type + b"\r\n"
    with StubServer(responder=_answer) as stub, running(_service(stub.url)) as url:
        status, _, body = _raw(url, _post(header))
    assert not stub.chat_requests  # nothing spent: a cross-site form cannot drive the service
    given = "none" if content_type is None else content_type.decode().split(";")[0]
    assert (status, body) == (
        415,
        {"error": f"Content-Type: {given}; the service accepts application/json bodies only"},
    )


def test_a_batch_larger_than_the_in_flight_limit_is_a_413_that_says_it() -> None:
    with StubServer(responder=_answer) as stub, running(_service(stub.url, max_in_flight=2)) as url:
        checks = {"checks": [{"policy": POLICY, "messages": MESSAGES}] * 3}
        status, headers, body = call(url, "POST", "/v1/check/batch", checks)
        fits = call(url, "POST", "/v1/check/batch", {"checks": checks["checks"][:2]})
    assert status == 413 and "Retry-After" not in headers
    assert body == {"error": "checks: 3 in one request, more than the limit of 2 checks in flight "
                    "(--max-in-flight); split it"}  # fmt: skip
    assert fits[0] == 200 and not stub.chat_requests[2:]


@pytest.mark.parametrize("signals", [("SIGTERM", "SIGTERM"), ("SIGINT", "SIGTERM"), ("SIGTERM", "SIGINT")])
def test_every_stop_after_a_sigterm_exits_143(tmp_path: Path, signals: tuple[str, str]) -> None:
    policy = tmp_path / "policy.txt"
    policy.write_text(POLICY, encoding="utf-8")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "COLUMNS": "200"}
    with StubServer(latency_s=5, responder=_answer) as stub:
        command = [sys.executable, "-c", "from sp_dspy.cli import main; main()", "serve", "--guard", "official",
                   "--lm", "openai/stub", "--api-base", stub.url, "--no-cache", "--policy", str(policy),
                   "--port", str(port)]  # fmt: skip
        process = subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            assert process.stdout is not None
            assert process.stdout.readline().startswith("serving guard official")
            sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT_S)  # a check left in flight
            sock.sendall(_post(b"Content-Type: application/json\r\n"))
            _until(lambda: "sp_dspy_guard_in_flight 1" in call(url, "GET", "/metrics")[2])
            process.send_signal(getattr(signal, signals[0]))
            _until(lambda: call(url, "GET", "/readyz")[0] == 503)
            time.sleep(0.2)
            process.send_signal(getattr(signal, signals[1]))
            _, errors = process.communicate(timeout=WAIT_S)
            sock.close()
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
    assert process.returncode == 143, errors
    assert "stopped at once: checks still in flight got no answer" in errors
    assert "Traceback" not in errors
