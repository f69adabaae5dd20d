"""The literal types of the case schema: levels and rubric rule types."""

from __future__ import annotations

from typing import Literal

Level = Literal["L0", "L1", "L2"]
RuleType = Literal["decisive", "distractor", "exception", "conditional"]
LEVELS: tuple[Level, ...] = ("L0", "L1", "L2")
