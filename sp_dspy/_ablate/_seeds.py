"""An experiment's result across optimizer seeds: each seed against the baseline, then per
optimizer the mean gain with an interval that includes the between-seed spread, how many seeds
beat the baseline, and a verdict in words.

One compile is one draw: a reader must see the spread across seeds before believing a gain.
Each seed's figures are read off the ablation's ``ComparisonSummary`` (the same paired unit
bootstrap and paired randomization test ``compare`` uses), the compile manifests and the results
files; the optimizer's mean gain (``SeedGain``) resamples the same units and, besides, the seeds;
across optimizers its p-values are Holm-adjusted.
"""

from __future__ import annotations

import difflib
import json
import statistics
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from .._budget import Spend
from .._data import Case
from .._metrics import (
    CI_METRICS,
    PolicyRecord,
    SeedGain,
    format_p,
    holm,
    read_result_files,
    resolve_records,
    seed_gain,
)
from .._report._html_tables import esc, num, table
from .._report._model import ComparisonSummary, DiffRow, write_text
from .._run_manifest import RunTotals
from .._runner import read_run_results
from .._usage import Usage

#: The metrics a seed is judged on, as the summary names them: RMR, RMR@1.0, RDR (lower is better).
METRIC_NAMES = {"rmr_avg": "RMR", "rmr_exact": "RMR@1.0", "rdr": "RDR"}
#: The figure "beats the baseline" is decided on.
HEADLINE = "rmr_avg"


class SeedResult(BaseModel):
    """One optimizer seed: its artifact's test figures and its paired difference to the baseline."""

    optimizer: str
    seed: int
    label: str
    artifact: str
    test: dict[str, float | None]  # rmr_avg, rmr_exact, rdr on the test part (ALL cases)
    diff: dict[str, float | None]  # seed minus baseline on the cases both scored
    ci: dict[str, list[float] | None]
    ci_note: str | None = None
    test_p: float | None = None  # the paired randomization test of exact match over the units
    n_pairs: int = 0
    beats_baseline: bool = False  # RMR higher, its 95% CI excluding 0
    worse_than_baseline: bool = False  # RMR lower, its 95% CI excluding 0
    dev_before: float | None = None
    dev_after: float | None = None
    budget_limited: bool = False
    compile: dict[str, Any] = Field(default_factory=dict)  # the manifest's usage and wall time
    evaluation: dict[str, Any] = Field(default_factory=dict)  # the test run's calls, tokens, dollars
    prompt: str = ""  # the artifact's prompt.md: the instructions and demos it ended with


class Spread(BaseModel):
    """One figure across seeds: mean, sample standard deviation (None below 2 seeds), range."""

    mean: float | None
    sd: float | None
    min: float | None
    max: float | None

    @classmethod
    def of(cls, values: list[float | None]) -> Spread:
        known = [value for value in values if value is not None]
        if not known:
            return cls(mean=None, sd=None, min=None, max=None)
        sd = round(statistics.stdev(known), 4) if len(known) > 1 else None
        return cls(mean=round(statistics.fmean(known), 4), sd=sd, min=min(known), max=max(known))


class OptimizerResult(BaseModel):
    """Every seed of one optimizer, their spread, and the verdict sentence."""

    optimizer: str
    seeds: list[SeedResult]
    test: dict[str, Spread]
    diff: dict[str, Spread]
    seeds_beating: int
    seeds_worse: int
    seeds_with_ci: int
    #: The mean gain across seeds with its hierarchical interval and (Holm-adjusted) p-value.
    gain: SeedGain | None = None
    compile_spend: dict[str, Any]
    evaluation_spend: dict[str, Any]
    verdict: str


class ExperimentSummary(BaseModel):
    """``summary.json`` of ``sp-dspy experiment``: the plan, per optimizer and seed, and the comparison."""

    schema_version: int = 2  # 2: the optimizer's gain (units and seeds resampled, Holm-adjusted p)
    kind: str = "sp-dspy-experiment"
    plan: dict[str, Any]
    baseline: str
    baseline_test: dict[str, float | None]
    baseline_evaluation: dict[str, Any]
    optimizers: list[OptimizerResult]
    comparison: ComparisonSummary

    def write_json(self, path: Path) -> Path:
        document = self.model_dump(mode="json")
        return write_text(path, json.dumps(document, indent=2, ensure_ascii=False) + "\n", "--out")


def results_spend(results_file: Path) -> Spend:
    """What a results file's records used (one call a unit; replayed answers at their price)."""
    if not results_file.exists():
        return Spend()
    totals = RunTotals.of(read_run_results(results_file).lines)
    return Spend(calls=totals.records, cache_hits=totals.cache_hits, usage=totals.usage)


