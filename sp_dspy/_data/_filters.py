"""``filter_cases``: select cases by level and domain, then slice.

Generic over anything with a ``level`` and a ``domain``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

from .._errors import DataError
from ._types import LEVELS


class _Filterable(Protocol):
    @property
    def level(self) -> str: ...

    @property
    def domain(self) -> str: ...


C = TypeVar("C", bound=_Filterable)


def filter_cases(
    cases: Sequence[C],
    *,
    level: str | Sequence[str] | None = None,
    domain: str | Sequence[str] | None = None,
    limit: int | None = None,
    start_idx: int = 0,
) -> list[C]:
    """Select cases by level and domain, then slice by ``start_idx`` and ``limit``."""
    levels = _as_set(level, upper=True)
    if levels is not None and not levels <= set(LEVELS):
        raise DataError(f"--level: expected L0, L1 or L2, got {','.join(sorted(levels - set(LEVELS)))}")
    domains = _as_set(domain)
    selected = [
        c for c in cases if (levels is None or c.level in levels) and (domains is None or c.domain in domains)
    ]
    if start_idx < 0 or (limit is not None and limit < 0):
        raise DataError("--start-idx and --limit must not be negative")
    end = None if limit is None else start_idx + limit
    return selected[start_idx:end]


def _as_set(value: str | Sequence[str] | None, *, upper: bool = False) -> set[str] | None:
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else list(value)
    cleaned = {item.strip().upper() if upper else item.strip() for item in items if item.strip()}
    return cleaned or None
