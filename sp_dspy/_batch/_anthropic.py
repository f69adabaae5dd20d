"""Anthropic's Message Batches through the ``anthropic`` SDK (the ``batch`` extra): each line is
the messages body the one-at-a-time path posts, under ``params``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from .._errors import ConfigError
from .._lm._profiles import SELF_HOSTED_PLACEHOLDER_KEY, key_for
from ._wire import BatchAnswer, BatchState

if TYPE_CHECKING:
    from pathlib import Path

    from .._lm._direct import DirectChat, HttpRequest

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
    """Anthropic's Message Batches: requests posted inline, 24 h to finish."""

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
        self.sdk = Anthropic(
            api_key=key,
            base_url=client.api_base.strip().rstrip("/").removesuffix("/v1"),
            default_headers=dict(client.config.extra_headers or {}),
            timeout=client.config.timeout,
        )

    @staticmethod
    def line(custom_id: str, request: HttpRequest) -> dict[str, Any]:
        return {"custom_id": custom_id, "params": request.body}

    def submit(self, lines: list[dict[str, Any]], uploaded: Callable[[str], None]) -> str:
        batch = self.sdk.messages.batches.create(requests=lines)  # type: ignore[arg-type]  # our bodies, verbatim
        return str(batch.id)

    def adopt(self, file_id: str) -> str:
        raise AssertionError("Anthropic batches have no input file")  # submit never reports one

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

    def answers(self, batch_id: str) -> Iterator[BatchAnswer]:
        for item in self.sdk.messages.batches.results(batch_id):
            result = item.result
            if result.type == "succeeded":
                yield BatchAnswer(
                    item.custom_id, body=result.message.model_dump(mode="json", exclude_none=True)
                )
            elif result.type == "errored":
                error = result.error.error
                status = _STATUS.get(error.type, 500)
                yield BatchAnswer(item.custom_id, status=status, message=error.message)
            # canceled, expired: never run, so no answer (a later batch sends them)