def manifest_spend(manifest: dict[str, Any]) -> Spend:
    """What a compile artifact's manifest says the compile used (every call, replays included)."""
    usage = manifest.get("usage") or {}
    prompt, completion = int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))
    cost = usage.get("usd")
    return Spend(
        calls=int(usage.get("calls", 0)),
        cache_hits=int(usage.get("cache_hits", 0)),
        usage=Usage(
            prompt_tokens=prompt,
            completion_tokens=completion,
            total_tokens=prompt + completion,
            cost=None if cost is None else float(cost),
        ),
        paid=usage.get("usd_paid"),
    )


def _cell(summary: ComparisonSummary, label: str) -> dict[str, float | None]:
    stats = summary.variant(label).cells["ALL"]
    return {"rmr_avg": stats.rmr, "rmr_exact": stats.rmr_exact, "rdr": stats.rdr}


def _diff_row(summary: ComparisonSummary, label: str) -> DiffRow | None:
    return next((row for row in summary.diffs_for("ALL") if row.label == label), None)


def seed_result(
    summary: ComparisonSummary, optimizer: str, seed: int, artifact: Path, results_file: Path
) -> SeedResult:
    """One seed's figures: the ablation's row of its artifact, its manifest and its prompt."""
    label = artifact.name
    manifest = json.loads((artifact / "manifest.json").read_text(encoding="utf-8"))
    row = _diff_row(summary, label)
    interval = None if row is None else row.ci.get(HEADLINE)
    prompt_file = artifact / "prompt.md"
    dev = manifest.get("dev") or {}
    compile_usage = manifest_spend(manifest).as_dict()
    return SeedResult(
        optimizer=optimizer,
        seed=seed,
        label=label,
        artifact=str(artifact),
        test=_cell(summary, label),
        diff={} if row is None else dict(row.diff),
        ci={} if row is None else dict(row.ci),
        ci_note=None if row is None else row.ci_note,
        test_p=None if row is None else row.test_p,
        n_pairs=0 if row is None else row.n_pairs,
        beats_baseline=bool(interval) and interval[0] > 0,  # type: ignore[index]
        worse_than_baseline=bool(interval) and interval[1] < 0,  # type: ignore[index]
        dev_before=(dev.get("before") or {}).get("score"),
        dev_after=(dev.get("after") or {}).get("score"),
        budget_limited=bool(manifest.get("budget_limited")),
        compile={**compile_usage, "wall_s": manifest.get("wall_s")},
        evaluation=results_spend(results_file).as_dict(),
        prompt=prompt_file.read_text(encoding="utf-8") if prompt_file.exists() else "",
    )


def _signed(value: float) -> str:
    return f"{value:+.1f}"


def _gain_head(optimizer: str, gain: SeedGain, baseline: str, n_optimizers: int) -> str:
    """The optimizer-level sentence: mean gain, its interval over units and seeds, the p-value."""
    assert gain.mean is not None
    word = "seed" if gain.n_seeds == 1 else "seeds"
    head = f"{optimizer} against {baseline}: mean RMR gain {_signed(gain.mean)} over {gain.n_seeds} {word}"
    if gain.ci is None:
        return head + f" (no interval: {gain.ci_note or '--n-boot 0'})"
    head += f", 95% CI [{_signed(gain.ci[0])}, {_signed(gain.ci[1])}] ({gain.unit}s and seeds resampled)"
    if n_optimizers > 1 and gain.p_holm is not None:
        head += f", p = {format_p(gain.p_holm)} Holm-adjusted across {n_optimizers} optimizers"
    else:
        head += f", p = {format_p(gain.p_value)}"
    p_value = gain.p_holm if n_optimizers > 1 else gain.p_value
    if gain.ci[0] > 0:
        claim = "beats" if p_value is not None and p_value < 0.05 else "may beat (not after adjustment)"
        head += f": {optimizer} {claim} the baseline"
    elif gain.ci[1] < 0:
        head += f": {optimizer} does worse than the baseline"
    else:
        head += ": no gain shown"
    return head


