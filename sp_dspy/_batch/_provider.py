"""Every call of the batch path to a provider, classified, redacted and worded as the one-at-a-time
path words its failures: one line, exit 2, never a traceback, never a key.

Reads (polling, listing, downloading, uploading an input file) are retried with backoff while the
failure is one that passes (a 5xx, a rate limit, a timeout, a dropped connection, an answer the SDK
could not read), up to ``SP_DSPY_BATCH_PATIENCE_S`` seconds; then one line says what to do. A batch
creation is never retried: whether the provider created it is unknown, so ``--resume`` asks the
provider (``_recover``) before anything is sent again.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from .._errors import ConfigError, OutputError, SpDspyError
from .._lm import classify_error, display_endpoint
from .._redact import redact

if TYPE_CHECKING:
    from .._lm import LMConfig

T = TypeVar("T")

PATIENCE_ENV = "SP_DSPY_BATCH_PATIENCE_S"
#: Seconds a poll or download keeps being retried before the run stops with what to do.
DEFAULT_PATIENCE_S = 900.0
MAX_BACKOFF_S = 60.0
#: Failures that pass: a read meeting one is asked again after a pause.
PASSING = frozenset({"server_error", "rate_limit", "timeout", "connection", "parse", "other"})
#: While a batch runs, a refused connection passes too (the provider restarting); at the first
#: call of a run it is a wrong ``--api-base``, said at once.
WHILE_RUNNING = PASSING | {"unreachable"}
#: Failures that say nothing was created: the request never reached the provider, or it refused it.
REFUSED = frozenset(
    {"auth", "billing", "not_found", "bad_request", "unreachable", "context_length", "config"}
)
#: What the user can change, by failure (as the one-at-a-time path's early stop says it).
_FIXES = {
    "auth": "the API key is missing or refused: set the provider's key variable (e.g. OPENAI_API_KEY), "
    "or name yours with --api-key-env VAR",
    "billing": "the provider refused for billing: check the account's credit or use another key",
    "unreachable": "nothing answers at {base}: start the server or fix --api-base",
    "not_found": "the server at {base} has no batch API sp-dspy can use (no such route; a chat-only "
    "server answers one request at a time): run without --batch, or fix --api-base",
    "bad_request": "the server at {base} rejects the batch API's requests (a chat-only server answers "
    "one request at a time): run without --batch, or fix --api-base",
}


class ProviderFailed(OutputError):
    """A provider call of the batch path failed: one redacted line saying what to do; ``clause``
    says what failed and how, for a line that goes on to say something else."""

    def __init__(self, message: str, kind: str, clause: str) -> None:
        self.kind, self.clause = kind, clause
        super().__init__(message)


def patience() -> float:
    """``SP_DSPY_BATCH_PATIENCE_S``, else :data:`DEFAULT_PATIENCE_S`."""
    text = os.environ.get(PATIENCE_ENV, "").strip()
    try:
        return max(0.0, float(text)) if text else DEFAULT_PATIENCE_S
    except ValueError:
        raise ConfigError(f"{PATIENCE_ENV}: expected seconds, got {text!r}") from None


def detail(exc: BaseException) -> str:
    """An exception as one short redacted clause (the SDKs put the server's answer, key and all, in it)."""
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return redact(text[:300] + ("..." if len(text) > 300 else ""))


@dataclass
class Provider:
    """The run's provider as the batch path calls it: where, with what key settings, how patiently."""

    config: LMConfig
    base: str
    resume_hint: str
    patience_s: float
    first_backoff_s: float = 1.0

    def fix(self, kind: str) -> str:
        if kind == "auth" and self.config.api_key_env:
            return f"the API key is missing or refused: check the key in ${self.config.api_key_env}"
        return _FIXES.get(kind, "").format(base=display_endpoint(self.base))

    def failed(self, what: str, exc: BaseException, kind: str) -> ProviderFailed:
        """The line of a failure retrying cannot fix (a wrong key, address or server)."""
        fix = self.fix(kind) or "check --lm, --api-base and the provider's status"
        clause = f"{what} failed with {kind} ({detail(exc)})"
        return ProviderFailed(
            f"--batch: {clause}; {fix}; after the fix, continue with {self.resume_hint}", kind, clause
        )

    def create(self, what: str, call: Callable[[], T], *, refused: Callable[[str], None]) -> T:
        """``call()`` once: a batch creation. A failure that says nothing was created calls
        ``refused(kind)`` and is :meth:`failed`'s line; any other leaves the batch's fate to ``--resume``."""
        try:
            return call()
        except SpDspyError:
            raise  # already one line of sp-dspy's own (a local run-batch that cannot start)
        except Exception as exc:
            kind = classify_error(exc)
            if kind in REFUSED:
                refused(kind)
                raise self.failed(what, exc, kind) from None
            clause = f"{what} failed with {kind} ({detail(exc)})"
            raise ProviderFailed(
                f"--batch: {clause}; the provider may have created it: {self.resume_hint} asks the provider "
                "for it before sending anything again",
                kind,
                clause,
            ) from None

    def patiently(
        self, what: str, call: Callable[[], T], *, kept: str = "", passing: frozenset[str] = PASSING
    ) -> T:
        """``call()``, asked again with backoff while it fails in a way that passes, for at most the
        patience; then one line saying so and what to do (``kept``: what the run keeps meanwhile)."""
        start = time.monotonic()
        pause = self.first_backoff_s
        while True:
            try:
                return call()
            except SpDspyError:
                raise  # already one line of sp-dspy's own
            except Exception as exc:
                kind = classify_error(exc)
                if kind not in passing:
                    raise self.failed(what, exc, kind) from None
                waited = time.monotonic() - start
                if waited >= self.patience_s:
                    clause = f"{what} kept failing with {kind} for {waited:.0f} s ({detail(exc)})"
                    raise ProviderFailed(
                        f"--batch: {clause}; {kept or 'nothing is lost'}: continue later with "
                        f"{self.resume_hint} (or wait longer: {PATIENCE_ENV}, now {self.patience_s:g} s)",
                        kind,
                        clause,
                    ) from None
                time.sleep(min(pause, self.patience_s - waited))
                pause = min(pause * 2, MAX_BACKOFF_S)
