"""A loopback batch server for the tests: :class:`~tests._stub_server.StubServer` plus OpenAI's
batch API (``/v1/files``, ``/v1/batches``) and Anthropic's Message Batches (``/v1/messages/batches``).

Each batch line is answered as the stub answers the same body posted alone. A batch stays in
progress for ``polls_before_end`` retrievals, then ends: every request answered, but those
``fail_status(body)`` fails (that HTTP status), and with ``expire_after`` set only that many are
answered before the batch expires; ``create_delay_s`` holds the answer to a batch creation
(already made). ``created`` lists every batch created, in order.
"""

from __future__ import annotations

import email.parser
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests._stub_server import StubServer, _Handler


@dataclass
class FakeBatch:
    id: str
    wire: str  # "openai" or "anthropic"
    lines: list[dict[str, Any]]
    input_file_id: str | None = None
    polls: int = 0
    ended: bool = False
    expired: bool = False
    results: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)


class _BatchHandler(_Handler):
    server: Any

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send_bytes(self, data: bytes, kind: str = "application/octet-stream") -> None:
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        stub: BatchServer = self.server.stub
        path = self.path.split("?")[0].rstrip("/")
        parts = path.split("/")
        if path.endswith("/v1/batches"):
            with stub._lock:
                data = [stub._openai_batch(b) for b in stub.batches.values() if b.wire == "openai"]
            self._send_json(200, {"object": "list", "data": data, "has_more": False})
        elif "/v1/batches/" in path:
            self._send_json(200, stub._poll(parts[-1]))
        elif "/v1/files/" in path and path.endswith("/content"):
            self._send_bytes(stub.files[parts[-2]])
        elif "/v1/messages/batches/" in path and path.endswith("/results"):
            batch = stub.batches[parts[-2]]
            self._send_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in batch.results))
        elif "/v1/messages/batches/" in path:
            self._send_json(200, stub._poll(parts[-1]))
        else:
            super().do_GET()

    def do_POST(self) -> None:
        stub: BatchServer = self.server.stub
        path = self.path.split("?")[0].rstrip("/")
        if path.endswith("/v1/files"):
            self._send_json(200, stub._upload(self.headers.get("Content-Type", ""), self._read_body()))
        elif path.endswith("/v1/batches"):
            body = json.loads(self._read_body())
            created = stub._create_openai(body["input_file_id"])
            time.sleep(
                stub.create_delay_s
            )  # created, not yet answered: a client killed now never learns its id
            self._send_json(200, created)
        elif path.endswith("/v1/messages/batches"):
            body = json.loads(self._read_body())
            self._send_json(200, stub._create_anthropic(body["requests"]))
        else:
            super().do_POST()


