"""Names for variants: who produced a result set (from the records' ``model_name``,
``program``, ``layout``; else the file name), and a unique label for each.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .._errors import ConfigError
from .._metrics import ResultSet

if TYPE_CHECKING:
    from ._model import VariantResult

#: The conventional baseline: the official fixed prompt, one call per policy.
OFFICIAL_PER_POLICY = "official-per-policy"


@dataclass(frozen=True, slots=True)
class Provenance:
    """What the records say produced them; ``None`` where they do not say."""

    model: str | None
    program: str | None
    protocol: str
    layout: str | None

    @property
    def variant(self) -> str:
        """``program-protocol`` (e.g. ``dspy-per-rule``), ``-prefix`` for the cache-friendly layout."""
        name = f"{self.program}-{self.protocol}" if self.program else self.protocol
        return f"{name}-{self.layout}" if self.layout not in (None, "official") else name


def _joined(results: ResultSet, key: str) -> str | None:
    """The distinct non-empty string values of ``key`` across records, joined by ``+``."""
    found: list[str] = []
    for record in [*results.records.values(), *results.judgments]:
        value = getattr(record, key, None)
        if isinstance(value, str) and value and value not in found:
            found.append(value)
    if key == "program":
        found = [Path(v).name if "/" in v else v for v in found]
    return "+".join(found) if found else None


def describe(results: ResultSet, mode: str) -> Provenance:
    """Model, program and layout from the records; the protocol from what was scored."""
    protocol = "per-rule" if mode == "per_rule" else "per-policy"
    layout = _joined(results, "layout") if protocol == "per-rule" else None
    return Provenance(_joined(results, "model_name"), _joined(results, "program"), protocol, layout)


def auto_label(results: ResultSet, mode: str, files: Sequence[str]) -> str:
    """``model variant`` when the records say, else the (first) file's stem."""
    who = describe(results, mode)
    if who.model is None and who.program is None:
        stem = Path(files[0]).stem if files else "results"
        return stem + (f"+{len(files) - 1}" if len(files) > 1 else "")
    return f"{who.model} {who.variant}" if who.model else who.variant


def assign_labels(entries: Iterable[tuple[str | None, Sequence[str], ResultSet, str]]) -> list[str]:
    """Given labels verbatim (must be unique); derived ones de-duplicated by file stem, then a count."""
    entries = list(entries)
    given = [label for label, *_ in entries if label is not None]
    if any(not label.strip() for label in given):
        raise ConfigError("--label: a label must not be empty")
    duplicates = sorted({label for label in given if given.count(label) > 1})
    if duplicates:
        raise ConfigError(f"--label: duplicate label(s) {', '.join(duplicates)}; every variant needs its own")
    labels: list[str] = []
    taken = set(given)
    for given_label, files, results, mode in entries:
        if given_label is not None:
            labels.append(given_label)
            continue
        candidate = auto_label(results, mode, files)
        if candidate in taken and files:
            candidate = f"{candidate} ({Path(files[0]).stem})"
        base, count = candidate, 2
        while candidate in taken:
            candidate = f"{base} #{count}"
            count += 1
        taken.add(candidate)
        labels.append(candidate)
    return labels


def default_baseline(variants: Sequence[VariantResult]) -> str:
    """The variant labelled ``official-per-policy``, else the first such run, else the first."""
    by_label = next((e for e in variants if e.label == OFFICIAL_PER_POLICY), None)
    by_variant = next((e for e in variants if e.variant == OFFICIAL_PER_POLICY), variants[0])
    return (by_label or by_variant).label
