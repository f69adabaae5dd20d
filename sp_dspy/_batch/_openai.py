"""OpenAI's batch API (``/v1/files`` + ``/v1/batches``) through the ``openai`` SDK, at the run's
API base: OpenAI itself, and servers that take the same input files."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Final

from .._lm._profiles import SELF_HOSTED_PLACEHOLDER_KEY, key_for
from ._wire import BatchAnswer, BatchState

if TYPE_CHECKING:
    from pathlib import Path

    from .._lm._direct import DirectChat, HttpRequest

#: The endpoint every line posts to (the one-at-a-time path's ``/chat/completions``).
ENDPOINT: Final = "/v1/chat/completions"
_ENDED = {"completed", "failed", "expired", "cancelled"}
#: Error codes of requests a batch never ran (they stay unanswered: a later batch sends them).
_NOT_RUN = {"batch_expired", "batch_cancelled"}


class OpenAIBatches:
    """OpenAI's Batch API: one JSONL input file per batch, 24 h completion window."""

    max_requests = 50_000
    max_bytes = 200 * 1024 * 1024

    def __init__(self, client: DirectChat, directory: Path) -> None:
        from openai import OpenAI

        key = key_for(client.config, client.api_base) or SELF_HOSTED_PLACEHOLDER_KEY
        self.sdk = OpenAI(
            api_key=key,
            base_url=client.api_base.strip().rstrip("/"),
            default_headers=dict(client.config.extra_headers or {}),
            timeout=client.config.timeout,
        )

    @staticmethod
    def line(custom_id: str, request: HttpRequest) -> dict[str, Any]:
        return {"custom_id": custom_id, "method": "POST", "url": ENDPOINT, "body": request.body}

    def submit(self, lines: list[dict[str, Any]], uploaded: Callable[[str], None]) -> str:
        data = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines).encode("utf-8")
        file = self.sdk.files.create(file=("batch.jsonl", data), purpose="batch")
        uploaded(file.id)
        return self._create(file.id)

    def adopt(self, file_id: str) -> str:
        for batch in self.sdk.batches.list(limit=100):
            if batch.input_file_id == file_id:
                return str(batch.id)
        return self._create(file_id)

    def _create(self, file_id: str) -> str:
        batch = self.sdk.batches.create(input_file_id=file_id, endpoint=ENDPOINT, completion_window="24h")
        return str(batch.id)

    def poll(self, batch_id: str) -> BatchState:
        batch = self.sdk.batches.retrieve(batch_id)
        counts = batch.request_counts
        early: str | None = None
        if batch.status in ("expired", "cancelled"):
            early = batch.status
        elif batch.status == "failed":
            reasons = [e.message or e.code or "" for e in (batch.errors.data or [])] if batch.errors else []
            early = "failed: " + ("; ".join(r for r in reasons if r) or "no reason given")
        return BatchState(
            status=batch.status,
            total=counts.total if counts else 0,
            done=counts.completed if counts else 0,
            failed=counts.failed if counts else 0,
            ended=batch.status in _ENDED,
            ended_early=early,
        )

    def answers(self, batch_id: str) -> Iterator[BatchAnswer]:
        batch = self.sdk.batches.retrieve(batch_id)
        for file_id in (batch.output_file_id, batch.error_file_id):
            if not file_id:
                continue
            for text in self.sdk.files.content(file_id).text.splitlines():
                if text.strip():
                    answer = answer_of(json.loads(text))
                    if answer is not None:
                        yield answer


def answer_of(line: dict[str, Any]) -> BatchAnswer | None:
    """One output/error-file line as an answer; None for a request the batch never ran."""
    custom_id = str(line.get("custom_id"))
    response = line.get("response") or {}
    body = response.get("body") if isinstance(response, dict) else None
    status = response.get("status_code") if isinstance(response, dict) else None
    if isinstance(status, int) and 200 <= status < 300 and isinstance(body, dict):
        return BatchAnswer(custom_id, body=body)
    if isinstance(status, int):
        error = body.get("error") if isinstance(body, dict) else None
        message = error.get("message") if isinstance(error, dict) else None
        return BatchAnswer(custom_id, status=status, message=str(message or body or ""))
    error = line.get("error") or {}
    code = error.get("code") if isinstance(error, dict) else None
    if code in _NOT_RUN:
        return None
    message = error.get("message") if isinstance(error, dict) else None
    return BatchAnswer(custom_id, status=500, message=str(message or code or "the batch failed this request"))
