"""A loopback model server for the tests and benchmarks: real HTTP, no model.

:class:`StubServer` serves ``GET /v1/models``, ``POST /v1/chat/completions`` (OpenAI's wire)
and ``POST /v1/messages`` (Anthropic's) on 127.0.0.1, records every request, can add
latency and fail the first requests on purpose (``fail_plan``). By default its answers
come from a :class:`~sp_dspy._lm._fake.FakeEngine` (``server.fake``: register gold cases there).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self

from sp_dspy._lm._fake import FakeEngine, count_tokens
from sp_dspy._lm._fake_prompts import message_text

from ._rate_limits import RateLimits, estimated_tokens

Responder = Callable[[dict[str, Any]], "str | dict[str, Any]"]
FAILURE_KINDS = ("429", "500", "502", "503", "400", "400-invalid", "401", "404", "drop", "hang")
# What the stub says for a planned failure (OpenAI's and vLLM's wording for the client errors).
_FAILURE_TEXT = {
    "400": ("context_length_exceeded", "This model's maximum context length is 4096 tokens"),
    "400-invalid": ("invalid_request_error", "Unrecognized request argument supplied: stub_flag"),
    "401": ("invalid_api_key", "Incorrect API key provided"),
    "404": ("model_not_found", "The model `stub-missing` does not exist"),
    "429": ("rate_limit_exceeded", "stub planned 429"),
}


@dataclass(frozen=True)
class StubRequest:
    """One request the stub received (failed ones included)."""

    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None
    failure: str | None = None


def parse_failure(spec: str) -> tuple[str, float | None]:
    """``"429"``, ``"429:1.5"`` (Retry-After seconds), ``"500"``, ``"drop"``, ``"hang:3"``."""
    kind, _, arg = spec.partition(":")
    if kind not in FAILURE_KINDS:
        raise ValueError(f"fail_plan entry {spec!r}: kind must be one of {', '.join(FAILURE_KINDS)}")
    return kind, float(arg) if arg else None


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512  # the default backlog of 5 refuses bursts of parallel connections
    stub: StubServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Without TCP_NODELAY each response on a kept-alive connection waits ~40 ms for
    # the client's delayed ACK, which would dominate every latency measurement.
    disable_nagle_algorithm = True
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        """Silent: tests and benchmarks read ``requests`` instead."""

    def _send_json(self, status: int, payload: Mapping[str, Any], headers: Mapping[str, str] = {}) -> None:
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up first (e.g. its timeout)

    def _send_error(self, status: int, message: str, kind: str, headers: Mapping[str, str] = {}) -> None:
        self._send_json(status, {"error": {"message": message, "type": kind}}, headers)

    def do_GET(self) -> None:
        stub = self.server.stub
        stub._record(StubRequest("GET", self.path, dict(self.headers), None))
        if self.path.rstrip("/").endswith("/models"):
            data = [{"id": m, "object": "model", "owned_by": "sp-dspy-stub"} for m in stub.model_ids]
            self._send_json(200, {"object": "list", "data": data})
        else:
            self._send_error(404, f"no route {self.path}", "not_found")

    def do_POST(self) -> None:
        stub = self.server.stub
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) if length else b"{}")
        except ValueError:
            body = None
        path = self.path.rstrip("/")
        anthropic = path.endswith("/v1/messages")
        chat = anthropic or path.endswith("/chat/completions")
        failure = stub._next_failure() if chat else None
        stub._record(StubRequest("POST", self.path, dict(self.headers), body, failure))
        self.limit_headers: Mapping[str, str] = {}
        if chat and stub.limits is not None:  # a provider answers over-limit requests at once
            status, self.limit_headers = stub.limits.admit(estimated_tokens(b" " * length))
            if status == 429:
                self._send_error(429, "Rate limit reached for requests", "requests", self.limit_headers)
                return
        if stub.latency_s:
            time.sleep(stub.latency_s)
        if failure is not None and self._fail(failure):
            return
        has_messages = isinstance(body, dict) and isinstance(body.get("messages"), list)
        if anthropic and has_messages:
            self._send_json(200, stub._message(body), self.limit_headers)
        elif not path.endswith("/chat/completions"):
            self._send_error(404, f"no route {self.path}", "not_found")
        elif not has_messages:
            self._send_error(400, "body must be a JSON object with messages", "bad")
        elif body.get("stream"):
            self._send_error(400, "the stub does not stream", "invalid_request")
        else:
            self._send_json(200, stub._completion(body), self.limit_headers)

    def _fail(self, failure: str) -> bool:
        """Answer with the planned failure; False when the request should then succeed."""
        kind, arg = parse_failure(failure)
        if kind == "drop":
            self.close_connection = True  # no status line at all: the client sees a dropped connection
            return True
        if kind == "hang":
            time.sleep(arg if arg is not None else 5.0)
            return False
        headers = {"Retry-After": f"{arg:g}"} if arg is not None else {}
        kind_name, message = _FAILURE_TEXT.get(kind, ("server_error", f"stub planned {kind}"))
        status = int(kind.partition("-")[0])
        self._send_error(status, message, kind_name, headers)
        return True


class StubServer:
    """OpenAI-compatible loopback server, used as a context manager.

    Args:
        port: TCP port on 127.0.0.1; 0 lets the OS pick a free one (see :attr:`port`).
        latency_s: seconds each request waits before answering.
        responder: ``body -> reply``; a ``str`` is the assistant text, a ``dict`` the whole
            ``chat.completion``. Default: ``self.fake.reply`` on the messages.
        fail_plan: failures of the first chat requests, in order: ``"429"``, ``"500"``,
            ``"502"``, ``"503"`` (``":SECONDS"`` adds ``Retry-After``), ``"400"`` (context
            length exceeded), ``"400-invalid"`` (another bad request), ``"401"`` (bad key),
            ``"404"`` (unknown model), ``"drop"`` (connection closed without a response),
            ``"hang:SECONDS"`` (answers late, for timeouts).
        behaviour: behaviour of the default responder's fake engine.
        model_ids: ids listed by ``/v1/models``.
        limits: the provider's rate limits (``tests._rate_limits``): 429 and ``x-ratelimit-*``.
    """

    #: The request handler (a test server with more routes extends it).
    handler: type[BaseHTTPRequestHandler] = _Handler

    def __init__(
        self,
        port: int = 0,
        latency_s: float = 0.0,
        responder: Responder | None = None,
        fail_plan: Sequence[str] = (),
        *,
        behaviour: str = "oracle",
        model_ids: Sequence[str] = ("stub",),
        limits: RateLimits | None = None,
    ) -> None:
        for spec in fail_plan:
            parse_failure(spec)
        self.requested_port = port
        self.latency_s = latency_s
        self.fake = FakeEngine(behaviour)
        self.responder: Responder = responder or self._fake_reply
        self.fail_plan = list(fail_plan)
        self.model_ids = list(model_ids)
        self.limits = limits
        self.requests: list[StubRequest] = []
        self._lock = threading.Lock()
        self._chat_count = 0
        self._server: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> Self:
        server = _HTTPServer(("127.0.0.1", self.requested_port), self.handler)
        server.stub = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="sp-dspy-stub", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("StubServer is not running")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """The OpenAI-compatible base URL, ``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def chat_requests(self) -> list[StubRequest]:
        """Requests to ``/chat/completions`` or ``/v1/messages``, failed ones included."""
        with self._lock:
            return [
                r
                for r in self.requests
                if r.method == "POST" and r.path.endswith(("/chat/completions", "/v1/messages"))
            ]

    def _record(self, request: StubRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _next_failure(self) -> str | None:
        with self._lock:
            index = self._chat_count
            self._chat_count += 1
        return self.fail_plan[index] if index < len(self.fail_plan) else None

    def _fake_reply(self, body: dict[str, Any]) -> str:
        return self.fake.reply(body.get("messages") or [], response_format=body.get("response_format"))

    def _completion(self, body: dict[str, Any]) -> dict[str, Any]:
        reply = self.responder(body)
        if isinstance(reply, dict):
            return reply
        with self._lock:
            number = len(self.requests)
        return chat_completion(
            reply,
            completion_id=f"stub-{number}",
            model=body.get("model", "stub"),
            prompt_tokens=sum(
                count_tokens(message_text(m.get("content"))) for m in body.get("messages") or []
            ),
            completion_tokens=count_tokens(reply),
            created=int(time.time()),
        )

    def _message(self, body: dict[str, Any]) -> dict[str, Any]:
        """An Anthropic ``message`` answering a messages-API body (its top-level system included)."""
        system = body.get("system")
        messages = ([{"role": "system", "content": system}] if isinstance(system, str) else []) + list(
            body.get("messages") or []
        )
        reply = self.responder({**body, "messages": messages})
        text = reply if isinstance(reply, str) else str(reply)
        prompt = sum(count_tokens(message_text(m.get("content"))) for m in messages)
        return {
            "id": f"msg-stub-{len(self.requests)}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "stub"),
            "content": [{"type": "thinking", "thinking": "stub thinking"}, {"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": prompt, "output_tokens": count_tokens(text)},
        }


def chat_completion(
    content: str,
    *,
    completion_id: str = "stub",
    model: str = "stub",
    prompt_tokens: int = 0,
    completion_tokens: int = 0,
    created: int = 0,
) -> dict[str, Any]:
    """An OpenAI ``chat.completion`` response body with one assistant message."""
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
