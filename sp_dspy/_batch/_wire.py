"""What a provider's batch API is to sp-dspy: one small protocol, one module per wire, a registry.

A wire turns requests (exactly the bodies sp-dspy's HTTP engine would post one at a time) into
batch lines, submits them, reports a batch's state, and reads its answers back as the
one-at-a-time endpoint would have returned them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .._lm import HttpRequest


@dataclass(frozen=True)
class BatchState:
    """A batch as its provider last reported it: its own status word and request counts."""

    status: str
    total: int = 0
    done: int = 0
    failed: int = 0
    #: Whether the provider will change nothing more (done, failed, expired, cancelled).
    ended: bool = False
    #: Why the provider ended it early (``expired``, ``cancelled``, ``failed: <reason>``); None: it ran.
    ended_early: str | None = None

    def line(self, batch_id: str) -> str:
        """One progress line: ``batch ID: in_progress, 80/120 done, 2 failed``."""
        failed = f", {self.failed} failed" if self.failed else ""
        return f"batch {batch_id}: {self.status}, {self.done}/{self.total} done{failed}"


@dataclass(frozen=True)
class BatchAnswer:
    """One request's outcome: the answer's JSON (``body``), else its HTTP ``status`` and ``message``."""

    custom_id: str
    body: dict[str, Any] | None = None
    status: int = 0
    message: str = ""


class BatchWire(Protocol):
    """One provider's batch API, through its official SDK."""

    #: The provider's limits on one batch (requests, bytes of its input).
    max_requests: int
    max_bytes: int

    def line(self, custom_id: str, request: HttpRequest) -> dict[str, Any]:
        """The batch line of ``request`` (its body untouched): what ``--show-request --batch`` prints."""
        ...

    def submit(self, lines: list[dict[str, Any]], uploaded: Callable[[str], None]) -> str:
        """Create a batch of ``lines`` and return its id; ``uploaded(file_id)`` is called with an
        input file's id before the batch is created from it (so that a kill in between is recoverable)."""
        ...

    def adopt(self, file_id: str) -> str:
        """The batch created from the uploaded ``file_id`` (a run killed after creating it), else a
        new one from that file: never two batches of one file."""
        ...

    def poll(self, batch_id: str) -> BatchState: ...

    def answers(self, batch_id: str) -> Iterator[BatchAnswer]:
        """The ended batch's answers; requests it never ran (expired, cancelled) are left out."""
        ...
