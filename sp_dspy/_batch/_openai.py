"""OpenAI's batch API (``/v1/files`` + ``/v1/batches``) through the ``openai`` SDK, at the run's
API base: OpenAI itself, and servers that take the same input files."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final

from .._lm import SELF_HOSTED_PLACEHOLDER_KEY, key_for
from ._wire import CLOCK_SLACK_S, BatchAnswer, BatchState, Intent

if TYPE_CHECKING:
    from pathlib import Path

    from .._lm import DirectChat, HttpRequest

#: The endpoint every line posts to (the one-at-a-time path's ``/chat/completions``).
ENDPOINT: Final = "/v1/chat/completions"
#: The batch metadata key holding the intent's fingerprint (how ``--resume`` recognises its batch).
INTENT_KEY: Final = "sp_dspy_intent"
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
            max_retries=0,  # the run retries reads itself; a create is never retried blindly
        )

    @staticmethod
    def line(custom_id: str, request: HttpRequest) -> dict[str, Any]:
        return {"custom_id": custom_id, "method": "POST", "url": ENDPOINT, "body": request.body}

    def upload(self, lines: list[dict[str, Any]]) -> str | None:
        data = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines).encode("utf-8")
        return str(self.sdk.files.create(file=("batch.jsonl", data), purpose="batch").id)

    def create(self, lines: list[dict[str, Any]], intent: Intent) -> str:
        if intent.file is None:
            raise ValueError("an OpenAI batch is created from an uploaded input file")
        batch = self.sdk.batches.create(
            input_file_id=intent.file,
            endpoint=ENDPOINT,
            completion_window="24h",
            metadata={INTENT_KEY: intent.fingerprint},
        )
        return str(batch.id)

    def find(self, intent: Intent, known: set[str]) -> list[str]:
        found: list[str] = []
        for batch in self.sdk.batches.list(limit=100):  # newest first, page after page
            if intent.at is not None and batch.created_at < intent.at - CLOCK_SLACK_S:
                break
            mine = (batch.metadata or {}).get(INTENT_KEY) == intent.fingerprint
            if (mine or (intent.file and batch.input_file_id == intent.file)) and batch.id not in known:
                found.append(str(batch.id))
        return found

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

    def output(self, batch_id: str) -> list[bytes]:
        batch = self.sdk.batches.retrieve(batch_id)
        lines: list[bytes] = []
        for file_id in (batch.output_file_id, batch.error_file_id):
            if file_id:
                lines += self.sdk.files.content(file_id).content.splitlines()
        return lines

    @staticmethod
    def answer_of(line: dict[str, Any]) -> BatchAnswer | None:
        return answer_of(line)


def answer_of(line: dict[str, Any]) -> BatchAnswer | None:
    """One output/error-file line as an answer; None for a request the batch never ran.

    Raises:
        ValueError: the line has neither a response nor an error.
    """
    custom_id = str(line.get("custom_id"))
    response = line.get("response")
    body = response.get("body") if isinstance(response, dict) else None
    status = response.get("status_code") if isinstance(response, dict) else None
    if isinstance(status, int) and 200 <= status < 300 and isinstance(body, dict):
        return BatchAnswer(custom_id, body=body)
    if isinstance(status, int) and status >= 300:
        error = body.get("error") if isinstance(body, dict) else None
        message = error.get("message") if isinstance(error, dict) else None
        return BatchAnswer(custom_id, status=status, message=str(message or body or ""))
    error = line.get("error")
    if not isinstance(error, dict):
        raise ValueError("neither a response with a status nor an error")
    code = error.get("code")
    if code in _NOT_RUN:
        return None
    message = error.get("message")
    return BatchAnswer(custom_id, status=500, message=str(message or code or "the batch failed this request"))
