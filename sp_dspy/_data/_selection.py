"""Which cases of a loaded dataset a run takes: the one selection eval applies and readers re-apply.

``eval`` selects its cases with a ``CaseSelection`` and records it in the run's manifest
(``settings.data``); ``score``, ``compare``, ``report`` and ``show`` re-apply that recorded
selection to the dataset to know which cases the run was meant to answer. Re-applying the
selection, rather than recording every selected id, keeps one path for both the run and the
readers (and for ``score --split/--limit`` on a file without a manifest), keeps the manifest
small on a full benchmark, and the manifest's dataset and split hashes say when the data
changed under it (a split of another dataset is refused by ``select_split``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .._errors import ConfigError
from ._filters import filter_cases, slice_cases
from ._splits import select_split

if TYPE_CHECKING:
    from ._loader import Benchmark
    from ._schema import Case


def resolved_path(text: str) -> str:
    """An existing local file as an absolute path; anything else (a Hub id) as it is."""
    path = Path(text).expanduser()
    return str(path.resolve()) if path.exists() else text


def parse_shard(text: str) -> tuple[int, int]:
    """``"2/4"`` -> (2, 4): the third of four interleaved shards (0-based index)."""
    index, _, count = text.partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        raise ConfigError(f"--shard: expected I/N such as 0/4, got {text!r}") from None
    if n < 1 or not 0 <= i < n:
        raise ConfigError(f"--shard: need 0 <= I < N, got {text!r}")
    return i, n


class CaseSelection(BaseModel):
    """Level and domain filters, ``--split FILE:PART``, ``--start-idx``/``--limit``, ``--shard I/N``,
    applied in that order. Reading a manifest's ``settings.data`` ignores its other keys."""

    model_config = ConfigDict(extra="ignore")

    level: str | None = None
    domain: str | None = None
    split: str | None = None
    limit: int | None = Field(default=None, ge=1)
    start_idx: int = Field(default=0, ge=0)
    shard: str | None = None

    @field_validator("shard")
    @classmethod
    def _shard(cls, value: str | None) -> str | None:
        if value is not None:
            parse_shard(value)
        return value

    def apply(self, loaded: Benchmark) -> list[Case]:
        """The selected cases of ``loaded`` (all its cases, unfiltered), in the order eval runs them."""
        cases = filter_cases(loaded.cases, level=self.level, domain=self.domain)
        if self.split:
            cases = select_split(cases, self.split, dataset_hash=loaded.content_hash)
        cases = slice_cases(cases, start_idx=self.start_idx, limit=self.limit)
        if self.shard:
            index, count = parse_shard(self.shard)
            cases = cases[index::count]
        return cases

    @property
    def takes_part(self) -> bool:
        """Whether it takes part of the cases beyond level and domain: a split, a slice or a shard."""
        return bool(self.split or self.start_idx or self.limit is not None or self.shard)

    def describe(self) -> str:
        """The selection as the flags that make it (``every case`` for none); a split by its file name."""
        split = None
        if self.split:
            file, _, part = self.split.rpartition(":")
            split = f"{Path(file).name}:{part}"
        flags = {
            "--level": self.level, "--domain": self.domain, "--split": split,
            "--start-idx": self.start_idx or None, "--limit": self.limit, "--shard": self.shard,
        }  # fmt: skip
        return (
            " ".join(f"{flag} {value}" for flag, value in flags.items() if value is not None) or "every case"
        )

    def resolved_split(self) -> str | None:
        """``--split`` with its file made absolute, so the recorded selection holds from any directory."""
        if not self.split:
            return None
        file, sep, part = self.split.rpartition(":")
        return f"{Path(file).resolve()}{sep}{part}" if file else self.split
