"""The benchmark interface: what a benchmark brings to every command (load, task, scores, tables, report).

A kind is a class satisfying :class:`BenchmarkKind` (a subclass inherits the defaults given
here), registered by name in ``_registry``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from rich.console import RenderableType

    from .._data import Benchmark, Case
    from .._metrics import Breakdown, ResultSet, ScoreReport
    from .._report._model import ComparisonSummary


class BenchmarkKind(Protocol):
    """What a benchmark brings to every command; a subclass inherits the defaults given here."""

    @property
    def name(self) -> str:
        """The ``--benchmark`` value and what manifests record."""

    @property
    def title(self) -> str:
        """The benchmark's name in a sentence (``SafePyramid``, ``PKU-SafeRLHF``, ``custom``)."""
        return self.name

    @property
    def unit(self) -> str:
        """What ``Case.unit`` is on this benchmark, in one word (``conversation``, ``prompt``,
        ``group``): the independent unit every bootstrap and paired test resamples whole."""
        return "case"

    @property
    def task(self) -> str:
        """One line: what the guard is asked to do on this benchmark's cases."""

    @property
    def full_note(self) -> str:
        """How large the full published benchmark is, for a small-sample note ('' when not fixed)."""
        return ""

    @property
    def has_leaderboard(self) -> bool:
        """Whether SafePyramid's published leaderboard and failure modes apply."""
        return False

    @property
    def rule_types(self) -> bool:
        """Whether the rubric's rule types (decisive, distractor, exception, conditional) mean
        anything here: SafePyramid's do; elsewhere every rule is plain and no type is shown."""
        return False

    @property
    def breakdown(self) -> Breakdown:
        """The cells every command shows beside ``ALL``: ``"level"`` (L0/L1/L2), ``"tag"`` (one
        per tag of the cases) or ``"none"``; a kind without levels has no level cell anywhere."""
        return "none"

    @property
    def tau_curve(self) -> bool:
        """Whether RMR@tau below 1.0 tells anything here (it does not when gold sets are tiny)."""
        return True

    def load(self, dataset: str | None, *, with_evidence: bool = False, lenient: bool = False) -> Benchmark:
        """Load and validate every case of ``dataset`` (``None``: this kind's default data)."""

    def recognises(self, path: Path) -> bool:
        """Whether the local file ``path`` looks like this kind's format (for hints, never decisions)."""

    def extra_scores(
        self, cases: Sequence[Case], results: ResultSet, *, cap_aware: bool = False, per_rule: bool = False
    ) -> dict[str, Any]:
        """JSON sections added to ``score --json`` beside the official cells (may be empty)."""
        return {}

    def score_tables(self, report: ScoreReport, extra: dict[str, Any]) -> list[RenderableType]:
        """The console tables of ``score`` and ``eval``, in reading order."""

    def variant_report(
        self, cases: Sequence[Case], results: ResultSet, *, cap_aware: bool = False
    ) -> dict[str, Any] | None:
        """A comparison variant's own metrics (``VariantResult.extra``, ``compare --json``'s ``extra``), or None."""
        return None

    def published(self) -> dict[str, Any] | None:
        """Published reference figures a comparison shows beside its variants, or None."""
        return None

    def report_terminal(self, variants: Sequence[tuple[str, dict[str, Any] | None]]) -> RenderableType | None:
        """This kind's table of ``(label, variant_report)`` rows (``report``, ``compare``), or None."""
        return None

    def report_html(self, summary: ComparisonSummary) -> str:
        """This kind's section of the HTML report ('' for none)."""
        return ""

    def case_facts(self, case: Case) -> dict[str, list[str]]:
        """Short facts the report's Cases view shows of one case besides its id, domain, breakdown
        cell, rules, framework, conversation and outcome: each fact a column and, when it takes
        few values, a filter (a list: a case can have several categories). None by default."""
        return {}


def looks_like_results(path: Path) -> bool:
    """Whether ``path``'s first line is a result record (an ``id`` and ``violated_rules``, or a
    judgment) rather than a case: for naming a results file given as a dataset."""
    first = first_json_line(path)
    if not isinstance(first, dict) or "id" not in first or "policy" in first:
        return False
    return "violated_rules" in first or first.get("kind") == "judgment"


def first_json_line(path: Path) -> object:
    """The first line of ``path`` as JSON, or None (for ``recognises``: never an error)."""
    from .._errors import DataError
    from .._regular import open_regular

    try:
        with open_regular(path, "file") as handle:
            line = handle.readline(1 << 20)
        return json.loads(line)
    except (
        DataError,
        OSError,
        ValueError,
        RecursionError,
    ):  # unreadable, not JSON, nested too deeply: not this format
        return None
