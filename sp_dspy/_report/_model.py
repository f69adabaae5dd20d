"""What ``summary.json`` holds: every number the page, terminal table and plots show, so
they never disagree. Metric cells are copied from ``ScoreReport``, never recomputed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from .._errors import ConfigError
from .._metrics import TAUS_FULL, tau_key

#: ``tau`` as shown ("1.0") and its metric key, for the main four taus plus the appendix's 0.6 and 0.5.
TAU_KEYS: tuple[tuple[str, str], ...] = tuple((f"{tau:.1f}", tau_key(tau)) for tau, _ in TAUS_FULL)
FAILURE_MODES: tuple[str, ...] = ("FM-V1", "FM-D1", "FM-C1", "FM-C3")


class CellStats(BaseModel):
    """One variant in one cell: official metrics, their 95% CIs, and what it cost (means over
    the cases that reported it; ``cost_coverage``: share of cases with usage that gave dollars)."""

    total: int
    excluded: int
    n_eval: int
    excluded_pct: float
    rmr: float | None
    rmr_exact: float | None
    rdr: float | None
    rmr_ci: list[float] | None = None
    rmr_exact_ci: list[float] | None = None
    rdr_ci: list[float] | None = None
    rmr_tau: dict[str, float | None] = Field(default_factory=dict)
    cases_with_results: int = 0
    lm_calls_per_case: float | None = None
    prompt_tokens_per_case: float | None = None
    completion_tokens_per_case: float | None = None
    dollars_per_case: float | None = None
    cost_coverage: float = 0.0
    #: LM calls in the cell and how many answers came from the response cache (``None``: not recorded).
    lm_calls: int | None = None
    cache_hits: int | None = None
    #: Answers from the run's provider batches (``--batch``, at the batch rate; not cache hits).
    batched: int | None = None
    #: Prompt tokens the provider's prompt cache served (priced at its cache-read rate); None: none reported.
    cache_read_tokens: int | None = None
    per_rule_refusal_rate: float | None = None


class RuleTypeStats(BaseModel):
    """Per-rule judgments of one target type: precision/recall/F1 of "violated" (percent)."""

    n_judgments: int
    precision: float
    recall: float
    f1: float
    accuracy: float


class VariantResult(BaseModel):
    """One result set (one or more files scored together) under one label."""

    label: str
    model: str | None = None
    variant: str
    protocol: str
    program: str | None = None
    layout: str | None = None
    files: list[str]
    settings: dict[str, Any] = Field(default_factory=dict)
    score: dict[str, Any]
    cells: dict[str, CellStats]
    failure_modes: dict[str, dict[str, float | None]] = Field(default_factory=dict)
    rule_types: dict[str, dict[str, RuleTypeStats]] | None = None
    domain_rmr: dict[str, float | None] = Field(default_factory=dict)
    wall_s: float | None = None
    latency_s_per_case: float | None = None
    dataset_hashes: list[str] = Field(default_factory=list)

    @property
    def fake_lm(self) -> bool:
        """A run on the scripted fake LM: its figures are whatever the script answers."""
        lm = str(self.settings.get("lm", ""))
        return self.model == "fake" or lm == "fake" or lm.startswith("fake/")

    @property
    def small_local(self) -> bool:
        """A run on the embedded SmolLM2-135M: a plumbing check, its verdicts noise."""
        return "smollm" in (self.model or "").lower() or "smollm" in self.label.lower()

    @property
    def pipeline_check(self) -> bool:
        """A run that tests the pipeline, not a guard (the fake LM, the embedded SmolLM): it is
        never ranked beside the published leaderboard."""
        return self.fake_lm or self.small_local

    #: The benchmark kind's own metrics of the variant (``BenchmarkKind.variant_report``):
    #: PKU-SafeRLHF's PkuReport (binary, categories, severity); a custom policy's binary view
    #: and per-rule scores; None on SafePyramid.
    extra: dict[str, Any] | None = None


class DiffRow(BaseModel):
    """``variant - baseline`` in one cell on the cases both scored, paired bootstrap 95% CI."""

    label: str
    baseline: str
    cell: str
    n_pairs: int
    n_units: int = 0  # the independent units (conversations...) the pairs form, which the CI resamples
    diff: dict[str, float | None]
    ci: dict[str, list[float] | None]
    ci_note: str | None = None  # why ``ci`` is empty: the comparison's own (``PairedDiff.ci_note``)
    test_p: float | None = None  # the paired randomization test of exact match (``PairedTest``)
    variant_only_exact: int = 0
    baseline_only_exact: int = 0

    def significant(self, metric: str) -> bool:
        """The interval excludes zero."""
        interval = self.ci.get(metric)
        return bool(interval) and (interval[0] > 0 or interval[1] < 0)  # type: ignore[index]


class ComparisonSummary(BaseModel):
    """The whole comparison: dataset identity, settings, variants, paired differences."""

    # 2: VariantResult.pku became extra (any kind's own metrics); 3: intervals and the paired test
    # resample the benchmark's units (``unit``), DiffRow.mcnemar_p became test_p.
    schema_version: int = 3
    benchmark: str = "safepyramid"
    dataset: str = ""
    content_hash: str = ""
    n_cases: int
    #: Cases per cell of the benchmark's breakdown (L0-L2; ``tag NAME``; none), ``ALL`` last.
    cases_per_cell: dict[str, int]
    baseline: str
    n_boot: int
    seed: int
    #: What every interval and paired test resamples: the benchmark's unit (``BenchmarkKind.unit``).
    unit: str = "conversation"
    cap_aware: bool = False
    variants: list[VariantResult]
    diffs: list[DiffRow] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    #: PKU-SafeRLHF only: the paper's moderator figures and citation.
    pku_published: dict[str, Any] | None = None
    #: The report's Cases view (``_cases.cases_document``): every case with each variant's
    #: outcome. Large (texts of every case), so not part of ``summary.json``.
    cases_view: dict[str, Any] | None = Field(default=None, exclude=True, repr=False)

    def variant(self, label: str) -> VariantResult:
        return {entry.label: entry for entry in self.variants}[label]

    @property
    def breakdown(self) -> tuple[str, ...]:
        """The cells besides ``ALL`` that have cases: the levels (a level-filtered dataset has
        fewer than three), a custom benchmark's tags, none for a benchmark without either."""
        return tuple(cell for cell, n in self.cases_per_cell.items() if cell != "ALL" and n)

    @property
    def cells(self) -> tuple[str, ...]:
        """Every cell of the breakdown with cases, then ``ALL``, in display order."""
        return (*self.breakdown, "ALL")

    def diffs_for(self, cell: str) -> list[DiffRow]:
        return [row for row in self.diffs if row.cell == cell]

    def write_json(self, path: str | Path) -> Path:
        """Write ``summary.json``; an unwritable path is a one-line ``ConfigError``."""
        document = self.model_dump(mode="json")
        return write_text(path, json.dumps(document, indent=2, ensure_ascii=False) + "\n", "--json")


def write_text(path: str | Path, text: str, option: str) -> Path:
    """Write ``text``; an unwritable path is a one-line ``ConfigError`` naming the ``option``."""
    target = Path(path)
    try:
        target.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{option} {target}: cannot write: {exc.strerror or exc}") from None
    return target
