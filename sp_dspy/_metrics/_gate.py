"""``--fail-under METRIC[:CELL]=VALUE``: the thresholds a CI job holds a guard to, checked on a score.

RMR and RMR@1.0 must be at least the value, RDR (a disagreement rate: lower is better) at most;
the cell is ``ALL`` unless named (``rmr:L2=50``, ``rmr_exact:tag billing=70``). A cell without a
scored case fails its threshold: a guard that answered nothing has not met it.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel

from .._errors import ConfigError
from ._score import ScoreReport

#: Each metric a threshold can name, and whether the value is an upper bound.
GATED_METRICS: dict[str, tuple[str, bool]] = {
    "rmr": ("rmr_avg", False),
    "rmr_exact": ("rmr_exact", False),
    "rdr": ("rdr", True),
}
#: The exit status of ``score`` and ``eval`` when a threshold is not met (2 is bad input, 3 an
#: unfinished run).
EXIT_BELOW_THRESHOLD = 4


class Threshold(BaseModel):
    """One ``--fail-under`` flag: ``metric`` (rmr, rmr_exact, rdr) in ``cell`` against ``value``."""

    metric: str
    cell: str = "ALL"
    value: float

    @property
    def upper_bound(self) -> bool:
        return GATED_METRICS[self.metric][1]

    def describe(self) -> str:
        return f"{self.metric}{'' if self.cell == 'ALL' else ':' + self.cell} {'<=' if self.upper_bound else '>='} {self.value:g}"


def parse_threshold(text: str) -> Threshold:
    """``rmr=60``, ``rdr=40``, ``rmr_exact:L2=50`` -> a ``Threshold``; ``ConfigError`` naming the flag otherwise."""
    spec, equals, raw = text.partition("=")
    metric, _, cell = spec.strip().partition(":")
    metric = metric.strip().lower()
    where = f"--fail-under {text!r}"
    if not equals or metric not in GATED_METRICS:
        raise ConfigError(
            f"{where}: expected METRIC=VALUE or METRIC:CELL=VALUE, METRIC one of {', '.join(GATED_METRICS)}"
        )
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{where}: the value must be a number from 0 to 100, got {raw!r}") from None
    if not 0 <= value <= 100:
        raise ConfigError(f"{where}: the value must be a number from 0 to 100, got {raw!r}")
    return Threshold(metric=metric, cell=cell.strip() or "ALL", value=value)


def check_cells(thresholds: Iterable[Threshold], cells: Iterable[str]) -> None:
    """Refuse a threshold on a cell the score does not have (``ConfigError``, before any verdict)."""
    known = list(cells)
    for threshold in thresholds:
        if threshold.cell not in known:
            raise ConfigError(
                f"--fail-under {threshold.describe()}: no cell {threshold.cell!r} (cells: {', '.join(known)})"
            )


def unmet(report: ScoreReport, thresholds: Iterable[Threshold]) -> list[str]:
    """One line per threshold the report does not meet, with the figure it has (empty: all met)."""
    chosen = list(thresholds)
    check_cells(chosen, report.cells)
    lines = []
    for threshold in chosen:
        key, upper = GATED_METRICS[threshold.metric]
        value = report.cells[threshold.cell].get(key)
        if value is None:
            lines.append(f"{threshold.describe()}: no scored case in {threshold.cell}")
        elif (value > threshold.value) if upper else (value < threshold.value):
            lines.append(f"{threshold.describe()}: it is {value:.2f}")
    return lines