def verdict(
    optimizer: str,
    seeds: list[SeedResult],
    baseline: str,
    gain: SeedGain | None = None,
    n_optimizers: int = 1,
) -> str:
    """The result in words, no stronger than the intervals allow.

    With ``gain``, the optimizer-level claim leads (``mipro against b: mean RMR gain +4.1 over 3
    seeds, 95% CI [+1.0, +7.2] (conversations and seeds resampled), p = 0.012: mipro beats the
    baseline``), then each seed's own paired result; ``n_optimizers`` > 1: the p-value is Holm's.
    """
    n = len(seeds)
    diffs = [s.diff.get(HEADLINE) for s in seeds]
    known = [d for d in diffs if d is not None]
    with_ci = [s for s in seeds if s.ci.get(HEADLINE)]
    beating = sum(s.beats_baseline for s in seeds)
    worse = sum(s.worse_than_baseline for s in seeds)
    word = "seed" if n == 1 else "seeds"
    if not with_ci:
        head = (
            f"{optimizer}: none of {n} {word} has a confidence interval (too few paired units or --n-boot 0),"
            f" so no seed can be said to beat {baseline}"
        )
    else:
        head = f"{optimizer}: {beating} of {n} {word} beat {baseline} (RMR, 95% paired CI excluding 0)"
        if worse:
            head += f", {worse} did worse"
        if len(with_ci) < n:
            head += f"; {n - len(with_ci)} without an interval"
    if gain is not None and gain.mean is not None:
        head = _gain_head(optimizer, gain, baseline, n_optimizers) + "; per seed: " + head.split(": ", 1)[1]
    if not known:
        return head + "; no seed has a paired difference."
    mean = statistics.fmean(known)
    kind = "gain" if mean > 0 else "difference"
    tail = f"the mean {kind} {_signed(mean)} RMR"
    if len(known) > 1:
        tail += f", seeds ranging {_signed(min(known))} to {_signed(max(known))}"
    else:
        tail += "; one seed cannot tell a gain from the luck of one compile"
    if gain is not None and gain.mean is not None:
        tail = tail.replace(f"the mean {kind} {_signed(mean)} RMR, ", "")
    return f"{head}; {tail}."


def optimizer_gains(
    comparison: ComparisonSummary,
    cases: list[Case],
    files: dict[str, Path],
    per_optimizer: dict[str, list[SeedResult]],
) -> dict[str, SeedGain]:
    """Each optimizer's mean gain over the baseline across its seeds (``seed_gain``: the summary's
    units, draws and seed), its p-values Holm-adjusted across the optimizers."""

    def records(label: str) -> dict[str, PolicyRecord]:
        return resolve_records(cases, read_result_files([files[label]]))

    baseline = records(comparison.baseline)
    gains = {
        optimizer: seed_gain(
            cases,
            baseline,
            [records(s.label) for s in seeds],
            unit=comparison.unit,
            cap_aware=comparison.cap_aware,
            n_boot=comparison.n_boot,
            seed=comparison.seed,
        )
        for optimizer, seeds in per_optimizer.items()
    }
    adjusted = holm([gain.p_value for gain in gains.values()])
    return {
        optimizer: gain.model_copy(update={"p_holm": p})
        for (optimizer, gain), p in zip(gains.items(), adjusted, strict=True)
    }


def _sum_spend(documents: list[dict[str, Any]]) -> dict[str, Any]:
    keys = ("calls", "cache_hits", "total_tokens", "usd", "usd_paid")
    total: dict[str, Any] = {}
    for key in keys:
        values = [doc.get(key) for doc in documents]
        known = [value for value in values if value is not None]
        total[key] = round(sum(known), 6) if known else None
    return total


def optimizer_result(
    optimizer: str,
    seeds: list[SeedResult],
    baseline: str,
    gain: SeedGain | None = None,
    n_optimizers: int = 1,
) -> OptimizerResult:
    """One optimizer's seeds, their mean and spread, its gain, counts and verdict."""
    return OptimizerResult(
        optimizer=optimizer,
        seeds=seeds,
        test={metric: Spread.of([s.test.get(metric) for s in seeds]) for metric in CI_METRICS},
        diff={metric: Spread.of([s.diff.get(metric) for s in seeds]) for metric in CI_METRICS},
        seeds_beating=sum(s.beats_baseline for s in seeds),
        seeds_worse=sum(s.worse_than_baseline for s in seeds),
        seeds_with_ci=sum(bool(s.ci.get(HEADLINE)) for s in seeds),
        gain=gain,
        compile_spend=_sum_spend([s.compile for s in seeds]),
        evaluation_spend=_sum_spend([s.evaluation for s in seeds]),
        verdict=verdict(optimizer, seeds, baseline, gain, n_optimizers),
    )


# --- HTML -----------------------------------------------------------------------------------

DIFF_CSS = (
    "<style>table.diff{font:12px ui-monospace,SFMono-Regular,Menlo,monospace;table-layout:fixed}"
    "table.diff td{white-space:pre-wrap;word-break:break-word}.diff_add{background:#e6ffec}"
    ".diff_chg{background:#fff5b1}.diff_sub{background:#ffebe9}.diff_header{color:#667085}</style>"
)


def _money(value: float | None) -> str:
    return "unpriced" if value is None else f"${value:,.4f}"


def _ci(interval: list[float] | None) -> str:
    return "" if not interval else f" <span class=ci>[{interval[0]:+.1f}, {interval[1]:+.1f}]</span>"


