"""A loopback batch server for the tests: :class:`~tests._stub_server.StubServer` plus OpenAI's
batch API (``/v1/files``, ``/v1/batches``) and Anthropic's Message Batches (``/v1/messages/batches``),
which can misbehave in each way a provider has been seen to.

Each batch line is answered as the stub answers the same body posted alone. A batch stays in
progress for ``polls_before_end`` retrievals, then ends: every request answered, but those
``fail_status(body)`` fails (that HTTP status), and with ``expire_after`` set only that many are
answered before the batch expires. ``created`` lists every batch created, in order.

Faults (each settable while the server runs): ``reject_key`` (every batch route answers 401 and
echoes the key), ``poll_errors`` (the next N retrievals answer 500, echoing the key),
``create_errors`` (the next N batch creations create the batch, then answer 500),
``download_errors`` with ``download_status`` (the next N output downloads fail so),
``echo_key`` (every answer carries the key), ``output_fault`` (one output line ``not-json``, a
JSON ``list``, the file ``truncated`` mid-line, an ``unknown-id``, a ``duplicate`` of the first
line with another answer; in the first output only), ``list_route`` False (no batch-list route). ``hold`` holds a stage's
answer (``upload`` before the file is stored, ``create`` after the batch is made, ``poll``,
``download``) for that many seconds; ``reached[stage]`` is set when a request reaches it, and
``reached["downloaded"]`` once an output was sent (a test kills the client then).
"""

from __future__ import annotations

import email.parser
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tests._stub_server import StubServer, _Handler

STAGES = ("upload", "create", "poll", "download", "downloaded")
OUTPUT_FAULTS = ("not-json", "list", "truncated", "unknown-id", "duplicate")


