"""Every interval resamples the benchmark's independent unit, checked against bootstraps written here.

A SafePyramid conversation's three levels, a PKU-SafeRLHF prompt's two responses and a custom
group are one unit each; the reference intervals below draw units with plain numpy, independently
of the package's resampling code, and the package's intervals must be as wide (within 10%).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from sp_dspy._benchmarks import load_benchmark
from sp_dspy._data._schema import Case
from sp_dspy._metrics import PolicyRecord, case_outcomes, compare_cells, outcome_matrix, score
from sp_dspy._metrics._bootstrap import bootstrap_matrix
from sp_dspy._metrics._seed_gain import seed_gain
from tests._factories import raw_case

RULES = {n: f"Rule number {n} applies." for n in range(1, 4)}
N_CONVERSATIONS = 40
PKU_FIXTURE = Path(__file__).parent / "fixtures" / "pku" / "rows.jsonl"


def width(interval: list[float] | None) -> float:
    assert interval is not None
    return interval[1] - interval[0]


def reference_width(per_unit: np.ndarray, *, n_boot: int = 4000, seed: int = 123) -> float:
    """The 95% percentile interval's width of a ratio of unit totals (row: hits, cases), units drawn
    with replacement: the conversation-level bootstrap, written without the package's code."""
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(per_unit), size=(n_boot, len(per_unit)))
    hits, cases = per_unit[draws, 0].sum(axis=1), per_unit[draws, 1].sum(axis=1)
    low, high = np.percentile(100.0 * hits / cases, [2.5, 97.5])
    return float(high - low)


def conversations(
    right: set[int], count: int = N_CONVERSATIONS
) -> tuple[list[Case], dict[str, PolicyRecord]]:
    """``count`` conversations at L0, L1 and L2 whose three levels share one outcome: exact when in ``right``."""
    cases, records = [], {}
    for n in range(count):
        for level in ("L0", "L1", "L2"):
            case_id = f"conv-{n:03d}-{level.lower()}"
            cases.append(Case.model_validate(raw_case(case_id, level=level, rules=RULES, gt=[1])))
            predicted = [1] if n in right else [1, 2]
            records[case_id] = PolicyRecord.model_validate({"id": case_id, "violated_rules": predicted})
    return cases, records


RIGHT = {n for n in range(N_CONVERSATIONS) if n % 5 in (0, 2, 3)}  # 24 of 40 right: RMR@1.0 = 60


def test_correlated_levels_give_an_all_interval_as_wide_as_a_conversation_bootstrap() -> None:
    cases, records = conversations(RIGHT)
    report = score(cases, records, n_boot=4000)
    assert report.cells["ALL"]["rmr_exact"] == 60.0
    per_unit = np.array([[3 * (n in RIGHT), 3] for n in range(N_CONVERSATIONS)])
    expected = reference_width(per_unit)
    assert width(report.ci["ALL"]["rmr_exact"]) == pytest.approx(expected, rel=0.10)
    # The ALL cell holds no more independent evidence than one level (40 conversations either way).
    assert width(report.ci["ALL"]["rmr_exact"]) == pytest.approx(
        width(report.ci["L0"]["rmr_exact"]), rel=0.15
    )
    # Resampling cases one by one (what intervals did before) is about 1/sqrt(3) as wide: wrong.
    by_case = bootstrap_matrix(outcome_matrix(case_outcomes(cases, records)), name="ALL", n_boot=4000)
    assert by_case is not None and width(by_case["rmr_exact"]) < 0.7 * expected


