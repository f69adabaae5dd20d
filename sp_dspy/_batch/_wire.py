"""What a provider's batch API is to sp-dspy: one small protocol, one module per wire, a registry.

A wire turns requests (exactly the bodies sp-dspy's HTTP engine would post one at a time) into
batch lines, submits them, finds a batch submitted by a process killed before it learnt the id,
reports a batch's state, and hands back its output lines as the provider wrote them (reading them
one by one is the run's job: ``_output``). Wires raise the SDK's own errors; ``_provider``
classifies, retries and words them.
"""

from __future__ import annotations

import hashlib
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


@dataclass(frozen=True)
class Intent:
    """A batch about to be created, logged before the create call: a process killed during that
    call leaves it, and ``--resume`` asks the provider for a batch matching it before sending again.

    ``at`` is the wall-clock time it was logged (None in logs written before intents were);
    ``file`` the input file uploaded for it (OpenAI): the upload comes first, as a kill during it
    leaves nothing that is paid for.
    """

    fingerprint: str
    custom_ids: tuple[str, ...]
    at: float | None = None
    file: str | None = None


def fingerprint(custom_ids: list[str]) -> str:
    """The id of a batch's request set: the hash of its custom ids (also OpenAI's batch metadata)."""
    return hashlib.sha256("\n".join(custom_ids).encode()).hexdigest()[:24]


#: Seconds of clock difference between this machine and the provider a match allows.
CLOCK_SLACK_S = 600.0


class BatchWire(Protocol):
    """One provider's batch API, through its official SDK."""

    #: The provider's limits on one batch (requests, bytes of its input).
    max_requests: int
    max_bytes: int

    def line(self, custom_id: str, request: HttpRequest) -> dict[str, Any]:
        """The batch line of ``request`` (its body untouched): what ``--show-request --batch`` prints."""
        ...

    def upload(self, lines: list[dict[str, Any]]) -> str | None:
        """Upload the input file of ``lines`` and return its id; None: the create call carries them."""
        ...

    def create(self, lines: list[dict[str, Any]], intent: Intent) -> str:
        """Create the batch ``intent`` logged (of ``lines``, or of its uploaded ``file``); its id."""
        ...

    def find(self, intent: Intent, known: set[str]) -> list[str]:
        """The ids of batches on the provider that may be the one ``intent`` logged (none of ``known``):
        none when the listing shows none was created, several when it cannot tell them apart."""
        ...

    def poll(self, batch_id: str) -> BatchState: ...

    def output(self, batch_id: str) -> list[bytes]:
        """The ended batch's output lines (answers and errors), as the provider sent them."""
        ...

    def answer_of(self, line: dict[str, Any]) -> BatchAnswer | None:
        """One output line as an answer; None for a request the batch never ran (expired, cancelled).

        Raises:
            ValueError: the line is not one this wire's output holds.
        """
        ...
