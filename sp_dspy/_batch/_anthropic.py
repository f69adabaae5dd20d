"""Anthropic's Message Batches through the ``anthropic`` SDK (the ``batch`` extra): each line is
the messages body the one-at-a-time path posts, under ``params``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._errors import ConfigError
from .._lm import SELF_HOSTED_PLACEHOLDER_KEY, key_for
from ._wire import CLOCK_SLACK_S, BatchAnswer, BatchState, Intent

if TYPE_CHECKING:
    from pathlib import Path

    from .._lm import DirectChat, HttpRequest

#: HTTP statuses of Anthropic's error types (a failed request is recorded as sending it would have).
_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}


class AnthropicBatches:
    """Anthropic's Message Batches: requests posted inline, 24 h to finish.

    A batch carries no metadata: one created by a killed process is recognised by its request
    count and creation time (``find``), and its answers' ids are checked as they are read.
    """

    max_requests = 100_000
    max_bytes = 256 * 1024 * 1024

    def __init__(self, client: DirectChat, directory: Path) -> None:
        try:
            from anthropic import Anthropic
        except ImportError:
            raise ConfigError(
                "--batch with an Anthropic model needs the anthropic SDK: pip install 'sp-dspy[batch]'"
            ) from None
        key = key_for(client.config, client.api_base) or SELF_HOSTED_PLACEHOLDER_KEY
        self.timeout = client.config.timeout
        self.sdk = Anthropic(
            api_key=key,
            base_url=client.api_base.strip().rstrip("/").removesuffix("/v1"),
            default_headers=dict(client.config.extra_headers or {}),
            timeout=client.config.timeout,
            max_retries=0,  # the run retries reads itself; a create is never retried blindly
        )

    @staticmethod
    def line(custom_id: str, request: HttpRequest) -> dict[str, Any]:
        return {"custom_id": custom_id, "params": request.body}

    @staticmethod
    def upload(lines: list[dict[str, Any]]) -> str | None:
        return None  # the create call carries the requests

    def create(self, lines: list[dict[str, Any]], intent: Intent) -> str:
        batch = self.sdk.messages.batches.create(requests=lines)  # type: ignore[arg-type]  # our bodies, verbatim
        return str(batch.id)

    def find(self, intent: Intent, known: set[str]) -> list[str]:
        if intent.at is None:
            raise ConfigError("the run's log has no time for this batch, so no batch can be matched to it")
        latest = intent.at + CLOCK_SLACK_S + float(self.timeout or 600)
        found: list[str] = []
        for batch in self.sdk.messages.batches.list(limit=100):  # newest first, page after page
            created = batch.created_at.timestamp()
            if created < intent.at - CLOCK_SLACK_S:
                break
            counts = batch.request_counts
            total = counts.processing + counts.succeeded + counts.errored + counts.canceled + counts.expired
            if created <= latest and total == len(intent.custom_ids) and batch.id not in known:
                found.append(str(batch.id))
        return found

    def poll(self, batch_id: str) -> BatchState:
        batch = self.sdk.messages.batches.retrieve(batch_id)
        counts = batch.request_counts
        total = counts.processing + counts.succeeded + counts.errored + counts.canceled + counts.expired
        ended = batch.processing_status == "ended"
        early = "expired" if ended and counts.expired else "cancelled" if ended and counts.canceled else None
        return BatchState(
            status=batch.processing_status,
            total=total,
            done=counts.succeeded + counts.errored,
            failed=counts.errored,
            ended=ended,
            ended_early=early,
        )

    def output(self, batch_id: str) -> list[bytes]:
        with self.sdk.messages.batches.with_streaming_response.results(batch_id) as response:
            return response.read().splitlines()

    @staticmethod
    def answer_of(line: dict[str, Any]) -> BatchAnswer | None:
        custom_id = str(line.get("custom_id"))
        result = line.get("result")
        kind = result.get("type") if isinstance(result, dict) else None
        if kind == "succeeded" and isinstance(result, dict) and isinstance(result.get("message"), dict):
            return BatchAnswer(custom_id, body=result["message"])
        if kind == "errored" and isinstance(result, dict):
            outer = result.get("error")
            error = outer.get("error", outer) if isinstance(outer, dict) else None
            error = error if isinstance(error, dict) else {}
            status = _STATUS.get(str(error.get("type")), 500)
            return BatchAnswer(custom_id, status=status, message=str(error.get("message") or "errored"))
        if kind in ("canceled", "expired"):
            return None  # never run, so no answer (a later batch sends them)
        raise ValueError(f"a result of type {kind!r}" if kind else "no result")
