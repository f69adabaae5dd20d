"""A CPU-light OpenAI-compatible stub for ``bench_runner.py``: asyncio, fixed answers.

The runner benchmark's ideal throughput, ``concurrency / latency``, assumes a server
that costs nothing but its latency. The tests' ``StubServer`` (``http.server``, a
thread per connection, a fake model behind it) spends about 0.5 ms of CPU per
request; at concurrency 64 that is 1,280 requests a second, most of one of this
machine's two vCPUs taken from the client being measured. This stub reads each
request's headers and ``Content-Length`` body on one event loop, picks the canned
answer by protocol (``## Policy`` in the body: per-policy), and writes a prebuilt
``chat.completion`` response ``latency`` seconds later on the same kept-alive
connection: tens of microseconds of CPU per request. ``bench_runner.py --stub
threaded`` measures against ``StubServer`` instead.

It speaks only what the benchmark's clients send (HTTP/1.1 ``POST`` with
``Content-Length``, keep-alive, one request at a time per connection); anything
else gets ``400`` and the connection is closed.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository root: ``tests``
from tests._stub_server import chat_completion

POLICY_ANSWER = json.dumps(
    {"analysis": "Checked every rule against the conversation.", "violated_rules": [{"rule": 2}]}
)
VERDICT_ANSWER = json.dumps({"verdict": "not_violated", "reason": "The chatbot complied with the rule."})
_HEADER_END = b"\r\n\r\n"
_LENGTH = b"content-length:"


def _http_response(status: str, payload: dict[str, Any]) -> bytes:
    body = json.dumps(payload).encode("utf-8")
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode("ascii") + body


def _completion(content: str) -> bytes:
    payload = chat_completion(
        content, completion_id="chatcmpl-loopback", prompt_tokens=1000, completion_tokens=20
    )
    return _http_response("200 OK", payload)


POLICY_RESPONSE = _completion(POLICY_ANSWER)
VERDICT_RESPONSE = _completion(VERDICT_ANSWER)
BAD_REQUEST = _http_response("400 Bad Request", {"error": {"message": "loopback stub: unsupported request"}})


def _content_length(head: bytes) -> int | None:
    """The ``Content-Length`` of a lower-cased header block, or None if it has none."""
    start = head.find(_LENGTH)
    if start < 0:
        return None
    end = head.find(b"\r\n", start)
    value = head[start + len(_LENGTH) : end if end >= 0 else len(head)]
    return int(value) if value.strip().isdigit() else None


class _Connection(asyncio.Protocol):
    """One client connection: frame requests, answer each after the latency."""

    def __init__(self, latency_s: float) -> None:
        self.latency_s = latency_s
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:  # no Nagle: a response must not wait for the client's ACK
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer
        buffer += data
        while (end := buffer.find(_HEADER_END)) >= 0:
            head = bytes(buffer[:end]).lower()
            length = _content_length(head)
            if not head.startswith(b"post ") or length is None:
                self._send(BAD_REQUEST, close=True)
                return
            total = end + len(_HEADER_END) + length
            if len(buffer) < total:
                return
            policy = buffer.find(b"## Policy", end, total) >= 0
            del buffer[:total]
            reply = POLICY_RESPONSE if policy else VERDICT_RESPONSE
            asyncio.get_running_loop().call_later(self.latency_s, self._send, reply)

    def _send(self, reply: bytes, close: bool = False) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        transport.write(reply)
        if close:
            transport.close()


async def _serve(latency_s: float, ports: Any, stop: Any) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Connection(latency_s), "127.0.0.1", 0, backlog=1024)
    ports.put(server.sockets[0].getsockname()[1])
    await loop.run_in_executor(None, stop.wait)
    server.close()
    await server.wait_closed()


def serve(latency_s: float, ports: Any, stop: Any) -> None:
    """Child-process entry: serve on 127.0.0.1 until ``stop`` is set; the port goes to ``ports``."""
    asyncio.run(_serve(latency_s, ports, stop))