def pku_rows(count: int) -> list[dict[str, object]]:
    """``count`` distinct prompts built from the fixture's rows (texts made unique)."""
    base = [json.loads(line) for line in PKU_FIXTURE.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = []
    for n in range(count):
        row = dict(base[n % len(base)])
        row.pop("response_0_sha256", None)
        row.pop("response_1_sha256", None)
        row["prompt"] = f"{row['prompt']} (variant {n})"
        rows.append(row)
    return rows


def test_pku_pairs_are_resampled_by_prompt(tmp_path: Path) -> None:
    path = tmp_path / "pku.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in pku_rows(N_CONVERSATIONS)), encoding="utf-8")
    cases = load_benchmark(path, benchmark="pku-saferlhf").cases
    prompts = sorted({case.unit for case in cases})
    assert len(cases) == 2 * len(prompts) == 2 * N_CONVERSATIONS
    right = {unit for i, unit in enumerate(prompts) if i % 5 in (0, 2, 3)}
    records = {}
    for case in cases:
        gold = sorted(case.ground_truth_violations)
        wrong = [*gold, next(rule for rule in range(1, 20) if rule not in gold)]
        predicted = gold if case.unit in right else wrong
        records[case.id] = PolicyRecord.model_validate({"id": case.id, "violated_rules": predicted})
    report = score(cases, records, n_boot=4000, by="none")
    assert report.cells["ALL"]["rmr_exact"] == 60.0
    per_unit = np.array([[2 * (unit in right), 2] for unit in prompts])
    assert width(report.ci["ALL"]["rmr_exact"]) == pytest.approx(reference_width(per_unit), rel=0.10)


def test_a_custom_group_is_one_unit_and_an_ungrouped_case_is_its_own() -> None:
    grouped = Case.model_validate(raw_case("a-1", extra={"benchmark": "custom", "group": "g1"}))
    alone = Case.model_validate(raw_case("b-2", extra={"benchmark": "custom"}))
    assert (grouped.unit, alone.unit) == ("g1", "b-2")


def test_paired_comparisons_and_the_verdict_resample_the_same_conversations() -> None:
    count = 200  # a finer lattice of differences than 40 units give (steps of 0.5 points, not 2.5)
    right = {n for n in range(count) if n % 5 in (0, 2, 3)}
    cases, base = conversations(set(range(0, count, 2)), count)  # half right
    _, better = conversations(right, count)  # 60% right, not nested: discordant both ways
    cell = compare_cells(cases, base, better, n_boot=4000)["ALL"]
    assert (cell.paired.n_pairs, cell.paired.n_units, cell.test.n_units) == (3 * count, count, count)
    # The reference: conversations drawn once, both sides summed over the same draws.
    per_unit = np.array([[3 * (n in right) - 3 * (n % 2 == 0), 3] for n in range(count)])
    rng = np.random.default_rng(7)
    draws = rng.integers(0, count, size=(4000, count))
    diffs = 100.0 * per_unit[draws, 0].sum(axis=1) / per_unit[draws, 1].sum(axis=1)
    low, high = np.percentile(diffs, [2.5, 97.5])
    assert width(cell.paired.ci["rmr_exact"]) == pytest.approx(high - low, rel=0.10)
    # The verdict's gain over two identical seeds has no between-seed spread: the paired interval.
    gain = seed_gain(cases, base, [better, better], n_boot=4000)
    assert (gain.n_pairs, gain.n_units, gain.unit) == (3 * count, count, "conversation")
    assert gain.mean == cell.paired.diff["rmr_avg"]
    assert width(gain.ci) == pytest.approx(width(cell.paired.ci["rmr_avg"]), rel=0.10)


def test_the_verdicts_interval_includes_the_between_seed_spread() -> None:
    cases, base = conversations(set(range(0, N_CONVERSATIONS, 2)))
    _, lucky = conversations(set(range(0, N_CONVERSATIONS, 2)) | {1, 3, 5, 7, 9, 11})  # +15 points
    _, unlucky = conversations(set(range(0, N_CONVERSATIONS, 2)) - {0, 2, 4, 6, 8, 10})  # -15 points
    steady = seed_gain(cases, base, [lucky, lucky], n_boot=2000)
    spread = seed_gain(cases, base, [lucky, unlucky], n_boot=2000)
    assert steady.mean == 15.0 and spread.mean == 0.0
    assert steady.ci is not None and steady.ci[0] > 0 and steady.p_value is not None and steady.p_value < 0.05
    assert (
        spread.ci is not None
        and spread.ci[0] < 0 < spread.ci[1]
        and width(spread.ci) > 1.5 * width(steady.ci)
    )


def test_holm_adjusts_a_family_of_p_values_step_down() -> None:
    from sp_dspy._metrics import holm

    # Sorted 0.01, 0.03, 0.04 of m = 3: x3, x2, x1, kept monotone; an untested one stays None.
    assert holm([0.04, None, 0.01, 0.03]) == pytest.approx([0.06, None, 0.03, 0.06], nan_ok=False)  # type: ignore[arg-type]
    assert holm([0.5, 0.6]) == [1.0, 1.0]
    assert holm([]) == []


def test_the_verdict_names_the_gain_its_interval_and_the_holm_adjustment() -> None:
    from sp_dspy._ablate._seeds import SeedResult, verdict
    from sp_dspy._metrics._seed_gain import SeedGain

    seeds = [
        SeedResult(optimizer="mipro", seed=n, label=f"mipro-s{n}", artifact="", test={}, diff={"rmr_avg": d},
                   ci={"rmr_avg": [d - 3, d + 3]}, beats_baseline=d - 3 > 0)
        for n, d in enumerate((2.0, 6.0, 7.0))
    ]  # fmt: skip
    gain = SeedGain(n_seeds=3, n_pairs=300, n_units=100, unit="conversation", mean=5.0, ci=[1.2, 8.4],
                    p_value=0.004, p_holm=0.008)  # fmt: skip
    text = verdict("mipro", seeds, "official", gain, n_optimizers=2)
    assert text == (
        "mipro against official: mean RMR gain +5.0 over 3 seeds, 95% CI [+1.2, +8.4] (conversations and seeds "
        "resampled), p = 0.008 Holm-adjusted across 2 optimizers: mipro beats the baseline; per seed: 2 of 3 "
        "seeds beat official (RMR, 95% paired CI excluding 0); seeds ranging +2.0 to +7.0."
    )
    alone = verdict("mipro", seeds, "official", gain.model_copy(update={"ci": [-0.5, 8.4], "p_value": 0.09}))
    assert "p = 0.090: no gain shown" in alone and "Holm" not in alone
