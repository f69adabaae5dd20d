"""A compile's failed LM calls: counted by error class, stopped early by eval's rules, summarised.

Dev scoring and the optimizer both call through ``BudgetedLM``; each finished call is
observed here, so a compile whose calls fail says so (on the console while it runs, in its
summary and in the artifact manifest's ``warnings``) instead of comparing scores of zero.
A lasting failure (a refused key, an unknown model, a dead server, a streak of rejected
requests) stops the compile with the same one line ``eval`` prints (:class:`EarlyStop`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from sp_dspy._lm import LMConfig
from sp_dspy._run_manifest import ErrorSummary
from sp_dspy._runner import EarlyStop
from sp_dspy._usage import Usage


@dataclass(frozen=True)
class CallOutcome:
    """One finished LM call as eval's early stop and error summary read a record."""

    error_class: str | None = None  # None: it answered
    error: str | None = None
    role: str = "task"
    prompt_tokens: int = 0  # estimated
    usage: Usage | None = None
    cache_hits: int = 0
    batched: int = 0  # compiles call one at a time: never a batch answer


@dataclass
class CallFailures:
    """Every LM call of one compile, the failed ones by error class; shared by the LM wrappers."""

    calls: int = 0
    failed: list[CallOutcome] = field(default_factory=list)
    early: EarlyStop = field(default_factory=EarlyStop)
    stopped: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __deepcopy__(self, memo: dict[int, Any]) -> CallFailures:
        return self  # shared by every copy of a budgeted LM, as its budget is

    def observe(self, call: CallOutcome) -> bool:
        """Count one finished call; True once the compile must stop."""
        with self._lock:
            self.calls += 1
            if call.error_class is not None:
                self.failed.append(call)
            self.stopped = self.early.observe(call) or self.stopped
            return self.stopped

    def summary(self) -> ErrorSummary:
        """The failed calls as ``eval`` summarises its failed units, with the largest prompt per class."""
        with self._lock:
            failed = list(self.failed)
            summary = ErrorSummary.of(dict(enumerate(failed)), self.calls)
        for entry in summary.classes:
            entry.prompt_tokens = max(c.prompt_tokens for c in failed if c.error_class == entry.error_class)
        return summary

    def counts(self) -> str:
        """``context_length 12, auth 1``: the failed calls so far by class (empty when none)."""
        return ", ".join(f"{c.error_class} {c.count}" for c in self.summary().classes)

    def stop_line(self, configs: dict[str, LMConfig], log: str) -> str:
        """The one line that ends a compile stopped early: eval's reason, then where to look."""
        role = next((c.role for c in self.failed if c.error_class == self.early.kind), "task")
        reason = self.early.reason(configs.get(role) or configs["task"], what="call(s)")
        return f"compile {reason}; details in {log}; after the fix, rerun the same command"
