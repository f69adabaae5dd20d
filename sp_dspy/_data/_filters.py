"""Select cases by level and domain, then slice; a filter that selects no case is an error."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeVar

from .._errors import DataError
from ._types import LEVELS

if TYPE_CHECKING:
    from ._schema import Case

T = TypeVar("T")


def filter_cases(
    cases: Sequence[Case],
    *,
    level: str | Sequence[str] | None = None,
    domain: str | Sequence[str] | None = None,
    limit: int | None = None,
    start_idx: int = 0,
) -> list[Case]:
    """Select cases by level and domain, then slice by ``start_idx`` and ``limit``.

    ``DataError`` for a level or domain no case has (alone or together), or a ``start_idx`` past the end.
    """
    levels = _as_set(level, upper=True)
    if levels is not None and not levels <= set(LEVELS):
        raise DataError(f"--level: expected L0, L1 or L2, got {','.join(sorted(levels - set(LEVELS)))}")
    domains = _as_set(domain)
    if levels is not None:
        _refuse_absent("--level", levels, {c.level for c in cases}, "at level")
    if domains is not None:
        _refuse_absent("--domain", domains, {c.domain for c in cases}, "in domain")
    selected = [
        c for c in cases if (levels is None or c.level in levels) and (domains is None or c.domain in domains)
    ]
    if not selected and levels is not None and domains is not None:
        raise DataError(
            f"--level {','.join(sorted(levels))} --domain {','.join(sorted(domains))}: no case has both"
        )
    return slice_cases(selected, start_idx=start_idx, limit=limit)


def slice_cases(cases: Sequence[T], *, start_idx: int = 0, limit: int | None = None) -> list[T]:
    """``cases[start_idx : start_idx + limit]``; a ``start_idx`` that leaves no case is an error."""
    if start_idx < 0 or (limit is not None and limit < 0):
        raise DataError("--start-idx and --limit must not be negative")
    if start_idx and start_idx >= len(cases):
        raise DataError(
            f"--start-idx {start_idx}: only {len(cases)} case(s) selected, so it must be below {len(cases)}"
        )
    end = None if limit is None else start_idx + limit
    return list(cases[start_idx:end])


def _refuse_absent(flag: str, wanted: set[str], present: set[str], relation: str) -> None:
    absent = sorted(wanted - present)
    if absent:
        known = ", ".join(sorted(present)) or "no case at all"
        raise DataError(f"{flag}: no case {relation} {', '.join(absent)} (the dataset has: {known})")


def _as_set(value: str | Sequence[str] | None, *, upper: bool = False) -> set[str] | None:
    if value is None:
        return None
    items = value.split(",") if isinstance(value, str) else list(value)
    cleaned = {item.strip().upper() if upper else item.strip() for item in items if item.strip()}
    return cleaned or None
