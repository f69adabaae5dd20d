"""``build_summary``: score every variant as ``sp-dspy score`` does and compare it to a
baseline by a *paired* bootstrap on the cases both scored.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .._benchmarks import benchmark_kind, kind_of_cases
from .._data import Case
from .._errors import ConfigError, DataError
from .._metrics import (
    LEVELS,
    Breakdown,
    ResultSet,
    ScoreReport,
    compare_cells,
    grouped,
    read_result_files,
    resolve_records,
    score,
)
from ._cases import ViewedRun, cases_document
from ._labels import assign_labels, default_baseline, describe
from ._model import FAILURE_MODES, TAU_KEYS, CellStats, ComparisonSummary, DiffRow, VariantResult
from ._usage import CaseCost, case_costs, cell_costs, latency_per_case, manifest_info, record_settings

VariantSpec = tuple[str | None, Sequence[str | Path]]

#: Below this many scored cases (or above this CI width, in RMR points) differences are mostly noise.
SMALL_N = 300
WIDE_CI = 10.0
HIGH_EXCLUSION = 20.0


def honesty_notes(
    variants: Sequence[VariantResult], *, n_boot: int, full_note: str = "", content_hash: str = ""
) -> list[str]:
    """Every caveat that applies, most important first."""
    notes: list[str] = []
    smallest = min(entry.cells["ALL"].n_eval for entry in variants)
    widest: tuple[float, str, str] | None = None
    for entry in variants:
        for cell, stats in entry.cells.items():
            interval = stats.rmr_ci
            if interval and (widest is None or interval[1] - interval[0] > widest[0]):
                widest = (round(interval[1] - interval[0], 2), entry.label, cell)
    if smallest < SMALL_N or (widest is not None and widest[0] > WIDE_CI):
        full = f" ({full_note})" if full_note else ""
        text = f"Small sample: as few as {smallest} scored cases per variant{full}."
        if widest is not None and widest[0] > 0:
            text += (
                f" The 95% bootstrap CI of RMR is up to {widest[0]:g} points wide"
                f" ({widest[1]}, {widest[2]}); differences inside the paired CIs are noise."
            )
        notes.append(text)
    if n_boot == 0:
        notes.append(
            "No confidence intervals were computed (--n-boot 0): every difference is a point estimate."
        )
    # A caveat that applies to several variants is said once, naming them all.
    per_variant: dict[str, list[str]] = {}

    def said(label: str, message: str) -> None:
        per_variant.setdefault(message, []).append(label)

    for entry in variants:
        if entry.small_local:
            said(
                entry.label,
                "SmolLM2-135M is a 135M-parameter local model; a run on it is a plumbing check, not a guard."
                " Its scores say nothing about guarding quality (not shown beside the published leaderboard).",
            )
        if entry.fake_lm:
            said(
                entry.label,
                "the scripted fake LM produced these results; they test the pipeline, not a model"
                " (not shown beside the published leaderboard).",
            )
        if entry.protocol == "per-rule" and entry.layout not in (None, "official"):
            said(
                entry.label,
                f"per-rule with the cache-friendly layout ({entry.layout}), not the"
                " official per-rule protocol; published per-rule figures are not directly comparable.",
            )
        total = entry.cells["ALL"]
        if (excluded := total.excluded_pct) > HIGH_EXCLUSION:
            said(
                entry.label,
                f"{excluded:g}% of cases were excluded (refused, unparseable, errored or"
                " missing); its RMR describes only the remaining cases.",
            )
        if other := sorted(h for h in entry.dataset_hashes if content_hash and h != content_hash):
            said(
                entry.label,
                f"its run manifest names another dataset (sha256 {other[0][:12]}…) than the"
                f" one scored here ({content_hash[:12]}…).",
            )
        if unknown := entry.score.get("unknown_ids", {}).get("count", 0):
            said(entry.label, f"{unknown} result id(s) are not in this dataset (wrong --dataset?).")
        if bad := entry.score.get("bad_lines", 0):
            said(entry.label, f"{bad} malformed result line(s) were skipped.")
        if 0 < (coverage := total.cost_coverage) < 100:
            said(entry.label, f"only {coverage:g}% of its cases reported a dollar cost.")
        if read := total.cache_read_tokens:
            said(
                entry.label,
                f"{read:,} prompt tokens were read from the provider's prompt cache; their dollars"
                " are at its cache-read rate.",
            )
        if hits := total.cache_hits:
            said(
                entry.label,
                f"{hits} of {total.lm_calls} LM answers came from the response cache; their tokens"
                " and dollars are counted as when first produced.",
            )
        if batched := total.batched:
            said(
                entry.label,
                f"{batched} of {total.lm_calls} LM answers came from the provider's batch API"
                " (--batch); their dollars are at its batch rate.",
            )
    notes += [f"{', '.join(labels)}: {message}" for message, labels in per_variant.items()]
    return notes


def _cell_stats(report: ScoreReport, cell: str, costs: dict[str, Any]) -> CellStats:
    official = report.cells[cell]
    intervals = report.ci.get(cell) or {}
    return CellStats(
        total=official["total"],
        excluded=official["excluded"],
        n_eval=official["n_eval"],
        excluded_pct=official["refusal"],
        rmr=official["rmr_avg"],
        rmr_exact=official["rmr_exact"],
        rdr=official["rdr"],
        rmr_ci=intervals.get("rmr_avg"),
        rmr_exact_ci=intervals.get("rmr_exact"),
        rdr_ci=intervals.get("rdr"),
        rmr_tau={tau: official.get(key) for tau, key in TAU_KEYS},
        per_rule_refusal_rate=official.get("per_rule_refusal_rate"),
        **costs,
    )


def _failure_rates(report: dict[str, Any]) -> dict[str, dict[str, float | None]]:
    """Per level the mode's share of that level's cases; ``ALL`` pools counts and totals
    (FM-C1 and FM-C3 exist only at L1/L2, so their pooled rate divides by those levels' cases).
    None without levels (the modes are SafePyramid's level structure).
    """
    modes = report["failure_modes"]
    if not modes:
        return {}
    rates: dict[str, dict[str, float | None]] = {}
    pooled: dict[str, list[int]] = {mode: [0, 0] for mode in FAILURE_MODES}
    for level in LEVELS:
        entry = modes.get(level, {})
        rates[level] = {}
        for mode in FAILURE_MODES:
            if mode not in entry:
                continue
            rates[level][mode] = entry[mode]["pct"]
            pooled[mode][0] += entry[mode]["count"]
            pooled[mode][1] += entry["total"]
    rates["ALL"] = {
        mode: round(100 * count / total, 2) if total else None for mode, (count, total) in pooled.items()
    }
    return rates


def _rule_types(report: dict[str, Any]) -> dict[str, dict[str, Any]] | None:
    per_rule = report.get("per_rule")
    if not per_rule:
        return None
    keys = ("n_judgments", "precision", "recall", "f1", "accuracy")
    return {
        cell: {t: {k: stats[k] for k in keys} for t, stats in cell_stats.get("by_rule_type", {}).items()}
        for cell, cell_stats in per_rule.items()
    }


def _variant(
    label: str,
    files: list[str],
    cases: Sequence[Case],
    results: ResultSet,
    report: ScoreReport,
    costs: dict[str, CaseCost],
) -> VariantResult:
    document = report.to_json_dict()
    members = grouped(cases, report.breakdown)
    who = describe(results, report.mode)
    manifests = manifest_info(files)
    return VariantResult(
        label=label,
        variant=who.variant,
        **asdict(who),
        files=files,
        settings={**record_settings(results), **manifests.flat_settings()},
        score=document,
        cells={cell: _cell_stats(report, cell, cell_costs(members[cell], costs)) for cell in report.cells},
        failure_modes=_failure_rates(document),
        rule_types=_rule_types(document),
        domain_rmr={d: cells["ALL"]["rmr_avg"] for d, cells in document["domains"].items()},
        wall_s=manifests.wall_s,
        dataset_hashes=sorted(manifests.dataset_hashes),
        latency_s_per_case=latency_per_case(costs),
    )


def build_summary(
    cases: Sequence[Case],
    variants: Sequence[VariantSpec],
    baseline: str | None = None,
    *,
    benchmark: str = "safepyramid",
    dataset: str = "",
    content_hash: str = "",
    cap_aware: bool = False,
    n_boot: int = 1000,
    seed: int = 0,
    skip_bad_lines: bool = False,
    all_ids: Collection[str] | None = None,
    cases_note: str | None = None,
) -> ComparisonSummary:
    """Score each ``(label, files)`` variant on ``cases`` and diff it against ``baseline``
    (default: see ``default_baseline``); a ``None`` label is derived from the records or file name.
    ``cases_note`` (which cases, when the variants' runs selected different ones) leads the notes.
    """
    cases = list(cases)
    if not variants:
        raise ConfigError("report: no result files given")
    if n_boot < 0:
        raise ConfigError(f"--n-boot: must be >= 0, got {n_boot}")
    # The cases' kind, not the flag: PKU metrics need PKU's gold labels (safe, severity).
    kind = kind_of_cases(cases)
    by: Breakdown = (kind or benchmark_kind(benchmark)).breakdown
    unit = (kind or benchmark_kind(benchmark)).unit
    loaded = []
    for label, paths in variants:
        if not paths:
            raise ConfigError(f"report: variant {label or '(unlabelled)'} has no result files")
        files = [str(p) for p in paths]
        results = read_result_files(files, skip_bad_lines=skip_bad_lines, allow_empty=False)
        if not results.records and not results.judgments:  # a page of 100% excluded would hide a wrong file
            raise DataError(f"{', '.join(files)}: no result records to show (lines of other kinds only)")
        report = score(
            cases,
            results,
            cap_aware=cap_aware,
            ci=n_boot > 0,
            seed=seed,
            n_boot=n_boot,
            all_ids=all_ids,
            by=by,
            unit=unit,
        )
        loaded.append((label, files, results, report))
    labels = assign_labels([(label, files, results, report.mode) for label, files, results, report in loaded])
    built = []
    costs = [case_costs(cases, results) for _, _, results, _ in loaded]
    for label, (_, files, results, report), cost in zip(labels, loaded, costs, strict=True):
        built.append(_variant(label, files, cases, results, report, cost))
        if kind is not None:
            built[-1].extra = kind.variant_report(cases, results, cap_aware=cap_aware)
    chosen = default_baseline(built) if baseline is None else baseline
    if chosen not in labels:
        raise ConfigError(f"--baseline: no variant labelled {chosen!r} (labels: {', '.join(labels)})")
    records = {label: resolve_records(cases, entry[2]) for label, entry in zip(labels, loaded, strict=True)}
    diffs = []
    for label in labels:
        if label == chosen:
            continue
        compared = compare_cells(
            cases, records[chosen], records[label], cap_aware=cap_aware, n_boot=n_boot, seed=seed,
            excluded_wrong=False, by=by, unit=unit,
        )  # fmt: skip
        for cell, comparison in compared.items():
            paired, test = comparison.paired, comparison.test
            diffs.append(
                DiffRow(
                    label=label,
                    baseline=chosen,
                    cell=cell,
                    n_pairs=paired.n_pairs,
                    n_units=paired.n_units,
                    diff=paired.diff,
                    ci=paired.ci,
                    ci_note=paired.ci_note,
                    test_p=test.p_value if test.n_pairs else None,
                    variant_only_exact=test.b_only,
                    baseline_only_exact=test.a_only,
                )
            )
    runs = [
        ViewedRun(label, entry.variant, loaded_entry[2], records[label], cost)
        for label, entry, loaded_entry, cost in zip(labels, built, loaded, costs, strict=True)
    ]
    return ComparisonSummary(
        cases_view=cases_document(
            cases, runs, kind=kind or benchmark_kind(benchmark), baseline=chosen, cap_aware=cap_aware
        ),
        benchmark=benchmark,
        dataset=dataset,
        content_hash=content_hash,
        n_cases=len(cases),
        cases_per_cell={cell: len(members) for cell, members in grouped(cases, by).items()},
        baseline=chosen,
        n_boot=n_boot,
        seed=seed,
        unit=unit,
        cap_aware=cap_aware,
        variants=built,
        diffs=diffs,
        notes=[
            *([cases_note] if cases_note else []),
            *honesty_notes(
                built, n_boot=n_boot, full_note=benchmark_kind(benchmark).full_note, content_hash=content_hash
            ),
        ],
        pku_published=None if kind is None else kind.published(),
    )
