"""An event-loop stub server for ``bench_runner.py``: fixed latency at little CPU.

The test suite's ``StubServer`` (``http.server``, one thread per connection) costs
about 0.5 ms of CPU per request; at the 1,280 requests per second that concurrency
64 with 50 ms latency asks for, it needs most of one of this machine's two CPUs and,
under any other load, becomes the bottleneck of a client benchmark. This stub
answers the same OpenAI chat-completions wire from one aiohttp event loop, as vLLM's
uvicorn server does: it reads and parses each request body, waits ``latency_s``
without holding a thread, and returns a valid answer of the request's protocol with
a ``usage`` block. ``bench_runner.py --stub threaded`` uses the test stub instead.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from typing import Any

Answer = Callable[[dict[str, Any]], str]


def serve_async(latency_s: float, answer: Answer, ports: Any, stop: Any) -> None:
    """Child process: serve on 127.0.0.1 (a free port, put on ``ports``) until ``stop`` is set."""
    import orjson
    from aiohttp import web

    async def completions(request: web.Request) -> web.Response:
        body = orjson.loads(await request.read())
        await asyncio.sleep(latency_s)
        text = answer(body)
        prompt = sum(len(str(m.get("content", ""))) for m in body.get("messages", [])) // 4
        reply = {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "model": body.get("model", "stub"),
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": prompt, "completion_tokens": 20, "total_tokens": prompt + 20},
        }
        return web.Response(body=orjson.dumps(reply), content_type="application/json")

    async def main() -> None:
        app = web.Application(client_max_size=64 * 1024**2)
        app.router.add_post("/v1/chat/completions", completions)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        await web.SockSite(runner, sock, backlog=1024).start()
        ports.put(sock.getsockname()[1])
        while not stop.is_set():
            await asyncio.sleep(0.1)
        await runner.cleanup()

    asyncio.run(main())