@dataclass
class FakeBatch:
    id: str
    wire: str  # "openai" or "anthropic"
    lines: list[dict[str, Any]]
    input_file_id: str | None = None
    metadata: dict[str, Any] | None = None
    created_at: float = field(default_factory=time.time)
    polls: int = 0
    ended: bool = False
    expired: bool = False
    results: list[dict[str, Any]] = field(default_factory=list)
    errors: list[dict[str, Any]] = field(default_factory=list)
    unpaid: set[str] = field(default_factory=set)  # requests the batch never ran (expired)

    @property
    def custom_ids(self) -> list[str]:
        return [str(line["custom_id"]) for line in self.lines]


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
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client was killed while downloading

    def _key(self) -> str:
        return self.headers.get("x-api-key") or self.headers.get("Authorization", "").removeprefix("Bearer ")

    def _refused(self, stub: BatchServer) -> bool:
        """Answer a fault instead of the route: a 401 echoing the key (as a wrong path can)."""
        stub.seen_key = self._key() or stub.seen_key
        if stub.reject_key:
            self._send_error(401, f"Incorrect API key provided: Bearer {self._key()}", "invalid_api_key")
            return True
        return False

    def do_GET(self) -> None:
        stub: BatchServer = self.server.stub
        path = self.path.split("?")[0].rstrip("/")
        parts = path.split("/")
        if not path.endswith(("/batches", "/results", "/content")) and "batches/" not in path:
            super().do_GET()
        elif self._refused(stub):
            pass
        elif path.endswith(("/v1/batches", "/v1/messages/batches")):
            self._list("anthropic" if "messages" in path else "openai")
        elif path.endswith(("/content", "/results")):
            self._download(stub, parts[-2])
        else:
            self._poll(stub, parts[-1])

    def _list(self, wire: str) -> None:
        stub: BatchServer = self.server.stub
        if not stub.list_route:
            self._send_error(404, f"no route {self.path}", "not_found")
            return
        with stub._lock:
            batches = [b for b in reversed(stub.created) if b.wire == wire]  # newest first
        data = [stub._openai_batch(b) if wire == "openai" else stub._anthropic_batch(b) for b in batches]
        ids = [b["id"] for b in data]
        self._send_json(200, {"object": "list", "data": data, "has_more": False,
                              "first_id": ids[0] if ids else None, "last_id": ids[-1] if ids else None})  # fmt: skip

    def _poll(self, stub: BatchServer, batch_id: str) -> None:
        stub._stage("poll")
        with stub._lock:
            failing = stub.poll_errors > 0
            stub.poll_errors -= 1 if failing else 0
        if failing:
            self._send_error(500, f"stub poll failure for key {self._key()}", "server_error")
        else:
            self._send_json(200, stub._poll(batch_id))

    def _download(self, stub: BatchServer, name: str) -> None:
        stub._stage("download")
        with stub._lock:
            failing = stub.download_errors > 0
            stub.download_errors -= 1 if failing else 0
        if failing:
            self._send_error(stub.download_status, f"stub download failure of {name}", "server_error")
            return
        data = stub.files.get(name) if "messages" not in self.path else stub._output(stub.batches[name])
        if data is None:
            self._send_error(404, f"no file {name}", "not_found")
            return
        self._send_bytes(data)
        stub.reached["downloaded"].set()

    def do_POST(self) -> None:
        stub: BatchServer = self.server.stub
        path = self.path.split("?")[0].rstrip("/")
        if not path.endswith(("/v1/files", "/v1/batches", "/v1/messages/batches")):
            super().do_POST()
        elif self._refused(stub):
            pass
        elif path.endswith("/v1/files"):
            stub._stage("upload")
            self._send_json(200, stub._upload(self.headers.get("Content-Type", ""), self._read_body()))
        else:
            body = json.loads(self._read_body())
            if path.endswith("/v1/batches"):
                created = stub._create_openai(body["input_file_id"], body.get("metadata"))
            else:
                created = stub._anthropic_batch(stub._new("anthropic", body["requests"], None))
            stub._stage("create")  # created, not yet answered: a client killed now never learns its id
            with stub._lock:
                failing = stub.create_errors > 0
                stub.create_errors -= 1 if failing else 0
            if failing:  # created all the same: the client cannot tell
                self._send_error(500, "stub failure after creating the batch", "server_error")
            else:
                self._send_json(200, created)


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
        self.polls_before_end = polls_before_end
        self.fail_status = fail_status
        self.expire_after = expire_after
        self.hold: dict[str, float] = {"create": create_delay_s}
        self.reached = {stage: threading.Event() for stage in STAGES}
        self.reject_key = False
        self.poll_errors = 0
        self.create_errors = 0
        self.download_errors = 0
        self.download_status = 500
        self.echo_key = False
        self.output_fault: str | None = None
        self.list_route = True
        self.seen_key = ""
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, FakeBatch] = {}
        self.created: list[FakeBatch] = []
        self.polled = self.reached["poll"]  # set at each retrieval (a test may kill the client then)
        self.cache_marks: list[Any] = []

    @property
    def create_delay_s(self) -> float:
        return self.hold.get("create", 0.0)

    @create_delay_s.setter
    def create_delay_s(self, seconds: float) -> None:
        self.hold["create"] = seconds

    def heal(self) -> None:
        """Every fault and hold off (a test's resume meets a well-behaved provider)."""
        self.hold.clear()
        self.reject_key = self.echo_key = False
        self.poll_errors = self.download_errors = self.create_errors = 0
        self.output_fault, self.list_route, self.polls_before_end, self.expire_after = None, True, 0, None

    def _stage(self, stage: str) -> None:
        self.reached[stage].set()
        if self.hold.get(stage):
            time.sleep(self.hold[stage])

    @property
    def answered_bodies(self) -> list[dict[str, Any]]:
        """Every request body some batch held, in submission order."""
        return [
            line["body"] if batch.wire == "openai" else line["params"]
            for batch in self.created
            for line in batch.lines
        ]

    def paid_twice(self) -> int:
        """Requests some batch ran (answered or failed: paid) that an earlier batch ran too, and those
        of batches created and not ended yet (they will be paid); expired requests are not paid."""
        ids = [cid for batch in self.created for cid in batch.custom_ids if cid not in batch.unpaid]
        return len(ids) - len(set(ids))

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

    def _create_openai(self, file_id: str, metadata: dict[str, Any] | None) -> dict[str, Any]:
        lines = [json.loads(text) for text in self.files[file_id].decode().splitlines() if text.strip()]
        batch = self._new("openai", lines, file_id)
        batch.metadata = metadata
        return self._openai_batch(batch)

    def _openai_batch(self, batch: FakeBatch) -> dict[str, Any]:
        status = "in_progress" if not batch.ended else "expired" if batch.expired else "completed"
        failed = sum(1 for r in batch.errors if r.get("response"))
        return {
            "id": batch.id, "object": "batch", "endpoint": "/v1/chat/completions", "errors": None,
            "input_file_id": batch.input_file_id, "completion_window": "24h", "status": status,
            "output_file_id": f"{batch.id}-out" if batch.ended else None,
            "error_file_id": f"{batch.id}-err" if batch.ended and batch.errors else None,
            "created_at": int(batch.created_at), "metadata": batch.metadata,
            "request_counts": {"total": len(batch.lines), "completed": len(batch.results), "failed": failed},
        }  # fmt: skip

    # ----- Anthropic --------------------------------------------------------------------------
    def _anthropic_batch(self, batch: FakeBatch) -> dict[str, Any]:
        kinds = [r["result"]["type"] for r in batch.results]
        counts = {
            "processing": 0 if batch.ended else len(batch.lines),
            **{name: kinds.count(kind) for name, kind in
               (("succeeded", "succeeded"), ("errored", "errored"), ("canceled", "canceled"), ("expired", "expired"))},
        }  # fmt: skip
        created = datetime.fromtimestamp(batch.created_at, UTC).isoformat().replace("+00:00", "Z")
        return {
            "id": batch.id, "type": "message_batch",
            "processing_status": "ended" if batch.ended else "in_progress",
            "request_counts": counts, "created_at": created,
            "expires_at": "2099-01-02T00:00:00Z", "ended_at": created if batch.ended else None,
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
        return self._openai_batch(batch) if batch.wire == "openai" else self._anthropic_batch(batch)

    def _output(self, batch: FakeBatch) -> bytes:
        """An ended batch's output file (Anthropic's results), with ``output_fault`` applied."""
        lines = [json.dumps(r) for r in batch.results]
        if self.output_fault == "not-json" and lines:
            lines[0] = lines[0][: len(lines[0]) // 2] + "<<garbage>>"
        elif self.output_fault == "list" and lines:
            lines[0] = json.dumps([json.loads(lines[0])])
        elif self.output_fault == "unknown-id" and lines:
            lines[0] = json.dumps({**json.loads(lines[0]), "custom_id": "not-a-request-of-this-batch"})
        elif self.output_fault == "duplicate" and lines:
            other = json.loads(lines[-1] if len(lines) > 1 else lines[0])
            lines.append(json.dumps({**other, "custom_id": json.loads(lines[0])["custom_id"]}))
        data = "".join(line + "\n" for line in lines).encode()
        if self.output_fault == "truncated" and lines:
            data = data[: len(data) - len(lines[-1]) // 2 - 1]
        if lines:
            self.output_fault = None  # one output only: the batch that asks again is answered well
        return data

    def _answer(self, wire: str, body: dict[str, Any]) -> dict[str, Any]:
        answer = self._completion(body) if wire == "openai" else self._message(body)
        return {**answer, "system_fingerprint": f"echo {self.seen_key}"} if self.echo_key else answer

    def _end(self, batch: FakeBatch) -> None:
        for number, line in enumerate(batch.lines):
            custom_id = line["custom_id"]
            body = line["body"] if batch.wire == "openai" else line["params"]
            if self.expire_after is not None and number >= self.expire_after:
                batch.expired = True
                batch.unpaid.add(custom_id)
                if batch.wire == "openai":
                    batch.errors.append({"custom_id": custom_id, "response": None,
                                         "error": {"code": "batch_expired", "message": "expired"}})  # fmt: skip
                else:
                    batch.results.append({"custom_id": custom_id, "result": {"type": "expired"}})
                continue
            status = self.fail_status(body)
            if batch.wire == "openai":
                if status is None:
                    answer = {"status_code": 200, "body": self._answer("openai", body)}
                    batch.results.append({"custom_id": custom_id, "response": answer, "error": None})
                else:
                    error = {"error": {"message": f"stub batch failure {status}", "type": "server_error"}}
                    response = {"status_code": status, "body": error}
                    batch.errors.append({"custom_id": custom_id, "response": response, "error": None})
            elif status is None:
                self.cache_marks.append(body.get("system"))
                result = {"type": "succeeded", "message": self._answer("anthropic", body)}
                batch.results.append({"custom_id": custom_id, "result": result})
            else:
                error = {
                    "type": "error",
                    "error": {"type": "invalid_request_error", "message": "stub batch failure"},
                }
                batch.results.append({"custom_id": custom_id, "result": {"type": "errored", "error": error}})
        batch.ended = True
        if batch.wire == "openai":
            self.files[f"{batch.id}-out"] = self._output(batch)
            self.files[f"{batch.id}-err"] = b"".join(json.dumps(r).encode() + b"\n" for r in batch.errors)
