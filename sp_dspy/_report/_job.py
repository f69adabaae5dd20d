"""``sp-dspy report``'s and ``sp-dspy view``'s job from Python: result sets scored on the same cases.

``summarise_results(ReportConfig(variants=[(None, ["a.jsonl"]), ("B", ["b1.jsonl", "b2.jsonl"])]))``
reads each variant's files, loads the dataset and the cases their runs selected through the loader
``score`` uses (``load_for_results``) and builds the ``ComparisonSummary`` both commands show:
``report`` writes it as ``--json`` and, with its plots, as the HTML page (``write_html``); ``view``
writes the page without the plots.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .._scoring import (
    NBoot,
    Note,
    Notify,
    RecordedSelection,
    config_from_flags,
    load_for_results,
    read_results,
)

if TYPE_CHECKING:
    from ._model import ComparisonSummary


class ReportConfig(BaseModel):
    """What ``sp-dspy report`` (and ``view``) RESULTS compare, and how (each field is the flag of its
    name). ``variants``: one ``(label, files)`` per variant, the files parts of one run (a ``None``
    label is derived from the records or the file name), as the RESULTS arguments give them."""

    model_config = ConfigDict(extra="forbid")

    variants: list[tuple[str | None, list[Path]]]
    baseline: str | None = None  # the variant the others are diffed against (default: see the labels)
    data: RecordedSelection = Field(default_factory=RecordedSelection)
    cap_aware: bool = False  # also exclude completions of >= 65,000 tokens
    skip_bad_lines: bool = False  # count malformed result lines instead of failing
    seed: int = 0
    n_boot: NBoot = 1000  # bootstrap resamples for the 95% intervals (0: none)

    @field_validator("variants")
    @classmethod
    def _variants(cls, value: list[tuple[str | None, list[Path]]]) -> list[tuple[str | None, list[Path]]]:
        if not value:
            raise ValueError("no result files given")
        for label, files in value:
            if not files:
                raise ValueError(f"variant {label or '(unlabelled)'} has no result files")
        return value


def build_report_config(settings: dict[str, Any]) -> ReportConfig:
    """``settings`` (the flags' values by field name) as a ``ReportConfig``; a bad value is one
    ``ConfigError`` naming its flag (``--n-boot: ...``; ``RESULTS: ...`` for the variants)."""
    return config_from_flags(ReportConfig, settings, arguments={"variants": "RESULTS"})


@dataclass(frozen=True)
class SummarisedResults:
    """The variants summarised: ``summary`` (what ``report --json`` writes and both pages show), how
    many malformed dataset cases ``lenient`` ``skipped``, and the ``notes`` said while the data loaded."""

    summary: ComparisonSummary
    skipped: int = 0
    notes: list[Note] = field(default_factory=list)

    def caveats(self) -> list[str]:
        """The summary's caveats and the skipped dataset cases, as the commands print them (``note: ...``)."""
        found = list(self.summary.notes)
        if self.skipped:
            found.append(f"{self.skipped} malformed dataset case(s) skipped (--lenient)")
        return found


def summarise_results(config: ReportConfig, *, notify: Notify | None = None) -> SummarisedResults:
    """The variants scored on the cases their runs selected (or ``config.data``'s), as ``report`` and
    ``view`` show them. ``notify`` gets each note as the data loads (the commands print it on stderr)."""
    from ._summary import build_summary

    notes: list[Note] = []

    def say(note: Note) -> None:
        notes.append(note)
        if notify is not None:
            notify(note)

    # Every variant must belong to the dataset (its malformed lines are counted by build_summary).
    sets = [read_results(paths, skip_bad_lines=True) for _, paths in config.variants]
    sides = [paths for _, paths in config.variants]
    scored = load_for_results(sides, sets, data=config.data, announce=False, notify=say)
    loaded = scored.loaded
    summary = build_summary(
        scored.cases,
        config.variants,
        config.baseline,
        benchmark=loaded.benchmark,
        dataset=loaded.source,
        content_hash=loaded.content_hash,
        cap_aware=config.cap_aware,
        n_boot=config.n_boot,
        seed=config.seed,
        skip_bad_lines=config.skip_bad_lines,
        all_ids=[case.id for case in loaded.cases],
        cases_note=scored.note,
    )
    return SummarisedResults(summary, loaded.skipped, notes)
