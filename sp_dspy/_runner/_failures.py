"""Failed units of a run: when they stop it early (:class:`EarlyStop`), and how a run reports them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .._errors import SpDspyError
from .._lm import is_lasting

if TYPE_CHECKING:
    from .._lm import LMConfig
    from .._run_manifest import RecordFacts

#: A bad request may be one case's fault; this many in a row (no success between) are the run's.
BAD_REQUEST_STREAK = 3
#: Failures about the endpoint or the account rather than the case: the first one stops the run.
_RUN_WIDE = frozenset({"auth", "billing", "not_found", "unreachable", "config"})

#: What the user can change so that calls failing with a class succeed (others: ``_REJECTED``).
_FIXES = {
    "auth": "the API key is missing or refused: set the provider's key variable "
    "(e.g. OPENAI_API_KEY), or name yours with --api-key-env VAR",
    "billing": "the provider refused for billing: check the account's credit or use another key",
    "not_found": "no model {model!r} (or no such route) at {base}: check --lm and --api-base",
    "unreachable": "nothing answers at {base}: start the server (sp-dspy serve) or fix --api-base",
    "config": "the LM settings are incomplete or wrong: check --lm, --api-base and --api-key-env",
}
_REJECTED = (
    "the server rejects the requests: check the model's settings (--max-tokens, --temperature, "
    "--reasoning-effort, --json-schema) and --transport"
)


def fix_for(kind: str, lm: LMConfig) -> str:
    """What the user can change so that calls failing with ``kind`` succeed."""
    if kind == "auth" and lm.api_key_env:
        return f"the API key is missing or refused: check the key in ${lm.api_key_env}"
    base = ", ".join(lm.api_bases) or "the provider's default address"
    return _FIXES.get(kind, _REJECTED).format(model=lm.model, base=base)


class RunStopped(SpDspyError):
    """A run ended early because its calls failed for a reason retrying cannot fix."""

    def __init__(self, kind: str, reason: str, resume: str) -> None:
        self.kind, self.reason = kind, reason
        super().__init__(f"{reason}; after the fix, continue with {resume}")


@dataclass
class EarlyStop:
    """Watches finished records; says when the run's failures show the rest would fail too.

    A run-wide failure stops at once, ``bad_request`` after :data:`BAD_REQUEST_STREAK` in
    a row; transient failures (rate limits, 5xx, timeouts) were retried and never stop a run.
    """

    streak: int = 0
    failed: dict[str, int] = field(default_factory=dict)  # lasting failures so far, by class
    #: The class the stop is reported under (run-wide ones take precedence) and its first message.
    kind: str | None = None
    first_error: str = ""

    def observe(self, record: RecordFacts) -> bool:
        """Count ``record``; True when the run should take no further units."""
        kind = record.error_class
        if kind is None or not is_lasting(kind):
            self.streak = 0
            return False
        self.streak += 1
        self.failed[kind] = self.failed.get(kind, 0) + 1
        if self.kind is None or (kind in _RUN_WIDE and self.kind not in _RUN_WIDE):
            self.kind, self.first_error = kind, record.error or kind
        return kind in _RUN_WIDE or self.streak >= BAD_REQUEST_STREAK

    def reason(self, lm: LMConfig, *, what: str = "unit(s)") -> str:
        """``stopped early: 1 unit(s) failed with auth (...); FIX``: the stop, as eval and compile say it."""
        kind = self.kind or "bad_request"
        return (
            f"stopped early: {self.failed.get(kind, 0)} {what} failed with {kind} ({self.first_error}); "
            f"{fix_for(kind, lm)}"
        )

    def error(self, lm: LMConfig, *, results_file: Path, kept: int, resume: str) -> RunStopped:
        """The one-line error that ends a stopped run."""
        reason = f"run {self.reason(lm)}. {kept} record(s) kept in {results_file}"
        return RunStopped(self.kind or "bad_request", reason, resume)
