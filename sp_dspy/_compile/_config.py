"""The settings of one compile (everything but the LMs), validated once."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from sp_dspy._compile._budget import BudgetCaps
from sp_dspy._compile._data import DEFAULT_RATIOS


class CompileConfig(BaseModel):
    """What to compile, on which data, under which caps, into which directory.

    ``top_k``: how many of the optimizer's candidates are scored on dev at the end
    (the optimizer's own pick first, then the best others it tried); the starting
    program is always one more contender, so a compile never ships a program that
    is worse on dev than where it started.
    """

    model_config = ConfigDict(extra="forbid")

    protocol: Literal["per-policy", "per-rule"] = "per-policy"
    cot: bool = False
    optimizer: str
    optimizer_config: Path | None = None
    overrides: dict[str, Any] = Field(default_factory=dict)
    dataset: str | None = None
    benchmark: Literal["safepyramid", "pku-saferlhf"] = "safepyramid"
    splits: Path | None = None
    ratios: tuple[float, float, float] = DEFAULT_RATIOS
    lenient: bool = False
    seed: int = 0
    out: Path
    caps: BudgetCaps = Field(default_factory=BudgetCaps)
    top_k: int = Field(default=1, ge=1)
    concurrency: int = Field(default=8, ge=1)
    dry_run: bool = False
    force: bool = False  # replace an artifact already in ``out``