class BatchServer(StubServer):
    """The stub with batch APIs; see the module docstring for the knobs."""

    handler = _BatchHandler

    def __init__(
        self,
        *,
        polls_before_end: int = 1,
        fail_status: Callable[[dict[str, Any]], int | None] = lambda body: None,
        expire_after: int | None = None,
        create_delay_s: float = 0.0,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self.create_delay_s = create_delay_s
        self.polls_before_end = polls_before_end
        self.fail_status = fail_status
        self.expire_after = expire_after
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, FakeBatch] = {}
        self.created: list[FakeBatch] = []
        self.polled = threading.Event()  # set at each retrieval (a test may kill the client then)
        self.cache_marks: list[Any] = []

    @property
    def answered_bodies(self) -> list[dict[str, Any]]:
        """Every request body some batch held, in submission order."""
        return [
            line["body"] if batch.wire == "openai" else line["params"]
            for batch in self.created
            for line in batch.lines
        ]

    # ----- OpenAI -----------------------------------------------------------------------------
    def _upload(self, content_type: str, data: bytes) -> dict[str, Any]:
        message = email.parser.BytesParser().parsebytes(
            f"Content-Type: {content_type}\r\n\r\n".encode() + data
        )
        payload = b""
        for part in message.get_payload():  # type: ignore[union-attr]
            if part.get_param("name", header="content-disposition") == "file":
                payload = part.get_payload(decode=True)
        with self._lock:
            file_id = f"file-{len(self.files) + 1}"
            self.files[file_id] = payload
        return {"id": file_id, "object": "file", "bytes": len(payload), "created_at": int(time.time()),
                "filename": "batch.jsonl", "purpose": "batch", "status": "processed"}  # fmt: skip

    def _create_openai(self, file_id: str) -> dict[str, Any]:
        lines = [json.loads(text) for text in self.files[file_id].decode().splitlines() if text.strip()]
        batch = self._new("openai", lines, file_id)
        return self._openai_batch(batch)

    def _openai_batch(self, batch: FakeBatch) -> dict[str, Any]:
        status = "in_progress" if not batch.ended else "expired" if batch.expired else "completed"
        failed = sum(1 for r in batch.errors if r.get("response"))
        return {
            "id": batch.id, "object": "batch", "endpoint": "/v1/chat/completions", "errors": None,
            "input_file_id": batch.input_file_id, "completion_window": "24h", "status": status,
            "output_file_id": f"{batch.id}-out" if batch.ended else None,
            "error_file_id": f"{batch.id}-err" if batch.ended and batch.errors else None,
            "created_at": 0,
            "request_counts": {"total": len(batch.lines), "completed": len(batch.results), "failed": failed},
        }  # fmt: skip

    # ----- Anthropic --------------------------------------------------------------------------
    def _create_anthropic(self, requests: list[dict[str, Any]]) -> dict[str, Any]:
        return self._anthropic_batch(self._new("anthropic", requests, None))

    def _anthropic_batch(self, batch: FakeBatch) -> dict[str, Any]:
        kinds = [r["result"]["type"] for r in batch.results]
        counts = {
            "processing": 0 if batch.ended else len(batch.lines),
            **{name: kinds.count(kind) for name, kind in
               (("succeeded", "succeeded"), ("errored", "errored"), ("canceled", "canceled"), ("expired", "expired"))},
        }  # fmt: skip
        return {
            "id": batch.id, "type": "message_batch",
            "processing_status": "ended" if batch.ended else "in_progress",
            "request_counts": counts, "created_at": "2026-01-01T00:00:00Z",
            "expires_at": "2026-01-02T00:00:00Z", "ended_at": "2026-01-01T01:00:00Z" if batch.ended else None,
            "archived_at": None, "cancel_initiated_at": None,
            "results_url": f"http://127.0.0.1:{self.port}/v1/messages/batches/{batch.id}/results" if batch.ended else None,
        }  # fmt: skip

    # ----- both -------------------------------------------------------------------------------
    def _new(self, wire: str, lines: list[dict[str, Any]], file_id: str | None) -> FakeBatch:
        with self._lock:
            batch = FakeBatch(f"batch-{len(self.batches) + 1}", wire, lines, file_id)
            self.batches[batch.id] = batch
            self.created.append(batch)
        return batch

    def _poll(self, batch_id: str) -> dict[str, Any]:
        batch = self.batches[batch_id]
        with self._lock:
            batch.polls += 1
            ending = not batch.ended and batch.polls > self.polls_before_end
        if ending:  # outside the lock: the stub's answers take it
            self._end(batch)
        self.polled.set()
        return self._openai_batch(batch) if batch.wire == "openai" else self._anthropic_batch(batch)

    def _end(self, batch: FakeBatch) -> None:
        for number, line in enumerate(batch.lines):
            custom_id = line["custom_id"]
            body = line["body"] if batch.wire == "openai" else line["params"]
            if self.expire_after is not None and number >= self.expire_after:
                batch.expired = True
                if batch.wire == "openai":
                    batch.errors.append({"custom_id": custom_id, "response": None,
                                         "error": {"code": "batch_expired", "message": "expired"}})  # fmt: skip
                else:
                    batch.results.append({"custom_id": custom_id, "result": {"type": "expired"}})
                continue
            status = self.fail_status(body)
            if batch.wire == "openai":
                if status is None:
                    answer = {"status_code": 200, "body": self._completion(body)}
                    batch.results.append({"custom_id": custom_id, "response": answer, "error": None})
                else:
                    error = {"error": {"message": f"stub batch failure {status}", "type": "server_error"}}
                    batch.errors.append(
                        {
                            "custom_id": custom_id,
                            "response": {"status_code": status, "body": error},
                            "error": None,
                        }
                    )
            elif status is None:
                self.cache_marks.append(body.get("system"))
                result = {"type": "succeeded", "message": self._message(body)}
                batch.results.append({"custom_id": custom_id, "result": result})
            else:
                error = {
                    "type": "error",
                    "error": {"type": "invalid_request_error", "message": "stub batch failure"},
                }
                batch.results.append({"custom_id": custom_id, "result": {"type": "errored", "error": error}})
        batch.ended = True
        if batch.wire == "openai":
            self.files[f"{batch.id}-out"] = b"".join(json.dumps(r).encode() + b"\n" for r in batch.results)
            self.files[f"{batch.id}-err"] = b"".join(json.dumps(r).encode() + b"\n" for r in batch.errors)
