"""Plain-language caveats printed above the numbers: when a ranking is not warranted."""

from __future__ import annotations

from collections.abc import Sequence

from ._model import CELLS, VariantResult

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
        for cell in CELLS:
            interval = entry.cells[cell].rmr_ci
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
    for entry in variants:
        if entry.small_model:
            notes.append(
                f"{entry.label}: {entry.model or 'a SmolLM model'} is a 135M-parameter local model;"
                " this run is a plumbing check, not a guard. Its scores say nothing about guarding quality."
            )
        if entry.fake_model:
            notes.append(
                f"{entry.label}: the scripted fake LM produced these results; they test the pipeline, not a model."
            )
        if entry.is_per_rule and not entry.official_layout:
            notes.append(
                f"{entry.label}: per-rule with the cache-friendly layout ({entry.layout}), not the"
                " official per-rule protocol; published per-rule figures are not directly comparable."
            )
        total = entry.cells["ALL"]
        excluded = total.excluded_pct
        if excluded > HIGH_EXCLUSION:
            notes.append(
                f"{entry.label}: {excluded:g}% of cases were excluded (refused, unparseable, errored or"
                " missing); its RMR describes only the remaining cases."
            )
        other = sorted(h for h in entry.dataset_hashes if content_hash and h != content_hash)
        if other:
            notes.append(
                f"{entry.label}: its run manifest names another dataset (sha256 {other[0][:12]}…) than the"
                f" one scored here ({content_hash[:12]}…)."
            )
        unknown = entry.score.get("unknown_ids", {}).get("count", 0)
        if unknown:
            notes.append(f"{entry.label}: {unknown} result id(s) are not in this dataset (wrong --dataset?).")
        bad = entry.score.get("bad_lines", 0)
        if bad:
            notes.append(f"{entry.label}: {bad} malformed result line(s) were skipped.")
        coverage = total.cost_coverage
        if 0 < coverage < 100:
            notes.append(f"{entry.label}: only {coverage:g}% of its cases reported a dollar cost.")
        hits, calls = total.cache_hits, total.lm_calls
        if hits:
            notes.append(
                f"{entry.label}: {hits} of {calls} LM answers came from the response cache; their tokens"
                " and dollars are counted as when first produced."
            )
    return notes
