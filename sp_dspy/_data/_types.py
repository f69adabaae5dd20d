"""The literal types of the case schema, in a module that builds no pydantic model.

``ScoringCase`` (the scorer's view of a case) needs them but not the full ``Case``
models; keeping them here lets ``sp-dspy score`` answer from its parse cache without
paying for building models it never uses.
"""

from __future__ import annotations

from typing import Literal

Level = Literal["L0", "L1", "L2"]
RuleType = Literal["decisive", "distractor", "exception", "conditional"]
LEVELS: tuple[Level, ...] = ("L0", "L1", "L2")
