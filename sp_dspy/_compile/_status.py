"""What a running compile is doing, for a live progress display: phase, spend, best scores.

The compile updates one :class:`CompileStatus` as it goes; a display (the CLI's)
reads it from another thread or is told of each new phase through ``on_phase``.
The library prints nothing itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sp_dspy._compile._budget import Budget, BudgetCaps


@dataclass
class CompileStatus:
    """Live state of one compile.

    ``start_score``: the starting program's dev score once known; ``best_score``:
    the best complete dev score so far (the start's, then any final candidate's);
    ``recorder``: the optimizer's candidate recorder while it runs (candidates
    tried and their scores on the optimizer's own metric).
    """

    caps: BudgetCaps = field(default_factory=BudgetCaps)
    phase: str = "starting"
    budget: Budget | None = None
    start_score: float | None = None
    best_score: float | None = None
    recorder: Any = None
    on_phase: Callable[[CompileStatus], None] | None = None

    def enter(self, phase: str) -> None:
        """Start a new phase and tell the display."""
        self.phase = phase
        if self.on_phase is not None:
            self.on_phase(self)

    def scored(self, score: float, *, start: bool = False) -> None:
        """Record a complete dev score (the starting program's when ``start``)."""
        if start:
            self.start_score = score
        if self.best_score is None or score > self.best_score:
            self.best_score = score

    def tried(self) -> tuple[int, float | None]:
        """Candidates the optimizer has tried so far, and the best one's mean metric (x 100)."""
        if self.recorder is None:
            return 0, None
        return len(self.recorder.states), self.recorder.best_mean()