def _seed_rows(result: OptimizerResult) -> list[str]:
    rows = []
    for seed in result.seeds:
        cells = [
            f"{esc(seed.label)}" + (" <span class=tag>budget-limited</span>" if seed.budget_limited else "")
        ]
        for metric in CI_METRICS:
            delta = seed.diff.get(metric)
            cells.append(
                f"{num(seed.test.get(metric))} ({'–' if delta is None else f'{delta:+.2f}'}"
                f"{_ci(seed.ci.get(metric))})"
            )
        cells += [
            format_p(seed.test_p),
            f"{num(seed.dev_before)} → {num(seed.dev_after)}",
            f"{seed.compile.get('calls', 0):,} / {_money(seed.compile.get('usd'))}",
            f"{seed.evaluation.get('calls', 0):,} / {_money(seed.evaluation.get('usd'))}",
        ]
        cls = "mine" if seed.beats_baseline else ""
        rows.append(f"<tr class='{cls}'>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>")
    spread = ["mean ± sd [min, max]"]
    for metric in CI_METRICS:
        test, diff = result.test[metric], result.diff[metric]
        sd = "" if diff.sd is None else f" ± {diff.sd:.2f}"
        rng = "" if diff.min is None else f" [{diff.min:+.2f}, {diff.max:+.2f}]"
        mean = "–" if diff.mean is None else f"{diff.mean:+.2f}"
        spread.append(f"{num(test.mean)} ({mean}{sd}{rng})")
    spread += [
        "",
        "",
        f"{result.compile_spend.get('calls') or 0:,} / {_money(result.compile_spend.get('usd'))}",
        f"{result.evaluation_spend.get('calls') or 0:,} / {_money(result.evaluation_spend.get('usd'))}",
    ]
    rows.append("<tr class=baseline>" + "".join(f"<td>{cell}</td>" for cell in spread) + "</tr>")
    return rows


def _prompt_diffs(result: OptimizerResult) -> str:
    """Each seed's prompt beside the first seed's, side by side (the first one in full)."""
    if not result.seeds:
        return ""
    first = result.seeds[0]
    parts = [
        f"<details><summary>{esc(first.label)}: the prompt it ended with</summary>"
        f"<pre>{esc(first.prompt)}</pre></details>"
    ]
    differ = difflib.HtmlDiff(wrapcolumn=70)
    for other in result.seeds[1:]:
        grid = differ.make_table(
            first.prompt.splitlines(), other.prompt.splitlines(), first.label, other.label, context=True
        )
        parts.append(
            f"<details><summary>{esc(first.label)} beside {esc(other.label)}</summary>{grid}</details>"
        )
    return "".join(parts)


def experiment_html(summary: ExperimentSummary) -> str:
    """The report's first sections: the verdict per optimizer, every seed, the prompts side by side."""
    headers = [
        "Seed",
        *(f"{name} (Δ, 95% CI)" for name in METRIC_NAMES.values()),
        "Paired test p",
        "Dev before → after",
        "Compile calls / USD",
        "Test calls / USD",
    ]
    base = summary.baseline_test
    spend = summary.baseline_evaluation
    split = (
        "a train/dev split of its own (test: the cases no seed's split trains or selects on)"
        if summary.plan.get("split_per_seed")
        else "the same train/dev split"
    )
    parts = [
        DIFF_CSS,
        f"<h2>Across optimizer seeds</h2><p class=lead>Each seed compiled on {split} and "
        f"scored on the same test cases as the baseline {esc(summary.baseline)} (RMR {num(base.get('rmr_avg'))}, "
        f"RMR@1.0 {num(base.get('rmr_exact'))}, RDR {num(base.get('rdr'))}; {spend.get('calls', 0):,} calls, "
        f"{_money(spend.get('usd'))}). Δ is seed minus baseline on the cases both scored with its paired "
        "bootstrap CI; a seed beats the baseline when its RMR interval excludes 0. The last row: mean ± sample "
        "standard deviation [range] across seeds. The verdict (in bold) is about the optimizer: its mean gain "
        "across seeds with a 95% interval that resamples the test units and the seeds (so the spread between "
        "seeds is in it)"
        + (
            f"; its p-value is Holm-adjusted across the {len(summary.optimizers)} optimizers"
            if len(summary.optimizers) > 1
            else ""
        )
        + ".</p>",
    ]
    for result in summary.optimizers:
        parts.append(f"<h3>{esc(result.optimizer)}</h3><p><b>{esc(result.verdict)}</b></p>")
        parts.append(table(headers, _seed_rows(result), "num"))
        parts.append(_prompt_diffs(result))
    return "".join(parts)
